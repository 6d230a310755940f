// `npm run bench` (`tsx bench/run.ts [options]`): svc and its peers side by side, in ONE run, on one
// private Redis. Every stack runs as its own child process on a free loopback port; each is
// measured in ABBA rounds (A B C ... C B A, twice by default) under load (wrk when it is on PATH, else
// autocannon: `--load`): a warm-up, then the measured run; a stack's figures are the medians of its rounds.
// Redis is flushed and a fresh session made before every run; `INFO commandstats` before and after
// the measured run gives the store commands per request. Then 100 concurrent logins hit svc while
// its session route is under load. Prints a markdown table and writes bench/results/<date>.{md,json}.
//
// Options: --duration S (10)  --warmup S (3)  --connections N (50)  --logins N (100, 0 = skip)
//          --only svc,lean,...  --note "text for the results file"  --cpu-prof svc,lean (profiles
//          of those stacks, written to a temp dir when the bench ends)  --out DIR (bench/results)
//          --svc-dir DIR (another svc checkout to measure as "svc", for before/after comparisons)
//          --svc-b DIR (another svc checkout, measured as "svc-b" in the same run; with svc-bun / svc-deno, as "svc-bun-b" / "svc-deno-b" too)
//          --svc-env K=V (repeatable: extra environment for svc, e.g. UV_THREADPOOL_SIZE=2)
//          --svc-node-flag F (repeatable: a node/V8 flag for both svc stacks, e.g. --optimize-for-size)
//          --pinned (servers on CPU 0, the load generator and redis-server on CPU 1; issue 40's stacks, 4 rounds)
//          --load wrk|autocannon (the load generator: wrk when it is on PATH, else autocannon, said when so)
//          --rounds N (ABBA rounds: 2, pinned 4)  --runs N (N full runs, each written; then their spread)
//          --memory (the 100,000 cached sessions RSS line; on by default with --pinned)
//          --quick (a smoke run: 1 s warm-up + 3 s, 2 rounds, no logins, no memory line)
import autocannon, { type Result } from 'autocannon';
import { Redis } from 'ioredis';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { monitorSources } from './lib/monitor.ts';
import { baseEnv, coreBusy, coreTicks, cpuSeconds, currentRss, freePort, peakRss, pinSelf, PROJECT_DIR, redisReady, sleep, startChild, startRedisServer } from './lib/procs.ts';
import { commandDelta, commandStats, LatencyLog, mean, median, percentiles, round, type Percentiles } from './lib/stats.ts';
import { wrk, wrkOnPath, type LoadResult } from './lib/wrk.ts';
import { PINNED_RUNTIME_STACKS, PINNED_STACKS, postJson, sharedNodeFlags, STACKS, svcB, svcRuntimeB, type RunningStack, type Stack, type StackContext } from './stacks.ts';

const { values: opts } = parseArgs({
  options: {
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string', default: '50' },
    logins: { type: 'string' },
    pinned: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    runs: { type: 'string', default: '1' },
    memory: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    note: { type: 'string' },
    'cpu-prof': { type: 'string' },
    out: { type: 'string', default: 'bench/results' },
    'svc-dir': { type: 'string' },
    'svc-b': { type: 'string' },
    'svc-env': { type: 'string', multiple: true },
    'svc-node-flag': { type: 'string', multiple: true },
    load: { type: 'string' },
  },
  strict: true,
});

const PINNED = opts.pinned;
const QUICK = opts.quick;
const DURATION = Number(opts.duration ?? (QUICK ? 3 : 10));
const WARMUP = Number(opts.warmup ?? (QUICK ? 1 : 3));
const CONNECTIONS = Number(opts.connections);
// The login storm is issue 13's; the pinned mode measures issue 40's goals only, unless asked.
const LOGINS = Number(opts.logins ?? (QUICK || PINNED ? 0 : 100));
const ROUNDS = Number(opts.rounds ?? (PINNED && !QUICK ? 4 : 2));
const RUNS = Number(opts.runs);
const MEMORY = opts.memory || (PINNED && !QUICK);
/** `--pinned`: the servers' CPU, and the CPU of this process, the load generator, redis-server and everything else it starts. */
const SERVER_CPUS = '0';
const LOADER_CPUS = '1';
for (const [name, n] of Object.entries({ duration: DURATION, warmup: WARMUP, connections: CONNECTIONS, logins: LOGINS, rounds: ROUNDS, runs: RUNS })) {
  if (!Number.isFinite(n) || n < 0 || ((name === 'rounds' || name === 'runs' || name === 'duration') && n < 1)) throw new Error(`--${name}: not a valid number`);
}
/**
 * The load generator of the measured runs (the login storm keeps autocannon: it needs each answer's
 * time). wrk by default: autocannon, pinned, kept its own core 87-94% busy for the fastest stacks (bench/lib/wrk.ts).
 */
const LOAD = opts.load ?? (wrkOnPath() ? 'wrk' : 'autocannon');
if (LOAD !== 'wrk' && LOAD !== 'autocannon') throw new Error('--load: wrk or autocannon');
if (!opts.load && LOAD === 'autocannon') process.stderr.write('wrk is not on PATH (apt-get install wrk): the load is autocannon\n');
const profiled = new Set((opts['cpu-prof'] ?? '').split(',').filter(Boolean));
const began = performance.now();
const elapsed = () => `${((performance.now() - began) / 1000).toFixed(0).padStart(4)}s`;
const log = (msg: string) => process.stderr.write(`[${elapsed()}] ${msg}\n`);
const onPath = (command: string) => spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0;
/** `--pinned` without `--only`: issue 40's and 59's stacks, svc on Bun and Deno when they are on PATH (said when not). */
function pinnedStacks(): Set<string> {
  const ids = new Set(PINNED_STACKS);
  for (const [id, runtime] of PINNED_RUNTIME_STACKS) {
    if (onPath(runtime)) ids.add(id);
    else log(`SKIPPED ${id}: ${runtime} is not on PATH (npm install --no-save --no-package-lock --prefix /tmp/rt ${runtime}, then PATH=/tmp/rt/node_modules/.bin:$PATH)`);
  }
  return ids;
}
const only = opts.only ? new Set(opts.only.split(',').map((s) => s.trim())) : PINNED ? pinnedStacks() : null;

