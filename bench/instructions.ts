// `npm run bench:instructions`: the CPU instructions a server spends per request, counted by valgrind's
// callgrind, for svc's session route and bare Hono. On a VM whose speed moves from one minute to the next
// (docs/benchmarks.md, stops 79 and 80), requests per second and even CPU time per request vary by a third;
// an instruction count does not depend on the speed the host gives the VM. It has a spread of its own: runs of
// one build differ by the JIT's state (docs/benchmarks.md, stop 81), V8 still compiling in the counted window,
// or optimized code falling back to V8's runtime. The table shows both shares: compare alternating runs whose
// shares are alike. Each stack runs alone under callgrind (50 times slower): started, logged
// in, warmed up (the JIT done: `--warmup` requests), then counted over `--requests` requests; the server
// idle for as long is counted too and taken off (its timers: queue polls, health checks, key tracking).
// User space only: the kernel's share (the socket writes) is not counted, and is about the same for every
// stack of the same answer size. Node and Bun stacks (bench/stacks.ts; Bun's binary has no symbols, so its
// JIT's share is not told apart). Needs valgrind (Debian: `valgrind`). On Bun a count moves from one server to
// the next by up to a fifth, and between windows of one server by about 6%: count several (`--windows`),
// in alternating runs, and compare their medians (docs/benchmarks.md, stop 92).
//
// Options: --only svc-cache,bare (the stacks, by bench/stacks.ts's ids)  --warmup N (30000)  --requests N (10000)
//          --windows N (1: windows of --requests counted one after the other in the same server; the table
//          gives their median, the lower middle one for an even N, and their range)
//          --connections N (50)  --svc-dir DIR (another svc checkout)  --keep DIR (keep the callgrind files,
//          for `callgrind_annotate`; with CG_PERF_MAP=1 in the environment, Node writes /tmp/perf-<pid>.map,
//          which names the JIT's functions)
import autocannon from 'autocannon';
import type { Redis } from 'ioredis';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, PROJECT_DIR, redisReady, sleep, startRedisServer } from './lib/procs.ts';
import { commandDelta, commandStats } from './lib/stats.ts';
import { STACKS, type RunningStack, type Stack, type StackContext } from './stacks.ts';

