// `npx tsx bench/startup.ts [runs]`: start-up time (spawn to the first 200 from /health) and idle RSS
// (2 s after that) of the service run from the TypeScript sources through tsx (what `npm start` did
// before) and compiled (`node bin/start.js` on a fresh dist/, what it does now), alternating, embedded
// store and database, an empty app root. Prints a markdown table.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { freePort, sleep, tempDir } from '../test/support/spawn.ts';
import { npmStartFlags } from './lib/procs.ts';

const RUNS = Number(process.argv[2] ?? 5);
const PROJECT = fileURLToPath(new URL('..', import.meta.url));
const variants = {
  'tsx src/server.ts (before)': ['--import', 'tsx', 'src/server.ts'],
  'node bin/start.js, dist/ (now)': [...npmStartFlags(), 'bin/start.js'],
};

async function once(args: string[]): Promise<{ ms: number; rssMb: number }> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: PROJECT,
    env: { PATH: process.env.PATH, PORT: String(port), SVC_APP_PATH: tempDir('svc-boot-app-'), SVC_DATA_DIR: tempDir('svc-boot-data-'), LOG_LEVEL: 'warn' },
    stdio: 'ignore',
  });
  try {
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) break;
      } catch {
        // not yet
      }
      await sleep(20);
    }
    const ms = performance.now() - started;
    await sleep(2000);
    const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]!;
    return { ms, rssMb: Number(rss) / 1024 };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

const results = new Map<string, { ms: number[]; rss: number[] }>(Object.keys(variants).map((k) => [k, { ms: [], rss: [] }]));
for (let i = 0; i < RUNS; i++) {
  const order = i % 2 ? Object.entries(variants).reverse() : Object.entries(variants);
  for (const [name, args] of order) {
    const r = await once(args);
    results.get(name)!.ms.push(r.ms);
    results.get(name)!.rss.push(r.rssMb);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
process.stdout.write(`start-up, ${RUNS} runs each, alternating (load ${loadavg()[0]!.toFixed(1)})\n\n| how | start-up ms (median) | idle RSS MB (median) |\n|---|---:|---:|\n`);
for (const [name, r] of results) process.stdout.write(`| ${name} | ${median(r.ms).toFixed(0)} | ${median(r.rss).toFixed(0)} |\n`);