interface RunResult extends LoadResult {
  stack: string;
  /** 1-based ABBA round. */
  round: number;
  /** Position in the ABBA sequence (0-based). */
  slot: number;
  commands: Record<string, number>;
  commandsPerRequest: number;
  /** Store round trips per request: `roundTrips` over sequential requests after the run. */
  roundTripsPerRequest: number;
  peakRssMB: number | null;
  /** Server CPU time (user + system, all its threads) during the measured run / responses, µs. */
  cpuUsPerRequest: number;
  /**
   * Server CPU time / the run's wall time, and (pinned) how busy the load generator's core was (wrk or
   * autocannon, and redis-server): a ratio of requests per second measures the servers only where the server's core
   * is the busy one; where neither core is full, the stacks' latency sets the pace of 50 connections.
   */
  serverBusy: number;
  loaderBusy: number;
}

interface StackSummary {
  id: string;
  label: string;
  description: string;
  /** Median over the rounds, as are p50, p99 and the CPU time. */
  reqPerSec: number;
  reqPerSecRuns: number[];
  p50: number;
  p99: number;
  cpuUsPerRequest: number;
  /** Medians of `RunResult`'s. */
  serverBusy: number;
  loaderBusy: number;
  peakRssMB: number | null;
  /** VmRSS once started, before any load. */
  idleRssMB?: number | null;
  commandsPerRequest: number;
  /**
   * How far above its true value `commandsPerRequest` may read: the requests in flight when a run stops
   * (at most one per connection) sent their command but are not counted as responses.
   */
  commandsMargin: number;
  commandsBreakdown: Record<string, number>;
  /** Mean over the rounds of `RunResult.roundTripsPerRequest`. */
  roundTripsPerRequest: number;
  failures: number;
}

// ---------------------------------------------------------------------------------------------

/** Sequential requests whose store round trips `roundTrips` counts. */
const ROUND_TRIP_SAMPLE = 100;

/**
 * Store round trips per request, which `INFO commandstats` cannot tell: it counts the commands a Lua
 * script runs too (an `EVALSHA` that reads one key and counts in another reads as 3). `MONITOR` marks
 * those `lua`: it watches ROUND_TRIP_SAMPLE requests sent one after the other once the measured run is
 * over (MONITOR slows Redis down, so never during it) and counts the commands svc sent on its busiest
 * connection: the store's, which every request uses (the stacks have one store). The job queues and the
 * realtime adapter poll on connections of their own, which would add noise that grows with the machine's
 * load; what svc writes beside requests on the store's connection (a write once a minute) counts.
 */
async function roundTrips(redis: Redis, url: string, headers: Record<string, string>): Promise<number> {
  let sampling = false;
  const bySource = new Map<string, number>();
  const monitor = await monitorSources(redis.options.host ?? '127.0.0.1', redis.options.port ?? 6379, (source) => {
    if (sampling && source !== 'lua') bySource.set(source, (bySource.get(source) ?? 0) + 1);
  });
  try {
    await sleep(20);
    sampling = true;
    for (let i = 0; i < ROUND_TRIP_SAMPLE; i++) {
      const res = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
      await res.arrayBuffer();
    }
    await sleep(20);
    sampling = false;
    return Math.max(0, ...bySource.values()) / ROUND_TRIP_SAMPLE;
  } finally {
    monitor.close();
  }
}

/** What a request of `stack` carries: `login`'s value in the stack's header (`Cookie`, or `Authorization` for an API key). */
const credentials = (stack: Stack, value: string | null): Record<string, string> => (value ? { [stack.header ?? 'cookie']: value } : {});

/** `seconds` of load on `url` from `LOAD`'s generator. */
async function load(url: string, headers: Record<string, string>, seconds: number): Promise<LoadResult> {
  if (LOAD === 'wrk') return wrk(url, headers, CONNECTIONS, seconds);
  const latencies = new LatencyLog();
  const result: Result = await cannon(url, headers, seconds, latencies);
  return {
    requests: result.requests.total,
    durationS: result.duration,
    reqPerSec: result.requests.average,
    latencyMs: percentiles(latencies.between()),
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
  };
}

function cannon(url: string, headers: Record<string, string>, seconds: number, latencies?: LatencyLog) {
  const instance = autocannon({ url, connections: CONNECTIONS, duration: seconds, headers, timeout: 10 });
  if (latencies) instance.on('response', (_client, _status, _bytes, responseTime) => latencies.add(responseTime, performance.now()));
  return instance;
}

async function get(url: string, headers: Record<string, string>): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: checks will fail
  }
  return { status: res.status, body };
}

/** The endpoint answers the session for `cookie`, and does not answer it without one. */
async function verify(stack: Stack, url: string, cookie: string | null, anonymousToo: boolean): Promise<void> {
  const ok = await get(url + stack.path, credentials(stack, cookie));
  if (ok.status !== 200 || !stack.check(ok.body)) {
    throw new Error(`${stack.id}: GET ${stack.path} with the session answered ${ok.status} ${JSON.stringify(ok.body).slice(0, 300)}`);
  }
  if (anonymousToo && cookie) {
    const anon = await get(url + stack.path, {});
    if (anon.status === 200 && stack.check(anon.body)) throw new Error(`${stack.id}: GET ${stack.path} answers a session without a cookie`);
  }
}

