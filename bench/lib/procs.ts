// Child processes of the bench: started on free loopback ports, tracked, and killed when the bench
// exits or is interrupted. Each Node child also preloads die-with-parent.mjs, and redis-server runs
// under guard.ts, so nothing outlives a bench that was SIGKILLed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const PROJECT_DIR = fileURLToPath(new URL('../../', import.meta.url));
const DIE_WITH_PARENT = pathToFileURL(fileURLToPath(new URL('./die-with-parent.mjs', import.meta.url))).href;
const GUARD = fileURLToPath(new URL('./guard.ts', import.meta.url));

// One way to find a port and to wait, shared with the test suites.
export { freePort, sleep } from '../../test/support/spawn.ts';
import { Redis } from 'ioredis';
import { sleep } from '../../test/support/spawn.ts';
import { npmStartNodeFlags } from '../../test/support/start-script.ts';

const live = new Set<ChildProcess>();
let hooked = false;

function killAll(signal: NodeJS.Signals) {
  for (const child of live) child.kill(signal);
}

/** Kills every child on exit, Ctrl-C and SIGTERM (once). */
function hookExit() {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => killAll('SIGKILL'));
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}, stopping children\n`);
      killAll('SIGKILL');
      process.exit(130);
    });
  }
}

/** A minimal environment: nothing of the caller's (no MONGODB_URL, no CACHE_URL) leaks in. */
/**
 * Secrets for svc (store URL, admin password) as production should hand them over: in the app root's
 * `.env` (mode 600), which svc reads itself. In svc's process environment they would make it start a
 * second process without them (src/secret-env.ts), and the pid the bench measures (RSS, CPU) would be
 * that first process, not the service.
 */
export function writeDotEnv(appRoot: string, vars: Record<string, string>): void {
  const lines = Object.entries(vars).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  writeFileSync(path.join(appRoot, '.env'), `${lines.join('\n')}\n`, { mode: 0o600 });
}

export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

export interface Child {
  readonly name: string;
  readonly pid: number;
  readonly process: ChildProcess;
  /** The last 16 KB of stdout + stderr, for error messages. */
  output(): string;
  readonly running: boolean;
  stop(): Promise<void>;
}

export interface StartOptions {
  name: string;
  /**
   * Program and arguments; `node` means this Node with tsx and die-with-parent preloaded; `node-js`
   * this Node with die-with-parent only (compiled JavaScript: nothing of tsx in its memory).
   */
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  /** CPUs to run on (`taskset -c <cpus>`, e.g. "0"); the process and every thread it makes stay there. */
  cpus?: string;
  /** A program the server runs under, with its arguments (`valgrind --tool=callgrind ...`): it execs the server in its own process. */
  wrap?: string[];
}

/**
 * The node flags `npm start` gives the Node that runs the bench (package.json's start script picks the
 * young generation's size by Node version), so that the benches run svc exactly as `npm start` does:
 * `['node-js', ...flags, 'bin/start.js']` for `startChild`.
 */
export const npmStartFlags = (): string[] => npmStartNodeFlags();

/** Those of them that are V8's (Deno takes them as `--v8-flags`): all but Node's own `--v8-pool-size`. */
export const npmStartV8Flags = (): string[] => npmStartFlags().filter((flag) => !flag.startsWith('--v8-pool-size'));

export function startChild(opts: StartOptions): Child {
  hookExit();
  const [program, ...args] = opts.argv;
  if (!program) throw new Error('startChild: empty argv');
  const command = program === 'node' || program === 'node-js' ? process.execPath : program;
  const fullArgs = program === 'node' ? ['--conditions=svc-source', '--import', 'tsx', '--import', DIE_WITH_PARENT, ...args] : program === 'node-js' ? ['--import', DIE_WITH_PARENT, ...args] : args;
  // taskset execs the program (and valgrind runs it in its own process): the pid is the program's own.
  const wrapped = [...(opts.wrap ?? []), command, ...fullArgs];
  const [file, argv] = opts.cpus ? ['taskset', ['-c', opts.cpus, ...wrapped]] : [wrapped[0]!, wrapped.slice(1)];
  const child = spawn(file, argv, { cwd: opts.cwd ?? PROJECT_DIR, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString('utf8')).slice(-16_384);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      live.delete(child);
      resolve();
    });
    child.once('error', (err) => {
      out += `\nspawn error: ${err.message}`;
      live.delete(child);
      resolve();
    });
  });
  return {
    name: opts.name,
    pid: child.pid ?? -1,
    process: child,
    output: () => out,
    get running() {
      return child.exitCode === null && child.signalCode === null;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** redis-server (under guard.ts) with no persistence, bound to loopback. */
export function startRedisServer(port: number): Child {
  return startChild({
    name: 'redis-server',
    argv: ['node', GUARD, 'redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
    env: baseEnv(),
  });
}

/** Waits until `GET url` answers 200 (or throws with the child's output). */
export async function waitHealthy(child: Child, url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!child.running) throw new Error(`${child.name} exited before it was ready:\n${child.output()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${child.name} did not answer ${url} within ${timeoutMs} ms:\n${child.output()}`);
}

function procStatus(pid: number, field: 'VmHWM' | 'VmRSS'): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Peak resident set size of a process in bytes (VmHWM: the kernel's high-water mark), or null when it is gone. */
export const peakRss = (pid: number) => procStatus(pid, 'VmHWM');

/** Current resident set size in bytes (VmRSS). */
export const currentRss = (pid: number) => procStatus(pid, 'VmRSS');

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux everywhere in practice). */
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

/** CPU seconds (user + system, all threads) a process has used so far, or null when it is gone. */
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) in parentheses: utime is the 14th field, stime the 15th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/**
 * Ticks of CPU `cpu` so far, busy and in all (`/proc/stat`; idle and iowait are the idle ones): two readings
 * give how busy that core was between them, whoever ran on it. Null where `/proc/stat` is not readable.
 */
export function coreTicks(cpu: string): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith(`cpu${cpu} `));
    if (!line) return null;
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const total = ticks.reduce((a, b) => a + b, 0);
    return { busy: total - ticks[3]! - (ticks[4] ?? 0), total };
  } catch {
    return null;
  }
}

/** How busy a core was between two `coreTicks` readings (0-1); NaN without them. */
export const coreBusy = (before: ReturnType<typeof coreTicks>, after: ReturnType<typeof coreTicks>): number =>
  before && after && after.total > before.total ? (after.busy - before.busy) / (after.total - before.total) : NaN;

/**
 * CPU seconds of each thread of `pid` (`/proc/<pid>/task/<tid>/stat`), keyed `main` for the event loop's
 * thread and `<name>:<tid>` for the others (Node 20 names them all `node`; libuv's pool runs the password
 * hashes, V8's helpers the garbage collection): where a process's CPU went. {} off Linux.
 */
export function threadCpuSeconds(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main' : `${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).trim()}:${tid}`;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out[name] = (out[name] ?? 0) + (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/**
 * Pins this process, every thread it has and every child it starts from now on (unless told otherwise)
 * to `cpus` (`taskset -a -p -c`). Throws when taskset fails.
 */
export function pinSelf(cpus: string): void {
  const r = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`taskset -a -p -c ${cpus} ${process.pid} failed: ${r.error?.message ?? r.stderr}`);
}

/** A client of the redis-server `child` started, once it answers (10 s at most). */
export async function redisReady(url: string, child: Child): Promise<Redis> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {}); // reported by connect() below
    try {
      await client.connect();
      await client.ping();
      return client;
    } catch (err) {
      client.disconnect();
      if (!child.running || Date.now() > deadline) throw new Error(`redis-server did not start: ${(err as Error).message}\n${child.output()}`, { cause: err });
      await sleep(100);
    }
  }
}
