// Burns CPU so a suite can be run on a machine that is busy, as CI runners and shared developer
// machines often are:
//
//   npm run burn                      one core, until Ctrl-C / SIGTERM
//   npm run burn -- --cores 2         two cores
//   npm run burn -- --seconds 300     stops by itself after 5 minutes
//
//   npm run burn & npm run test:resilience; kill %1
//
// Each core is a worker thread spinning on integer arithmetic at normal priority (not niced: the point
// is to compete with the tests for the CPU as another job would). Touches no file and no socket;
// prints one line when it starts and one when it stops. It stops on SIGINT/SIGTERM/SIGHUP, and also
// when a process that started it (tsx, sh, npm) is gone: a `kill` of npm's pid does not reach the
// script, and a forgotten burner must not outlive its run.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';

// The spin, as a worker of its own: a loop that never sleeps, and looks at its messages (a stop)
// every ~50 ms of work.
const SPIN = `
const { parentPort } = require('node:worker_threads');
let stop = false;
parentPort.on('message', () => (stop = true));
let x = 1;
const spin = () => {
  const until = performance.now() + 50;
  while (performance.now() < until) x = (x * 1103515245 + 12345) % 2147483648;
  if (stop) process.exit(0);
  setImmediate(spin);
};
spin();
`;

const { values } = parseArgs({ options: { cores: { type: 'string', default: '1' }, seconds: { type: 'string' } } });
const cores = Number(values.cores);
const seconds = values.seconds === undefined ? Infinity : Number(values.seconds);
if (!Number.isInteger(cores) || cores < 1 || !(seconds > 0)) {
  process.stderr.write('usage: npm run burn -- [--cores N (default 1)] [--seconds S (default: until stopped)]\n');
  process.exit(2);
}

const workers = Array.from({ length: cores }, () => new Worker(SPIN, { eval: true }));
const started = performance.now();
process.stdout.write(`cpu-burner: pid ${process.pid}, burning ${cores} core${cores > 1 ? 's' : ''} ${Number.isFinite(seconds) ? `for ${seconds} s` : 'until stopped'}\n`);

let stopping = false;
function stop(why: string) {
  if (stopping) return;
  stopping = true;
  for (const w of workers) w.postMessage('stop');
  process.stdout.write(`cpu-burner: stopped (${why}) after ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
  setTimeout(() => process.exit(0), 500).unref();
}
/**
 * Whom to outlive not: the parent, and when run by `npm run burn` every process up to npm (tsx, sh,
 * npm; Linux /proc). Not further: a shell or job above npm may well end first on purpose.
 */
function ancestors(): number[] {
  const chain: number[] = [];
  let pid = process.ppid;
  while (pid > 1 && chain.length < 5) {
    chain.push(pid);
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('npm')) return chain;
      // /proc/<pid>/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      break;
    }
  }
  return [process.ppid];
}
const startedBy = ancestors();
setInterval(() => {
  for (const pid of startedBy) {
    try {
      process.kill(pid, 0);
    } catch {
      stop(`parent ${pid} is gone`);
    }
  }
}, 500).unref();

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => stop(signal));
if (Number.isFinite(seconds)) setTimeout(() => stop('time'), seconds * 1000);