async function measure(stack: Stack, running: RunningStack, redis: Redis, round: number, slot: number): Promise<RunResult> {
  await redis.flushall();
  const cookie = await stack.login(running.url);
  await verify(stack, running.url, cookie, round === 1);
  const target = running.url + stack.path;

  const warm = await load(target, credentials(stack, cookie), WARMUP);
  if (warm.errors + warm.timeouts + warm.non2xx > 0) log(`  ${stack.id}: warm-up had ${warm.errors} errors, ${warm.timeouts} timeouts, ${warm.non2xx} non-2xx`);

  const before = await commandStats(redis);
  const cpuBefore = cpuSeconds(running.child.pid);
  const loaderBefore = PINNED ? coreTicks(LOADER_CPUS) : null;
  const wallBefore = performance.now();
  const result = await load(target, credentials(stack, cookie), DURATION);
  const wallS = (performance.now() - wallBefore) / 1000;
  const loaderAfter = PINNED ? coreTicks(LOADER_CPUS) : null;
  const cpuAfter = cpuSeconds(running.child.pid);
  const after = await commandStats(redis);
  await verify(stack, running.url, cookie, false);
  const roundTripsPerRequest = await roundTrips(redis, target, credentials(stack, cookie));

  const commands = commandDelta(before, after);
  const totalCommands = Object.values(commands).reduce((a, b) => a + b, 0);
  const requests = result.requests;
  const rss = peakRss(running.child.pid);
  return {
    ...result,
    stack: stack.id,
    round,
    slot,
    commands,
    commandsPerRequest: requests > 0 ? totalCommands / requests : NaN,
    roundTripsPerRequest,
    peakRssMB: rss === null ? null : rss / 2 ** 20,
    cpuUsPerRequest: cpuBefore !== null && cpuAfter !== null && requests > 0 ? ((cpuAfter - cpuBefore) * 1e6) / requests : NaN,
    serverBusy: cpuBefore !== null && cpuAfter !== null ? (cpuAfter - cpuBefore) / wallS : NaN,
    loaderBusy: coreBusy(loaderBefore, loaderAfter),
  };
}

interface LoginStorm {
  logins: number;
  loginsOk: number;
  loginStatuses: Record<string, number>;
  /** 429 answers (hash queue full) that a client waited out and retried. */
  retried: number;
  loginLatencyMs: Percentiles;
  burstMs: number;
  /** Session route during the burst. */
  during: Percentiles & { reqPerSec: number };
  /** Session route before the burst (after 1 s of load). */
  before: Percentiles & { reqPerSec: number };
  errors: number;
  non2xx: number;
  /** svc's VmHWM after the burst (argon2id takes 19 MiB per hash in flight). */
  peakRssMB: number | null;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await fn(items[i]!);
      }
    }),
  );
  return results;
}

/**
 * `n` concurrent `POST /auth/login` (argon2id verifications) against svc while `GET /auth/session` is
 * under load: n different users from n different addresses (X-Forwarded-For; svc counts login attempts
 * per email+IP and per IP), created first through the admin API (not timed). svc queues at most 16
 * password checks per hashing thread and answers the rest 429 with `Retry-After`; each client then
 * retries as a browser would, so a login's latency includes its waits and every login should end 200.
 */
async function loginStorm(stack: Stack, running: RunningStack, redis: Redis, n: number): Promise<LoginStorm> {
  await redis.flushall();
  const adminCookie = await stack.login(running.url);
  const password = 'storm-password-0123';
  const emails = Array.from({ length: n }, (_, i) => `storm-${i}@example.com`);
  await pool(emails, 4, async (email) => {
    const res = await postJson(`${running.url}/auth/users`, { email, password }, { cookie: adminCookie ?? '' });
    const text = await res.text();
    if (res.status !== 201 && res.status !== 409) throw new Error(`POST /auth/users answered ${res.status}: ${text.slice(0, 200)}`);
  });
  const cookie = await stack.login(running.url);
  await verify(stack, running.url, cookie, false);
  const latencies = new LatencyLog();
  const instance = cannon(running.url + stack.path, credentials(stack, cookie), 60, latencies);
  const loadStart = performance.now();
  await sleep(3000);
  const t0 = performance.now();
  let retried = 0;
  const logins = await Promise.all(
    emails.map(async (email, i) => {
      const started = performance.now();
      const forwardedFor = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      try {
        for (let attempt = 1; ; attempt++) {
          const res = await postJson(`${running.url}/auth/login`, { email, password }, { 'x-forwarded-for': forwardedFor });
          await res.arrayBuffer();
          const retryAfter = Number(res.headers.get('retry-after'));
          if (res.status !== 429 || !retryAfter || attempt === 10) return { status: String(res.status), ms: performance.now() - started };
          retried++;
          await sleep(retryAfter * 1000);
        }
      } catch (err) {
        return { status: (err as Error).name, ms: performance.now() - started };
      }
    }),
  );
  const t1 = performance.now();
  await sleep(1000);
  instance.stop();
  const result = await instance;
  const loginStatuses: Record<string, number> = {};
  for (const l of logins) loginStatuses[l.status] = (loginStatuses[l.status] ?? 0) + 1;
  const during = percentiles(latencies.between(t0, t1));
  const before = percentiles(latencies.between(loadStart + 1000, t0));
  const rss = peakRss(running.child.pid);
  return {
    logins: n,
    loginsOk: loginStatuses['200'] ?? 0,
    loginStatuses,
    retried,
    loginLatencyMs: percentiles(Float64Array.from(logins.map((l) => l.ms))),
    burstMs: t1 - t0,
    during: { ...during, reqPerSec: during.count / ((t1 - t0) / 1000) },
    before: { ...before, reqPerSec: before.count / ((t0 - loadStart - 1000) / 1000) },
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    peakRssMB: rss === null ? null : rss / 2 ** 20,
  };
}

// ---------------------------------------------------------------------------------------------