const { values: opts } = parseArgs({
  options: {
    only: { type: 'string', default: 'svc-cache,bare' },
    warmup: { type: 'string', default: '30000' },
    requests: { type: 'string', default: '10000' },
    windows: { type: 'string', default: '1' },
    connections: { type: 'string', default: '50' },
    'svc-dir': { type: 'string' },
    keep: { type: 'string' },
  },
  strict: true,
});
const WARMUP = Number(opts.warmup);
const REQUESTS = Number(opts.requests);
const CONNECTIONS = Number(opts.connections);
const WINDOWS = Number(opts.windows);
for (const [name, n] of Object.entries({ warmup: WARMUP, requests: REQUESTS, connections: CONNECTIONS, windows: WINDOWS })) {
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: not a positive whole number`);
}
const log = (msg: string) => process.stderr.write(`${msg}\n`);

if (spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0) {
  log('valgrind is not on PATH: this bench counts instructions with it (Debian: apt-get install valgrind)');
  process.exit(2);
}
const stacks = opts.only.split(',').map((id) => {
  const stack = STACKS.find((s) => s.id === id.trim());
  if (!stack) throw new Error(`--only: no stack "${id}" (ids: ${STACKS.map((s) => s.id).join(', ')})`);
  return stack;
});

const outDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-callgrind-'));

/**
 * `callgrind_control` for the server `pid`. Valgrind names its control pipes after the server's USER,
 * LOGNAME and HOST (or HOSTNAME): the control side must see the same values, whatever the stack set.
 */
function control(pid: number, ...args: string[]): void {
  const theirs = Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const env: Record<string, string> = { PATH: process.env.PATH ?? '' };
  for (const name of ['USER', 'LOGNAME', 'HOST', 'HOSTNAME']) if (theirs[name] !== undefined) env[name] = theirs[name];
  const r = spawnSync('callgrind_control', [...args, String(pid)], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`callgrind_control ${args.join(' ')} ${pid}: ${r.stderr || r.stdout}`);
}

/** The dumps `control(pid, '-d')` wrote for stack `id` (`<id>.<pid>.<n>`), oldest first. */
const dumps = (id: string) =>
  readdirSync(outDir)
    .filter((f) => f.startsWith(`${id}.`) && /^\d+\.\d+$/.test(f.slice(id.length + 1)))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));

/** The newest dump of stack `id` (kept in `--keep`): its file and its instructions (its `totals:` line). */
function lastDump(id: string): { file: string; total: number } {
  const newest = dumps(id).pop();
  if (!newest) throw new Error(`${id}: callgrind wrote no dump`);
  const file = path.join(outDir, newest);
  const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(file, 'utf8'));
  if (!totals) throw new Error(`${id}: no totals in ${newest}`);
  if (opts.keep) {
    mkdirSync(opts.keep, { recursive: true });
    copyFileSync(file, path.join(opts.keep, newest));
  }
  return { file, total: Number(totals[1]) };
}

/**
 * What of a dump is the JIT's state rather than the server's code: V8's optimizing compilers at work
 * (their functions' own instructions) and V8's runtime functions with all they call (the slow paths
 * that optimized code and inline caches fall back to), but for allocation's (the young generation's
 * collections, a cost of the code's own). Runs of one build differ by these: docs/benchmarks.md, stop 81.
 */
function jitShares(file: string): { compiling: number; runtime: number } {
  const sum = (inclusive: boolean, pattern: RegExp) => {
    const r = spawnSync('callgrind_annotate', [`--inclusive=${inclusive ? 'yes' : 'no'}`, '--threshold=100', file], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
    if (r.status !== 0) throw new Error(`callgrind_annotate ${file}: ${r.stderr}`);
    let total = 0;
    for (const line of r.stdout.split('\n')) {
      // `<count> (<share>)  <file>:<function> [<object>]`; a file name has no colon.
      const m = /^\s*([\d,]+) \([\s\d.]+%\)\s+[^:\s]*:(.*)$/.exec(line);
      if (m && pattern.test(m[2]!)) total += Number(m[1]!.replaceAll(',', ''));
    }
    return total;
  };
  return { compiling: sum(false, /^v8::internal::(compiler|maglev|turboshaft)::/), runtime: sum(true, /^v8::internal::Runtime_(?!Allocate)/) };
}

/** `amount` requests over CONNECTIONS connections; the seconds they took, and how many were not 2xx. */
async function load(url: string, headers: Record<string, string>, amount: number): Promise<{ seconds: number; bad: number }> {
  const began = performance.now();
  const result = await autocannon({ url, connections: CONNECTIONS, amount, headers, timeout: 60 });
  return { seconds: (performance.now() - began) / 1000, bad: result.non2xx + result.errors + result.timeouts };
}

/** Waits until the dump count in `outDir` for `id` reaches `count` (a dump is written after the control command returns). */
async function dumped(id: string, count: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (dumps(id).length >= count) return;
    await sleep(100);
  }
  throw new Error(`${id}: callgrind's dump did not appear`);
}

interface Measured {
  /** The median window's instructions per request, and the range over the windows. */
  perRequest: number;
  range: [number, number];
  /** Per request, over all windows: V8 compiling, and in V8's runtime (`jitShares`). */
  compiling: number;
  runtime: number;
  idlePerSecond: number;
  /** One window's seconds (their mean). */
  seconds: number;
  commands: string;
}

