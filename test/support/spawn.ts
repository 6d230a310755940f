// Starts the real service as a child process, as a user would: `node --import tsx src/server.ts`
// in the project directory, with an environment of the test's choosing. Each start gets a free
// port and (unless the test passes its own) a fresh SVC_DATA_DIR. stdout and stderr are collected;
// stdout's JSON log lines are parsed. Children still running when the test process exits are
// killed, and each child also kills itself should its parent disappear (die-with-parent.ts).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const PROJECT_DIR = fileURLToPath(new URL('../../', import.meta.url));
const SERVER = path.join(PROJECT_DIR, 'src/server.ts');
const DIE_WITH_PARENT = pathToFileURL(fileURLToPath(new URL('./die-with-parent.ts', import.meta.url))).href;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The runtime svc runs on (`SVC_TEST_RUNTIME`: node, the default, bun or deno; CI runs the service-level
 * suites on each, docs/runtimes.md). Bun and Deno run the TypeScript sources themselves; the runtime's
 * binary is the one on PATH (`.ci/run` puts the npm registry's `bun` and `deno` packages there).
 */
export const RUNTIME = (process.env.SVC_TEST_RUNTIME || 'node') as 'node' | 'bun' | 'deno';
if (!['node', 'bun', 'deno'].includes(RUNTIME)) throw new Error(`SVC_TEST_RUNTIME=${RUNTIME}: expected node, bun or deno`);

/**
 * The command that starts svc's sources on `RUNTIME` (its door, src/server*.ts), with die-with-parent.ts
 * preloaded unless `preload` is false (a test about what happens to an orphaned svc).
 */
export function svcCommand({ preload = true } = {}): [string, string[]] {
  const dieWithParent = fileURLToPath(DIE_WITH_PARENT);
  const door = (name: string) => path.join(PROJECT_DIR, `src/server-${name}.ts`);
  if (RUNTIME === 'bun') return ['bun', ['--conditions=svc-source', ...(preload ? ['--preload', dieWithParent] : []), door('bun')]];
  if (RUNTIME === 'deno') return ['deno', ['run', '--allow-all', '--conditions=svc-source', ...(preload ? ['--preload', dieWithParent] : []), door('deno')]];
  return [process.execPath, ['--conditions=svc-source', '--import', 'tsx', ...(preload ? ['--import', DIE_WITH_PARENT] : []), SERVER]];
}

/** Where the OS's ephemeral ports (those outgoing connections take) start. */
function ephemeralStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (low) return low;
  } catch {
    // not Linux
  }
  return 32768;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Where freePort's picks end: 27000, or the ephemeral range's start if lower. */
export const freePortTop = (): number => Math.min(ephemeralStart(), 27_000);

const picked = new Set<number>();
/**
 * Ports that `fetch` (undici) and browsers refuse to connect to, the Fetch standard's "bad ports"; 10080 is
 * the only one from 10000 up. A server there starts, and every probe of it fails: a deployment run
 * failed so ("svc did not start", though svc was listening).
 */
const BAD_PORTS = new Set([10080]);
/**
 * A free port for a server a test starts: 10000 up to 27000 (below MongoDB's 27017 and the cluster suite's
 * Sentinels) and below the ephemeral range, never handed out before by this process, and no bad port
 * (BAD_PORTS). Not the port 0 trick: between it and the server's listen, any outgoing connection may take
 * that ephemeral port as its own (a deployment run failed so: EADDRINUSE).
 */
export async function freePort(): Promise<number> {
  const top = freePortTop();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 10_000 + Math.floor(Math.random() * (top - 10_000));
    if (picked.has(port) || BAD_PORTS.has(port) || !(await canListen(port))) continue;
    picked.add(port);
    return port;
  }
  throw new Error('no free port below the ephemeral range');
}

/** A fresh temporary directory, removed by `cleanupTempDirs()` (called by `stopAll()`). */
const tempDirs = new Set<string>();
export function tempDir(label = 'svc-test-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), label));
  tempDirs.add(dir);
  return dir;
}

export interface LogLine {
  level?: number;
  msg?: string;
  [key: string]: unknown;
}

export interface SpawnOptions {
  /** Added to a minimal environment (PATH, HOME...). `undefined` values remove a variable. */
  env?: Record<string, string | undefined>;
  /** SVC_APP_PATH: where svc looks for svc.config.{ts,js,json}. Default: a fresh empty temp dir. */
  appRoot?: string;
  /** SVC_DATA_DIR. Default: a fresh temp dir. */
  dataDir?: string;
  /** PORT. Default: a free port. */
  port?: number;
  /** How long to wait for `GET /health` to answer (any status) or the process to exit. */
  startTimeoutMs?: number;
  /** Another command than `svcCommand()`'s, run in the project's folder (e.g. `bun bin/start.js`, as a user starts it). */
  command?: [string, string[]];
}