function summarize(stack: Stack, runs: RunResult[]): StackSummary {
  const breakdown: Record<string, number> = {};
  const requests = runs.reduce((a, r) => a + r.requests, 0);
  for (const r of runs) for (const [cmd, n] of Object.entries(r.commands)) breakdown[cmd] = (breakdown[cmd] ?? 0) + n;
  for (const cmd of Object.keys(breakdown)) breakdown[cmd] = round(breakdown[cmd]! / requests, 3);
  const rss = runs.map((r) => r.peakRssMB).filter((x): x is number => x !== null);
  return {
    id: stack.id,
    label: stack.label,
    description: stack.description,
    reqPerSec: median(runs.map((r) => r.reqPerSec)),
    reqPerSecRuns: runs.map((r) => round(r.reqPerSec, 0)),
    p50: median(runs.map((r) => r.latencyMs.p50)),
    p99: median(runs.map((r) => r.latencyMs.p99)),
    cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
    serverBusy: median(runs.map((r) => r.serverBusy)),
    loaderBusy: median(runs.map((r) => r.loaderBusy)),
    peakRssMB: rss.length ? Math.max(...rss) : null,
    commandsPerRequest: mean(runs.map((r) => r.commandsPerRequest)),
    commandsMargin: CONNECTIONS / Math.min(...runs.map((r) => r.requests)),
    commandsBreakdown: breakdown,
    roundTripsPerRequest: mean(runs.map((r) => r.roundTripsPerRequest)),
    failures: runs.reduce((a, r) => a + r.errors + r.timeouts + r.non2xx, 0),
  };
}

function gitInfo(dir: string): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).stdout?.trim();
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'routes'], { cwd: dir, encoding: 'utf8' }).stdout?.trim();
  const where = dir === path.resolve(PROJECT_DIR) ? '' : ` (${dir})`;
  return head ? `${head}${dirty ? ' + uncommitted changes in src/ or routes/' : ''}${where}` : `unknown${where}`;
}

const fmt = (x: number | null | undefined, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(digits));
const ratio = (a: number | undefined, b: number | undefined) => (a && b ? a / b : NaN);

interface Goal {
  name: string;
  value: number;
  goal: string;
  /** null: shown for information, no goal. */
  met: boolean | null;
}

/** The memory line: svc with `localCache` holding 100,000 sessions (bench/session-cache-memory.ts). */
interface MemoryResult {
  sessions: number;
  /** Before any session: the fresh database's bootstrap admin (argon2id) peaks here; not judged. */
  startupPeakRssMB: number;
  idleRssMB: number;
  rssMB: number;
  /** Peak RSS while the sessions were served (reset after start-up). */
  peakRssMB: number;
  /** Issue 59: <= 100 MB (< 120 MB with 20% headroom); `met` as the script judged it. */
  goalMB: number;
  met: boolean;
  lastPassStoreReads: number;
  failed: number;
}

/** The goals of issues 13 and 40, each from the stacks this run measured. */
function goalsOf(summaries: StackSummary[], storm: LoginStorm | null): Goal[] {
  const by = new Map(summaries.map((s) => [s.id, s]));
  const goals: Goal[] = [];
  const add = (name: string, value: number, goal: string, met: ((x: number) => boolean) | null) => {
    if (Number.isFinite(value)) goals.push({ name, value, goal, met: met ? met(value) : null });
  };
  const svc = by.get('svc');
  const cached = by.get('svc-cache');
  const plugin = by.get('svc-plugin');
  // Issue 40: against the lean route with ioredis auto-pipelining.
  const lp = by.get('lean-pipelined');
  add('svc / lean + auto-pipelining (req/s)', ratio(svc?.reqPerSec, lp?.reqPerSec), '>= 0.9', (x) => x >= 0.9);
  add('p99 svc / lean + auto-pipelining', ratio(svc?.p99, lp?.p99), '<= 1.2', (x) => x <= 1.2);
  add('svc (localCache) / lean + auto-pipelining (req/s)', ratio(cached?.reqPerSec, lp?.reqPerSec), '>= 1.5', (x) => x >= 1.5);
  add('p99 svc (localCache) / lean + auto-pipelining', ratio(cached?.p99, lp?.p99), '<= 1', (x) => x <= 1);
  add('server CPU per request svc / lean + auto-pipelining', ratio(svc?.cpuUsPerRequest, lp?.cpuUsPerRequest), '-', null);
  add('server CPU per request svc (localCache) / lean + auto-pipelining', ratio(cached?.cpuUsPerRequest, lp?.cpuUsPerRequest), '-', null);
  const one = (s: StackSummary | undefined) => (x: number) => x > 0.995 && x < 1.005 + (s?.commandsMargin ?? 0);
  add('svc store commands per request', svc?.commandsPerRequest ?? NaN, '= 1', one(svc));
  add('svc (localCache) store commands per request', cached?.commandsPerRequest ?? NaN, '< 0.01', (x) => x < 0.01);
  // Issue 13: against the plain lean route and the Node session stacks.
  add('svc / lean (req/s)', ratio(svc?.reqPerSec, by.get('lean')?.reqPerSec), '(>= 0.9)', (x) => x >= 0.9);
  add('p99 svc / lean', ratio(svc?.p99, by.get('lean')?.p99), '(<= 1.2)', (x) => x <= 1.2);
  add('svc / express-session (req/s)', ratio(svc?.reqPerSec, by.get('express')?.reqPerSec), '>= 4', (x) => x >= 4);
  add('svc / @fastify/session (req/s)', ratio(svc?.reqPerSec, by.get('fastify')?.reqPerSec), '>= 2', (x) => x >= 2);
  add('svc / better-auth (req/s)', ratio(svc?.reqPerSec, by.get('better-auth')?.reqPerSec), '>= 1.5', (x) => x >= 1.5);
  add('svc / better-auth updateAge 0 (req/s)', ratio(svc?.reqPerSec, by.get('better-auth-slide')?.reqPerSec), '(>= 1.5)', (x) => x >= 1.5);
  add('svc / bare Hono (req/s)', ratio(svc?.reqPerSec, by.get('bare')?.reqPerSec), '-', null);
  // Issue 59: the session check nearly free, and the default path well past the lean route.
  const bare = by.get('bare');
  add('svc (localCache) / bare Hono (req/s)', ratio(cached?.reqPerSec, bare?.reqPerSec), '>= 0.95', (x) => x >= 0.95);
  add('p99 svc (localCache) / bare Hono', ratio(cached?.p99, bare?.p99), '<= 1.1', (x) => x <= 1.1);
  add('svc / lean + auto-pipelining (req/s), issue 59', ratio(svc?.reqPerSec, lp?.reqPerSec), '>= 1.3', (x) => x >= 1.3);
  add('p99 svc / lean + auto-pipelining, issue 59', ratio(svc?.p99, lp?.p99), '<= 1', (x) => x <= 1);
  add('svc on Bun / svc on Node (req/s)', ratio(by.get('svc-bun')?.reqPerSec, svc?.reqPerSec), '>= 1.3', (x) => x >= 1.3);
  add('p99 svc on Bun / svc on Node', ratio(by.get('svc-bun')?.p99, svc?.p99), '-', null);
  add('svc on Deno / svc on Node (req/s)', ratio(by.get('svc-deno')?.reqPerSec, svc?.reqPerSec), '-', null);
  add('p99 svc on Deno / svc on Node', ratio(by.get('svc-deno')?.p99, svc?.p99), '-', null);
  add('svc plugin route / lean + auto-pipelining (req/s)', ratio(plugin?.reqPerSec, lp?.reqPerSec), '>= 0.9', (x) => x >= 0.9);
  add('p99 svc plugin route / lean + auto-pipelining', ratio(plugin?.p99, lp?.p99), '<= 1.2', (x) => x <= 1.2);
  add('svc plugin route store commands per request', plugin?.commandsPerRequest ?? NaN, '= 1', one(plugin));
  // Issue 55: the todo plugin's GET with an API key against the same route with the user's cookie, per session setting.
  for (const [tag, keyId, cookieId] of [['', 'svc-todo-key', 'svc-todo-cookie'], [' (localCache)', 'svc-todo-key-cache', 'svc-todo-cookie-cache']] as const) {
    const key = by.get(keyId);
    const cookie = by.get(cookieId);
    add(`svc todo route${tag}, API key / cookie (req/s)`, ratio(key?.reqPerSec, cookie?.reqPerSec), '>= 0.9', (x) => x >= 0.9);
    add(`p99 svc todo route${tag}, API key / cookie`, ratio(key?.p99, cookie?.p99), '-', null);
    // One store round trip per request (issue 55): the key's record and its count in one script, or,
    // with the record in memory, the count alone. `INFO commandstats` counts a script's own commands too.
    add(`svc todo route${tag}, API key: store round trips per request (MONITOR)`, key?.roundTripsPerRequest ?? NaN, '= 1', (x) => x > 0.995 && x < 1.05);
    add(`svc todo route${tag}, API key: store commands per request (commandstats, a script's own counted)`, key?.commandsPerRequest ?? NaN, '-', null);
    add(`svc todo route${tag}, cookie: store round trips per request (MONITOR)`, cookie?.roundTripsPerRequest ?? NaN, '-', null);
  }
  add('svc peak RSS MB (session runs)', svc?.peakRssMB ?? NaN, '< 150', (x) => x < 150);
  if (storm) add('svc session p99 ms during the logins', storm.during.p99, '<= 50', (x) => x <= 50);
  return goals;
}