async function measure(stack: Stack, ctx: StackContext, redis: Redis): Promise<Measured> {
  log(`${stack.id}: starting under callgrind (a minute or more)`);
  let running: RunningStack | undefined;
  try {
    running = await stack.start({ ...ctx, wrap: ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${path.join(outDir, `${stack.id}.%p`)}`] });
    const pid = running.child.pid;
    const credential = await stack.login(running.url);
    const headers = credential ? { [stack.header ?? 'cookie']: credential } : {};
    const url = `${running.url}${stack.path}`;
    log(`${stack.id}: warm-up, ${WARMUP} requests`);
    const warm = await load(url, headers, WARMUP);
    if (warm.bad) throw new Error(`${stack.id}: ${warm.bad} of the warm-up's answers were not 2xx`);
    control(pid, '-i', 'on');
    const before = await commandStats(redis);
    const windows: { busy: number; seconds: number }[] = [];
    const jit = { compiling: 0, runtime: 0 };
    for (let w = 1; w <= WINDOWS; w++) {
      control(pid, '-z');
      log(`${stack.id}: counting ${REQUESTS} requests${WINDOWS > 1 ? ` (window ${w} of ${WINDOWS})` : ''}`);
      const counted = await load(url, headers, REQUESTS);
      control(pid, '-d');
      if (counted.bad) throw new Error(`${stack.id}: ${counted.bad} answers were not 2xx`);
      await dumped(stack.id, w);
      const { file, total } = lastDump(stack.id);
      const shares = jitShares(file);
      jit.compiling += shares.compiling;
      jit.runtime += shares.runtime;
      windows.push({ busy: total, seconds: counted.seconds });
    }
    // What the store did meanwhile: a local cache that does not serve shows as a read per request.
    const counted = WINDOWS * REQUESTS;
    const delta = commandDelta(before, await commandStats(redis));
    const commands = Object.entries(delta).map(([name, n]) => `${name} ${(n / counted).toFixed(3)}`).join(', ') || 'none';
    // The same time idle: what the server's timers cost, not its requests. After a pause: the load's
    // connections closing, and what the load left to collect, are neither.
    const seconds = windows.reduce((sum, w) => sum + w.seconds, 0) / WINDOWS;
    await sleep(3000);
    control(pid, '-z');
    const idleBegan = performance.now();
    await sleep(seconds * 1000);
    control(pid, '-d');
    const idleSeconds = (performance.now() - idleBegan) / 1000;
    await dumped(stack.id, WINDOWS + 1);
    const idlePerSecond = lastDump(stack.id).total / idleSeconds;
    const perWindow = windows.map((w) => (w.busy - idlePerSecond * w.seconds) / REQUESTS).sort((a, b) => a - b);
    return {
      perRequest: perWindow[Math.floor((WINDOWS - 1) / 2)]!,
      range: [perWindow[0]!, perWindow[WINDOWS - 1]!],
      compiling: jit.compiling / counted,
      runtime: jit.runtime / counted,
      idlePerSecond,
      seconds,
      commands,
    };
  } finally {
    await running?.child.stop();
  }
}

const redisPort = await freePort();
const redisChild = startRedisServer(redisPort);
const ctx: StackContext = {
  redisUrl: `redis://127.0.0.1:${redisPort}`,
  nodeFlags: () => (process.env.CG_PERF_MAP ? ['--perf-basic-prof'] : []),
  profFlags: () => [],
  tempDirs: [],
  svcDir: path.resolve(opts['svc-dir'] ?? PROJECT_DIR),
  // Bun's allocator setting as bin/start.js makes it: given here, the entry does not start itself again
  // (`process.execve`), which would leave valgrind behind. Node and Deno do not read it.
  svcEnv: { MIMALLOC_PURGE_DELAY: '-1' },
};
const results: ({ id: string; label: string } & Measured)[] = [];
let redis: Redis | undefined;
try {
  redis = await redisReady(ctx.redisUrl, redisChild);
  for (const stack of stacks) {
    const r = await measure(stack, ctx, redis);
    results.push({ id: stack.id, label: stack.label, ...r });
    log(`${stack.id}: ${Math.round(r.perRequest).toLocaleString('en-US')} instructions per request${WINDOWS > 1 ? ` (windows ${r.range.map((n) => Math.round(n).toLocaleString('en-US')).join(' to ')})` : ''}`);
  }
} finally {
  redis?.disconnect();
  await redisChild.stop();
  for (const dir of ctx.tempDirs) rmSync(dir, { recursive: true, force: true });
  if (!opts.keep) rmSync(outDir, { recursive: true, force: true });
}

const bare = results.find((r) => r.id === 'bare');
const count = (n: number) => Math.round(n).toLocaleString('en-US');
const lines = [
  `Instructions per request (callgrind), ${WINDOWS > 1 ? `the median of ${WINDOWS} windows of ` : ''}${REQUESTS} requests at -c ${CONNECTIONS} after ${WARMUP} of warm-up, the idle server's as long taken off; user space only. Node ${process.version}, svc in ${path.relative(process.cwd(), ctx.svcDir) || '.'}.`,
  '',
  `| stack | instructions / request |${WINDOWS > 1 ? ' windows\' range |' : ''} of which V8 compiling | of which in V8's runtime | idle, per second | counted in | store commands / request |${bare ? ' / bare Hono |' : ''}`,
  `|---|---:|${WINDOWS > 1 ? '---:|' : ''}---:|---:|---:|---:|---|${bare ? '---:|' : ''}`,
  ...results.map(
    (r) =>
      `| ${r.label} | ${count(r.perRequest)} |${WINDOWS > 1 ? ` ${count(r.range[0])}-${count(r.range[1])} |` : ''} ${count(r.compiling)} | ${count(r.runtime)} | ${count(r.idlePerSecond)} | ${r.seconds.toFixed(1)} s | ${r.commands} |${bare ? ` ${(r.perRequest / bare.perRequest).toFixed(3)} |` : ''}`,
  ),
];
process.stdout.write(`${lines.join('\n')}\n`);