export interface SvcProcess {
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  readonly dataDir: string;
  /** `GET /health` answered (with any status) before the process exited. */
  readonly ready: boolean;
  /** Exit code, or null while running (or when killed by a signal). */
  readonly exitCode: number | null;
  readonly signalCode: NodeJS.Signals | null;
  readonly running: boolean;
  /** Resolves with the exit code (null when a signal killed it) once the process has exited. */
  readonly exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
  /** stdout's JSON log lines, in order (non-JSON lines are left out). */
  logs(): LogLine[];
  /** Resolves with the first log line (past or future) that matches; rejects after `timeoutMs`. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** Sends `signal` and resolves with the exit code; SIGKILLs after `timeoutMs`. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  /** stdout + stderr, for assertion messages. */
  output(): string;
}

const live = new Set<ChildProcess>();
let exitHook = false;
function track(child: ChildProcess) {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const c of live) c.kill('SIGKILL');
  });
}

/** Kills every svc process still running (SIGKILL) and removes the temp dirs. For `afterAll`. */
export async function stopAll(): Promise<void> {
  const waiting = [...live].map((c) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', () => r()))));
  for (const c of live) c.kill('SIGKILL');
  await Promise.all(waiting);
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'SystemRoot']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** `GET url` with a timeout; resolves with the status, or null when nothing answered. */
async function probe(url: string, timeoutMs: number): Promise<number | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return null;
  }
}

/**
 * Starts svc and waits until `GET /health` answers or the process exits (whichever comes first).
 * Never throws for a process that fails to start: check `ready`, `exitCode` and `stderr()`.
 * A picked port that someone else took in the meantime (EADDRINUSE) is retried with another.
 */
export async function startSvc(opts: SpawnOptions = {}): Promise<SvcProcess> {
  for (let attempt = 1; ; attempt++) {
    const svc = await startOnce(opts);
    if (svc.ready || opts.port !== undefined || attempt === 3 || !svc.stderr().includes('EADDRINUSE')) return svc;
  }
}

async function startOnce(opts: SpawnOptions): Promise<SvcProcess> {
  const port = opts.port ?? (await freePort());
  const dataDir = opts.dataDir ?? tempDir('svc-data-');
  const appRoot = opts.appRoot ?? tempDir('svc-app-');
  const env: Record<string, string> = {
    ...baseEnv(),
    HOST: '127.0.0.1',
    PORT: String(port),
    SVC_APP_PATH: appRoot,
    SVC_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
  };
  for (const [name, value] of Object.entries(opts.env ?? {})) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }

  // svc's TypeScript sources, the workspace packages' too (the CLI connector's `exports` name them under
  // svc-source; without it Node takes their dist/, which only a build makes).
  const [command, args] = opts.command ?? svcCommand();
  const child = spawn(command, args, {
    cwd: PROJECT_DIR,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);

  let out = '';
  let err = '';
  const lines: LogLine[] = [];
  const waiters = new Set<(line: LogLine) => void>();
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    out += text;
    partial += text;
    const complete = partial.split('\n');
    partial = complete.pop() ?? '';
    for (const raw of complete) {
      if (!raw.trim()) continue;
      try {
        const line = JSON.parse(raw) as LogLine;
        lines.push(line);
        for (const w of waiters) w(line);
      } catch {
        // not a log line
      }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });

  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(child.exitCode));
  });
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const url = `http://127.0.0.1:${port}`;
  let ready = false;
  const deadline = Date.now() + (opts.startTimeoutMs ?? 20_000);
  while (!hasExited && Date.now() < deadline) {
    if ((await probe(`${url}/health`, 2500)) !== null && !hasExited) {
      ready = true;
      break;
    }
    await Promise.race([sleep(100), exited]);
  }

  const handle: SvcProcess = {
    pid: child.pid!,
    port,
    url,
    dataDir,
    ready,
    get exitCode() {
      return child.exitCode;
    },
    get signalCode() {
      return child.signalCode;
    },
    get running() {
      return child.exitCode === null && child.signalCode === null;
    },
    exited,
    stdout: () => out,
    stderr: () => err,
    output: () => `--- stdout ---\n${out}\n--- stderr ---\n${err}`,
    logs: () => [...lines],
    waitForLog(match, timeoutMs = 5000) {
      const found = lines.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no matching log line within ${timeoutMs} ms\n${handle.output()}`));
        }, timeoutMs);
        const waiter = (line: LogLine) => {
          if (!match(line)) return;
          clearTimeout(timer);
          waiters.delete(waiter);
          resolve(line);
        };
        waiters.add(waiter);
      });
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (!handle.running) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  return handle;
}

/** Like `startSvc`, but throws (with the process output) unless `/health` answered. */
export async function startReadySvc(opts: SpawnOptions = {}): Promise<SvcProcess> {
  const svc = await startSvc(opts);
  if (!svc.ready) {
    await svc.stop('SIGKILL');
    throw new Error(`svc did not start (exit code ${svc.exitCode})\n${svc.output()}`);
  }
  return svc;
}