const goalRow = (g: Goal, cells: string[] = [fmt(g.value)]) =>
  `| ${g.name} | ${cells.join(' | ')} | ${g.goal} | ${g.met === null ? '' : g.met ? 'met' : 'missed'} |`;

function memoryLine(m: MemoryResult): string {
  return (
    `**Memory:** svc with \`auth.session.localCache\` holding ${m.sessions.toLocaleString('en')} sessions (bench/session-cache-memory.ts, ` +
    `as \`npm start\` runs it): peak RSS ${fmt(m.peakRssMB, 0)} MB (goal <= ${m.goalMB}, issue 59's < 120 MB with 20% headroom: ${m.met ? 'met' : 'missed'}), ` +
    `RSS ${fmt(m.rssMB, 0)} MB after the last pass (${fmt(m.idleRssMB, 0)} MB before any session, start-up peak ${fmt(m.startupPeakRssMB, 0)} MB); store reads in the last pass ${m.lastPassStoreReads}, non-200 ${m.failed}.`
  );
}

function report(meta: Record<string, unknown>, summaries: StackSummary[], goals: Goal[], storm: LoginStorm | null, failed: { id: string; error: string }[]) {
  const by = new Map(summaries.map((s) => [s.id, s]));
  const lines: string[] = [];
  lines.push(`# Session-stack benchmark, ${meta.date as string}`);
  lines.push('');
  if (meta.note) lines.push(`> **${meta.note as string}**`, '');
  lines.push(
    `${meta.connections as number} connections (${meta.load === 'wrk' ? '`wrk -t1`' : 'autocannon'}), ${meta.warmupS as number} s warm-up + ${meta.durationS as number} s measured per run, ` +
      `${meta.rounds as number} ABBA rounds per stack (medians); ` +
      `one private redis-server (${meta.redis as string}), flushed before every run. Node ${meta.node as string}, ${meta.cpus as string}; ` +
      `load average ${meta.loadStart as string} at start, ${meta.loadEnd as string} at the end. svc at ${meta.git as string}` +
      `${Object.keys(meta.svcEnv as object).length ? `, with ${Object.entries(meta.svcEnv as object).map(([k, v]) => `${k}=${String(v)}`).join(' ')}` : ''}.`,
  );
  if (meta.pinned) lines.push('', `Pinned: every server on CPU ${SERVER_CPUS}; the load (${meta.load === 'wrk' ? 'wrk' : 'autocannon, in the bench process'}) and redis-server on CPU ${LOADER_CPUS} (\`taskset\`).`);
  if (meta.run) lines.push('', `Run ${meta.run as string}.`);
  const shared = sharedNodeFlags();
  if (shared.length) lines.push('', `Every Node stack runs with \`${shared.join(' ')}\`, as svc's \`npm start\` does (bench/stacks.ts, \`sharedNodeFlags\`).`);
  lines.push('');
  lines.push('| stack | req/s (median) | each round | p50 ms | p99 ms | server CPU µs/req | server / load core busy % | peak RSS MB (idle) | store cmds/req | errors + non-2xx |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const s of summaries) {
    lines.push(
      `| ${s.label} | ${fmt(s.reqPerSec, 0)} | ${s.reqPerSecRuns.join(' / ')} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${fmt(s.cpuUsPerRequest, 1)} | ${fmt(s.serverBusy * 100, 0)} / ${fmt(s.loaderBusy * 100, 0)} | ${fmt(s.peakRssMB, 0)} (${fmt(s.idleRssMB, 0)}) | ${fmt(s.commandsPerRequest)} | ${s.failures} |`,
    );
  }
  for (const f of failed) lines.push(`| ${f.id} | not measured: ${f.error.split('\n')[0]!.slice(0, 120)} | | | | | | | | |`);
  lines.push('');
  lines.push('Store commands per request, by command (`INFO commandstats` delta / responses; the commands a Lua script runs count too):');
  lines.push('');
  for (const s of summaries) {
    const parts = Object.entries(s.commandsBreakdown).map(([cmd, n]) => `${cmd.toUpperCase()} ${n}`);
    lines.push(`- ${s.label}: ${parts.length ? parts.join(', ') : 'none'}`);
  }
  lines.push('');
  lines.push(`Store round trips per request (\`MONITOR\` over ${ROUND_TRIP_SAMPLE} sequential requests after each run, on svc's busiest connection, a script's own commands not counted): ${summaries.map((s) => `${s.label} ${fmt(s.roundTripsPerRequest)}`).join('; ')}.`);
  lines.push('');
  if (goals.length) {
    lines.push('| measure | value | goal | |');
    lines.push('|---|---:|---|---|');
    for (const g of goals) lines.push(goalRow(g));
    lines.push('');
  }
  if (storm) {
    lines.push(
      `**${storm.logins} concurrent logins (argon2id) against svc while \`GET /auth/session\` is under load (${meta.connections as number} connections):** ` +
        `${storm.loginsOk}/${storm.logins} logins ok (${Object.entries(storm.loginStatuses).map(([k, v]) => `${k}: ${v}`).join(', ')}; ${storm.retried} retries after 429), ` +
        `burst ${fmt(storm.burstMs / 1000)} s, login latency p50 ${fmt(storm.loginLatencyMs.p50, 0)} ms / max ${fmt(storm.loginLatencyMs.max, 0)} ms; ` +
        `session route during the burst: p50 ${fmt(storm.during.p50)} ms, p99 ${fmt(storm.during.p99)} ms, max ${fmt(storm.during.max)} ms, ${fmt(storm.during.reqPerSec, 0)} req/s ` +
        `(before it: p50 ${fmt(storm.before.p50)} ms, p99 ${fmt(storm.before.p99)} ms, ${fmt(storm.before.reqPerSec, 0)} req/s); ` +
        `errors ${storm.errors}, non-2xx ${storm.non2xx}; svc peak RSS after it ${fmt(storm.peakRssMB, 0)} MB.`,
    );
    lines.push('');
  }
  lines.push('Stacks:');
  lines.push('');
  for (const s of STACKS) if (by.has(s.id)) lines.push(`- **${s.label}**: ${s.description}`);
  lines.push('');
  return lines.join('\n');
}

/** Across `--runs`: each stack's req/s per run and its spread, each goal per run and whether every run met it. */
function runsReport(outcomes: RunOutcome[], memory: MemoryResult | null, memoryError: string | null): string {
  const lines: string[] = [];
  lines.push(`# ${outcomes.length} full run${outcomes.length === 1 ? '' : 's'}, ${new Date().toISOString()}`, '');
  lines.push(`Results: ${outcomes.map((o) => `\`${path.relative(PROJECT_DIR, o.file)}.md\``).join(', ')}.${PINNED ? ` Pinned (servers on CPU 0, ${LOAD} and redis-server on CPU 1).` : ` Load: ${LOAD}.`}`, '');
  if (outcomes.length > 1) {
    const ids = [...new Set(outcomes.flatMap((o) => o.summaries.map((s) => s.id)))];
    const head = outcomes.map((_, i) => `run ${i + 1}`);
    lines.push(`| stack | req/s ${head.join(' | ')} | spread (max/min - 1) | goal | | CPU µs/req ${head.join(' | ')} |`);
    lines.push(`|---|${head.map(() => '---:').join('|')}|---:|---|---|${head.map(() => '---:').join('|')}|`);
    for (const id of ids) {
      const per = outcomes.map((o) => o.summaries.find((s) => s.id === id));
      const rps = per.map((s) => s?.reqPerSec ?? NaN);
      const spread = Math.max(...rps) / Math.min(...rps) - 1;
      lines.push(
        `| ${per.find(Boolean)!.label} | ${rps.map((x) => fmt(x, 0)).join(' | ')} | ${fmt(spread * 100, 1)}% | <= 10% | ${spread <= 0.1 ? 'met' : 'missed'} | ` +
          `${per.map((s) => fmt(s?.cpuUsPerRequest, 1)).join(' | ')} |`,
      );
    }
    lines.push('');
  }
  const names = [...new Set(outcomes.flatMap((o) => o.goals.map((g) => g.name)))];
  if (names.length) {
    const head = outcomes.map((_, i) => `run ${i + 1}`);
    lines.push(`| measure | ${head.join(' | ')} | goal | in every run |`);
    lines.push(`|---|${head.map(() => '---:').join('|')}|---|---|`);
    for (const name of names) {
      const per = outcomes.map((o) => o.goals.find((g) => g.name === name));
      const first = per.find(Boolean)!;
      const met = first.met === null ? null : per.every((g) => g?.met === true);
      lines.push(goalRow({ ...first, met }, per.map((g) => fmt(g?.value))));
    }
    lines.push('');
  }
  if (memory) lines.push(memoryLine(memory), '');
  if (memoryError) lines.push(`**Memory:** not measured: ${memoryError}`, '');
  return lines.join('\n');
}

/** bench/session-cache-memory.ts as a child (on every CPU: it is a memory figure), its `result` line parsed. */
async function measureMemory(): Promise<MemoryResult> {
  const child = startChild({
    name: 'session-cache-memory',
    argv: ['node', 'bench/session-cache-memory.ts'],
    env: baseEnv(),
    ...(PINNED ? { cpus: `0-${os.cpus().length - 1}` } : {}),
  });
  const code = await new Promise<number | null>((resolve) => child.process.once('exit', (c) => resolve(c)));
  const line = child.output().split('\n').find((l) => l.startsWith('result '));
  if (code !== 0 || !line) throw new Error(`bench/session-cache-memory.ts exited ${code}: ${child.output().slice(-2000)}`);
  return JSON.parse(line.slice('result '.length)) as MemoryResult;
}

// ---------------------------------------------------------------------------------------------

interface RunOutcome {
  summaries: StackSummary[];
  goals: Goal[];
  /** Results file, without .md / .json. */
  file: string;
  failed: boolean;
}

async function runOnce(runNumber: number): Promise<RunOutcome> {
  const loadStart = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const runBegan = performance.now();
  // --svc-b: that checkout measured right after svc (svc-b), svc-bun and svc-deno, where they are measured.
  const listed = STACKS.flatMap((s): [Stack, string][] => {
    const b = opts['svc-b'] ? (s.id === 'svc' ? svcB : svcRuntimeB[s.id]) : undefined;
    return b ? [[s, s.id], [b, s.id]] : [[s, s.id]];
  });
  const stacks = listed.filter(([, id]) => !only || only.has(id)).map(([s]) => s);
  if (stacks.length === 0) throw new Error(`--only matched no stack (ids: ${STACKS.map((s) => s.id).join(', ')})`);
  const estimate = stacks.length * ROUNDS * (WARMUP + DURATION + 1.5) + (LOGINS > 0 ? 12 : 0) + 20;
  log(`${RUNS > 1 ? `run ${runNumber}/${RUNS}: ` : ''}stacks: ${stacks.map((s) => s.id).join(', ')}; ${ROUNDS} rounds; about ${Math.ceil(estimate / 60)} min`);

  const redisPort = await freePort();
  const redisChild = startRedisServer(redisPort);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const redis = await redisReady(redisUrl, redisChild);
  const redisVersion = /redis_version:(\S+)/.exec((await redis.info('server')) as string)?.[1] ?? '?';
  log(`redis-server ${redisVersion} on port ${redisPort}`);

  const profDir = profiled.size ? mkdtempSync(path.join(os.tmpdir(), 'svc-bench-prof-')) : '';
  const profFlags = (id: string) => (profiled.has(id) ? ['--cpu-prof', '--cpu-prof-dir', path.join(profDir, id)] : []);
  const ctx: StackContext = {
    redisUrl,
    nodeFlags: (id) => [...(id.startsWith('svc') ? (opts['svc-node-flag'] ?? []) : []), ...profFlags(id)],
    profFlags,
    tempDirs: [],
    svcDir: path.resolve(opts['svc-dir'] ?? PROJECT_DIR),
    ...(opts['svc-b'] ? { svcBDir: path.resolve(opts['svc-b']) } : {}),
    svcEnv: Object.fromEntries((opts['svc-env'] ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
    ...(PINNED ? { serverCpus: SERVER_CPUS } : {}),
  };

  // Start every stack (in parallel); a stack that cannot start is reported, the others still run.
  const started = await Promise.allSettled(stacks.map((s) => s.start(ctx)));
  const running = new Map<string, RunningStack>();
  const failed: { id: string; error: string }[] = [];
  const idleRssMB = new Map<string, number | null>();
  await sleep(1000); // let start-up work settle before reading the idle RSS
  started.forEach((r, i) => {
    const s = stacks[i]!;
    if (r.status === 'fulfilled') {
      running.set(s.id, r.value);
      const rss = currentRss(r.value.child.pid);
      idleRssMB.set(s.id, rss === null ? null : rss / 2 ** 20);
    } else {
      failed.push({ id: s.id, error: (r.reason as Error).message });
      log(`${s.id} FAILED to start: ${(r.reason as Error).message}`);
    }
  });
  log(`started: ${[...running.keys()].join(', ')}`);

  const order = stacks.filter((s) => running.has(s.id));
  // ABBA: odd rounds forwards, even rounds backwards.
  const sequence = Array.from({ length: ROUNDS }, (_, i) => (i % 2 === 0 ? order : [...order].reverse())).flat();
  const runs: RunResult[] = [];
  const rounds = new Map<string, number>();
  for (const [slot, stack] of sequence.entries()) {
    const round = (rounds.get(stack.id) ?? 0) + 1;
    rounds.set(stack.id, round);
    try {
      const r = await measure(stack, running.get(stack.id)!, redis, round, slot);
      runs.push(r);
      log(
        `${stack.id.padEnd(18)} round ${round}: ${r.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${r.latencyMs.p50.toFixed(2)} ms  p99 ${r.latencyMs.p99.toFixed(2)} ms  ` +
          `CPU ${fmt(r.cpuUsPerRequest, 1)} µs/req  busy ${fmt(r.serverBusy * 100, 0)}%${PINNED ? ` (load core ${fmt(r.loaderBusy * 100, 0)}%)` : ''}  cmds/req ${r.commandsPerRequest.toFixed(2)}  round trips/req ${r.roundTripsPerRequest.toFixed(2)}  errors ${r.errors + r.timeouts}  non-2xx ${r.non2xx}  RSS ${fmt(r.peakRssMB, 0)} MB`,
      );
    } catch (err) {
      log(`${stack.id} round ${round} FAILED: ${(err as Error).message}`);
      if (!failed.some((f) => f.id === stack.id)) failed.push({ id: stack.id, error: (err as Error).message });
    }
    await sleep(500);
  }

  let storm: LoginStorm | null = null;
  const svcStack = order.find((s) => s.id === 'svc');
  if (svcStack && LOGINS > 0) {
    try {
      storm = await loginStorm(svcStack, running.get('svc')!, redis, LOGINS);
      log(
        `svc + ${LOGINS} concurrent logins: ${storm.loginsOk} ok in ${(storm.burstMs / 1000).toFixed(2)} s; session p99 ${storm.during.p99.toFixed(2)} ms ` +
          `during (${storm.before.p99.toFixed(2)} ms before)`,
      );
    } catch (err) {
      log(`login storm FAILED: ${(err as Error).message}`);
    }
  }

  const summaries = order
    .filter((s) => runs.some((r) => r.stack === s.id) && failed.every((f) => f.id !== s.id))
    .map((s) => ({ ...summarize(s, runs.filter((r) => r.stack === s.id)), idleRssMB: idleRssMB.get(s.id) ?? null }));

  // Stop everything (SIGTERM: svc shuts down gracefully, profiles get written).
  await Promise.all([...running.values()].map((r) => r.child.stop()));
  redis.disconnect();
  await redisChild.stop();
  for (const dir of ctx.tempDirs) rmSync(dir, { recursive: true, force: true });

  const now = new Date();
  const meta = {
    date: now.toISOString(),
    note: opts.note ?? null,
    run: RUNS > 1 ? `${runNumber} of ${RUNS}` : null,
    pinned: PINNED,
    load: LOAD,
    node: process.version,
    cpus: `${os.cpus().length} x ${os.cpus()[0]?.model.trim() ?? '?'}`,
    memGB: round(os.totalmem() / 2 ** 30, 1),
    loadStart,
    loadEnd: os.loadavg().map((x) => x.toFixed(2)).join(' '),
    redis: redisVersion,
    git: gitInfo(ctx.svcDir),
    svcEnv: ctx.svcEnv,
    connections: CONNECTIONS,
    warmupS: WARMUP,
    durationS: DURATION,
    rounds: ROUNDS,
    order: sequence.map((s) => s.id),
    totalSeconds: round((performance.now() - runBegan) / 1000, 0),
  };
  const goals = goalsOf(summaries, storm);
  const markdown = report(meta, summaries, goals, storm, failed);
  process.stdout.write(`\n${markdown}\n`);

  const base = path.join(OUT_DIR, now.toISOString().slice(0, 19).replace(/:/g, '-'));
  const rounded = (r: RunResult) => ({
    ...r,
    reqPerSec: round(r.reqPerSec, 1),
    durationS: r.durationS,
    latencyMs: Object.fromEntries(Object.entries(r.latencyMs).map(([k, v]) => [k, round(v, 3)])),
    commandsPerRequest: round(r.commandsPerRequest, 4),
    roundTripsPerRequest: round(r.roundTripsPerRequest, 4),
    peakRssMB: r.peakRssMB === null ? null : round(r.peakRssMB, 1),
    cpuUsPerRequest: round(r.cpuUsPerRequest, 2),
    serverBusy: round(r.serverBusy, 3),
    loaderBusy: round(r.loaderBusy, 3),
  });
  const json = {
    meta,
    summary: summaries.map((s) => ({
      ...s,
      reqPerSec: round(s.reqPerSec, 1),
      p50: round(s.p50, 3),
      p99: round(s.p99, 3),
      cpuUsPerRequest: round(s.cpuUsPerRequest, 2),
      serverBusy: round(s.serverBusy, 3),
      loaderBusy: round(s.loaderBusy, 3),
      peakRssMB: s.peakRssMB === null ? null : round(s.peakRssMB, 1),
      idleRssMB: s.idleRssMB == null ? null : round(s.idleRssMB, 1),
      commandsPerRequest: round(s.commandsPerRequest, 4),
      roundTripsPerRequest: round(s.roundTripsPerRequest, 4),
    })),
    goals: goals.map((g) => ({ ...g, value: round(g.value, 3) })),
    runs: runs.map(rounded),
    loginStorm: storm,
    failed,
  };
  writeFileSync(`${base}.md`, `${markdown}\n`);
  writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 1)}\n`);
  log(`wrote ${path.relative(PROJECT_DIR, base)}.md and .json in ${meta.totalSeconds} s`);
  if (profDir) log(`CPU profiles in ${profDir}`);
  return { summaries, goals, file: base, failed: failed.length > 0 };
}

const OUT_DIR = path.resolve(PROJECT_DIR, opts.out ?? 'bench/results');

/**
 * svc's dist/ built now when stale (bin/build.js), before anything is pinned or timed: `npm start` would
 * build it itself, but on one pinned CPU beside the others' start-up that outlasts the health wait.
 */
function ensureBuilt(dir: string): void {
  const build = pathToFileURL(path.join(dir, 'bin', 'build.js')).href;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `const { build } = await import(${JSON.stringify(build)}); await build();`], { cwd: dir, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`building svc's dist/ in ${dir} failed`);
}

async function main() {
  for (const dir of new Set([path.resolve(opts['svc-dir'] ?? PROJECT_DIR), ...(opts['svc-b'] ? [path.resolve(opts['svc-b'])] : [])])) ensureBuilt(dir);
  if (PINNED) {
    if (os.cpus().length < 2) throw new Error('--pinned needs at least 2 CPUs');
    // From here on, this process and all it starts (the load generator, redis-server) run on CPU 1; the servers are started on CPU 0.
    pinSelf(LOADER_CPUS);
    log(`pinned: servers on CPU ${SERVER_CPUS}, ${LOAD} and redis-server on CPU ${LOADER_CPUS}`);
  }
  mkdirSync(OUT_DIR, { recursive: true });
  const outcomes: RunOutcome[] = [];
  for (let i = 1; i <= RUNS; i++) outcomes.push(await runOnce(i));
  let memory: MemoryResult | null = null;
  let memoryError: string | null = null;
  if (MEMORY) {
    log('memory: 100,000 cached sessions (bench/session-cache-memory.ts)');
    try {
      memory = await measureMemory();
    } catch (err) {
      memoryError = (err as Error).message.split('\n')[0]!;
      log(`memory FAILED: ${(err as Error).message}`);
    }
  }
  if (RUNS > 1 || MEMORY) {
    const summary = runsReport(outcomes, memory, memoryError);
    process.stdout.write(`\n${summary}\n`);
    const file = `${outcomes[outcomes.length - 1]!.file}-summary.md`;
    writeFileSync(file, `${summary}\n`);
    log(`wrote ${path.relative(PROJECT_DIR, file)} (${((performance.now() - began) / 60_000).toFixed(1)} min in all)`);
  }
  if (outcomes.some((o) => o.failed) || memoryError) process.exitCode = 1;
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1); // the exit hook kills the children
  },
);
