// `npm run bench:webhooks` (`tsx bench/webhooks.ts [options]`): what signed webhooks (issue 54, CONTRACT 13)
// cost the requests that cause them, and how fast a cluster delivers them. ONE run, svc started from this
// checkout as `npm start` runs it (`node <its flags> bin/start.js`, the compiled service, built first when
// stale), a private redis-server (and, for part 3, a private mongo-java-server as the two instances'
// shared database), `SVC_ALLOW_INSECURE_WEBHOOK_URLS=1` so that the endpoints may point at the bench's
// loopback receiver (node:http, answers 204 at once, counts `webhook-id`s per endpoint, checks each
// signature with `standardwebhooks`).
//
// 1. `GET /auth/session` (autocannon) with NO webhook endpoint against TWO active endpoints subscribed to
//    every type, ABBA rounds (none two two none ...). It writes nothing, so it should not move.
// 2. In the same slots, N concurrent `POST /auth/login` (N users created first through the admin API, each
//    logging in once per round: no failures, so the limit of 5 per email+IP never applies) over C
//    connections: logins/s, latency p50/p99, and server CPU per login until its deliveries were made.
//    With endpoints, each login's `login.succeeded` goes to both; the slot waits for all of them before
//    the next one starts.
// 3. Delivery throughput: two instances on the same Redis and database, two endpoints, E events
//    (`PATCH /auth/users/:id`, each a `user.updated` record, to both endpoints) sent to the two instances
//    in turn: events/s and deliveries/s from the first request to the last delivery received, delivery
//    lag (arrival - the record's `at`), and that each webhook-id arrived exactly once per endpoint.
//
// Prints a markdown table and writes bench/results/<date>-webhooks.{md,json}.
//
// Options: --pinned (svc on CPU 0; this process (autocannon, the logins, the receiver), redis-server and
//          mongo-java-server on CPU 1)  --quick (a smoke run: 2 rounds of 1 s + 3 s, 40 logins, 200 events)
//          --rounds N (ABBA rounds: 4)  --duration S (10)  --warmup S (3)  --connections N (GET load, 50)  --logins N (200)
//          --login-connections N (16)  --events N (1000)  --event-connections N (16)
//          --mongodb URL (the shared database of part 3 instead of a private mongo-java-server)
//          --cpu-prof (each svc process writes a CPU profile to a temp dir, printed at the end)
//          --note TEXT  --out DIR (bench/results)
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { startPrivateMongoServer, type MongoTestServer } from '../test/support/mongo.ts';
import { baseEnv, cpuSeconds, freePort, threadCpuSeconds, npmStartFlags, pinSelf, PROJECT_DIR, redisReady, sleep, startChild, startRedisServer, waitHealthy, writeDotEnv, type Child } from './lib/procs.ts';
import { LatencyLog, median, percentiles, round, type Percentiles } from './lib/stats.ts';

const { values: opts } = parseArgs({
  options: {
    pinned: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string', default: '50' },
    logins: { type: 'string' },
    'login-connections': { type: 'string', default: '16' },
    events: { type: 'string' },
    'event-connections': { type: 'string', default: '16' },
    mongodb: { type: 'string' },
    'cpu-prof': { type: 'boolean', default: false },
    note: { type: 'string' },
    out: { type: 'string', default: 'bench/results' },
  },
  strict: true,
});

const PINNED = opts.pinned;
const QUICK = opts.quick;
const ROUNDS = Number(opts.rounds ?? (QUICK ? 2 : 4));
const DURATION = Number(opts.duration ?? (QUICK ? 3 : 10));
const WARMUP = Number(opts.warmup ?? (QUICK ? 1 : 3));
const CONNECTIONS = Number(opts.connections);
const LOGINS = Number(opts.logins ?? (QUICK ? 40 : 200));
// svc lets (cores - 1) x 16 password checks wait and answers the next one 429 (src/auth/passwords.ts): 16
// connections stay within that on 2 cores. A 429 is retried after its Retry-After and counted.
const LOGIN_CONNECTIONS = Number(opts['login-connections']);
const EVENTS = Number(opts.events ?? (QUICK ? 200 : 1000));
const EVENT_CONNECTIONS = Number(opts['event-connections']);
for (const [name, n] of Object.entries({ rounds: ROUNDS, duration: DURATION, warmup: WARMUP, connections: CONNECTIONS, logins: LOGINS, 'login-connections': LOGIN_CONNECTIONS, events: EVENTS, 'event-connections': EVENT_CONNECTIONS })) {
  if (!Number.isInteger(n) || n < (name === 'warmup' ? 0 : 1)) throw new Error(`--${name}: not a valid number`);
}
const SERVER_CPUS = '0';
const LOADER_CPUS = '1';
const OUT_DIR = path.resolve(PROJECT_DIR, opts.out ?? 'bench/results');
/** `--cpu-prof`: every svc process writes a CPU profile here when it stops (read it with bench/prof-top.ts). */
const PROF_DIR = opts['cpu-prof'] ? mkdtempSync(path.join(os.tmpdir(), 'svc-bench-wh-prof-')) : '';

const began = performance.now();
const log = (msg: string) => process.stderr.write(`[${((performance.now() - began) / 1000).toFixed(0).padStart(4)}s] ${msg}\n`);
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');

/** Every record type, as the subscriptions of the measured endpoints name them (CONTRACT 13: a type or `prefix.*`). */
const ALL_EVENTS = ['login.*', 'logout', 'session.*', 'reauthenticated', 'password.*', 'totp.*', 'recovery_code.*', 'passkey.*', 'oauth.*', 'email.*', 'user.*', 'provider.*', 'work_session.*', 'api_key.*', 'device.*', 'webhook.*'];
const ADMIN = { email: 'bench-admin@example.com', password: randomBytes(18).toString('base64url') };
const USER_PASSWORD = `bench-${randomBytes(9).toString('base64url')}`;
const tempDirs: string[] = [];

// ---------------------------------------------------------------------------------------------
// The receiver

interface Delivery {
  path: string;
  id: string;
  type: string;
  /** The audit record's `at` (ms since the epoch). */
  eventAtMs: number;
  /** Date.now() when its body had arrived. */
  arrivedMs: number;
  /** Whether the signature checked out with the endpoint's secret (null: no secret known for the path). */
  verified: boolean | null;
}

interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** Secrets by path, to verify with. */
  verifiers: Map<string, Webhook>;
  close(): Promise<void>;
}

/** node:http on loopback: 204 at once, then the delivery is parsed, verified and kept. */
async function startReceiver(): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  const verifiers = new Map<string, Webhook>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(204).end();
      const arrivedMs = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      const p = (req.url ?? '/').split('?')[0]!;
      const id = String(req.headers['webhook-id'] ?? '');
      let type = '?';
      let eventAtMs = NaN;
      try {
        const parsed = JSON.parse(body) as { type: string; data: { at: string } };
        type = parsed.type;
        eventAtMs = Date.parse(parsed.data.at);
      } catch {
        // counted as type '?'
      }
      const verifier = verifiers.get(p);
      let verified: boolean | null = null;
      if (verifier) {
        try {
          verifier.verify(body, req.headers as Record<string, string>, { jsonParse: false });
          verified = true;
        } catch {
          verified = false;
        }
      }
      deliveries.push({ path: p, id, type, eventAtMs, arrivedMs, verified });
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    deliveries,
    verifiers,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Per endpoint path: distinct webhook-ids of `type` (each with its first arrival), and how many arrived more than once. */
function tally(rx: Receiver, p: string, type: string) {
  const first = new Map<string, Delivery>();
  let duplicates = 0;
  let badSignatures = 0;
  for (const d of rx.deliveries) {
    if (d.path !== p || d.type !== type) continue;
    if (d.verified === false) badSignatures++;
    if (first.has(d.id)) duplicates++;
    else first.set(d.id, d);
  }
  return { first, duplicates, badSignatures };
}

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// svc

interface Svc {
  name: string;
  child: Child;
  url: string;
  cookie: string;
}

/** svc as `npm start` runs it; secrets (store and database URLs, admin password, seal key) in the app root's `.env`. */
async function startSvc(name: string, secrets: Record<string, string>, cpus: string | undefined): Promise<Svc> {
  const appRoot = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-wh-app-'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-wh-data-'));
  tempDirs.push(appRoot, dataDir);
  writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { cookie: { secure: false } } }));
  writeDotEnv(appRoot, { ...secrets, SVC_ADMIN_PASSWORD: ADMIN.password });
  const port = await freePort();
  const child = startChild({
    name,
    argv: ['node-js', ...npmStartFlags(), ...(PROF_DIR ? ['--cpu-prof', '--cpu-prof-dir', path.join(PROF_DIR, name)] : []), 'bin/start.js'],
    ...(cpus ? { cpus } : {}),
    env: {
      ...baseEnv(),
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      SVC_APP_PATH: appRoot,
      SVC_DATA_DIR: dataDir,
      SVC_ADMIN_EMAIL: ADMIN.email,
      SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1',
    },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(child, `${url}/health`, 120_000);
  const login = await call(url, '', 'POST', '/auth/login', ADMIN);
  if (login.status !== 200) throw new Error(`${name}: the admin login answered ${login.status}: ${JSON.stringify(login.body)}\n${child.output()}`);
  return { name, child, url, cookie: login.cookie };
}

async function call(base: string, cookie: string, method: string, p: string, json?: unknown): Promise<{ status: number; body: unknown; cookie: string; retryAfter: number }> {
  const res = await fetch(base + p, {
    method,
    headers: { ...(cookie ? { cookie } : {}), ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    redirect: 'manual',
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  const cookies = res.headers
    .getSetCookie()
    .map((line) => line.split(';')[0]!.trim())
    .filter((pair) => !pair.endsWith('='));
  return { status: res.status, body, cookie: cookies.join('; '), retryAfter: Number(res.headers.get('retry-after')) || 0 };
}

async function mustCall(svc: Svc, method: string, p: string, json: unknown, want: number): Promise<unknown> {
  const r = await call(svc.url, svc.cookie, method, p, json);
  if (r.status !== want) throw new Error(`${svc.name}: ${method} ${p} answered ${r.status} (expected ${want}): ${JSON.stringify(r.body).slice(0, 400)}`);
  return r.body;
}

/** Runs `fn` over 0..n-1 with at most `limit` in flight. */
async function pool(n: number, limit: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

interface Endpoint {
  id: string;
  path: string;
}

async function createEndpoint(svc: Svc, rx: Receiver, p: string): Promise<Endpoint> {
  const body = (await mustCall(svc, 'POST', '/auth/webhooks', { url: `${rx.url}${p}`, events: ALL_EVENTS, description: `bench ${p}` }, 201)) as { id: string; secret: string };
  rx.verifiers.set(p, new Webhook(body.secret));
  return { id: body.id, path: p };
}

// ---------------------------------------------------------------------------------------------
// Parts 1 and 2: one instance, no endpoint against two

type Condition = 'none' | 'two';

interface SessionRun {
  condition: Condition;
  round: number;
  reqPerSec: number;
  latencyMs: Percentiles;
  cpuUsPerRequest: number;
  failures: number;
  load1: number;
}

interface LoginRun {
  condition: Condition;
  round: number;
  logins: number;
  ok: number;
  statuses: Record<string, number>;
  retried: number;
  seconds: number;
  loginsPerSec: number;
  latencyMs: Percentiles;
  /** Server CPU (user + system) from the first login to the last of its deliveries, per login. */
  cpuMsPerLogin: number;
  /** The same by thread (`main`: the event loop; the others by name and id: libuv's pool hashes the passwords, V8's helpers collect garbage). */
  cpuMsPerLoginByThread: Record<string, number>;
  /** The rest of the machine's CPU per login, over the same span: this process (the logins' client, the receiver) and redis-server. */
  benchCpuMsPerLogin: number;
  redisCpuMsPerLogin: number;
  /** From the last login's answer to the last `login.succeeded` delivery (two endpoints only). */
  drainMs: number | null;
  /** `login.succeeded` deliveries received / owed (two endpoints only). */
  delivered: number | null;
  owed: number | null;
  load1: number;
}

async function measureSession(svc: Svc, condition: Condition, round: number): Promise<SessionRun> {
  const check = await call(svc.url, svc.cookie, 'GET', '/auth/session');
  if (check.status !== 200 || typeof (check.body as { userId?: unknown }).userId !== 'string') throw new Error(`GET /auth/session answered ${check.status}: ${JSON.stringify(check.body)}`);
  const target = `${svc.url}/auth/session`;
  const headers = { cookie: svc.cookie };
  if (WARMUP > 0) await autocannon({ url: target, connections: CONNECTIONS, duration: WARMUP, headers, timeout: 10 });
  const latencies = new LatencyLog();
  const cpuBefore = cpuSeconds(svc.child.pid);
  const instance = autocannon({ url: target, connections: CONNECTIONS, duration: DURATION, headers, timeout: 10 });
  instance.on('response', (_client, _status, _bytes, responseTime) => latencies.add(responseTime, performance.now()));
  const result = await instance;
  const cpuAfter = cpuSeconds(svc.child.pid);
  const requests = result.requests.total;
  return {
    condition,
    round,
    reqPerSec: result.requests.average,
    latencyMs: percentiles(latencies.between()),
    cpuUsPerRequest: cpuBefore !== null && cpuAfter !== null && requests > 0 ? ((cpuAfter - cpuBefore) * 1e6) / requests : NaN,
    failures: result.errors + result.timeouts + result.non2xx,
    load1: os.loadavg()[0]!,
  };
}

async function loginBurst(svc: Svc, emails: string[]): Promise<{ ms: number[]; statuses: Record<string, number>; retried: number; seconds: number }> {
  const ms: number[] = new Array(emails.length);
  const statuses: Record<string, number> = {};
  let retried = 0;
  const t0 = performance.now();
  await pool(emails.length, LOGIN_CONNECTIONS, async (i) => {
    const started = performance.now();
    let status: string;
    try {
      for (let attempt = 1; ; attempt++) {
        const r = await call(svc.url, '', 'POST', '/auth/login', { email: emails[i], password: USER_PASSWORD });
        status = String(r.status);
        // Only the hashing queue's 429 (Retry-After 1) is waited out; a login lock would be a bench bug.
        if (r.status !== 429 || r.retryAfter > 2 || attempt === 10) break;
        retried++;
        await sleep(r.retryAfter * 1000);
      }
    } catch (err) {
      status = (err as Error).name;
    }
    ms[i] = performance.now() - started;
    statuses[status] = (statuses[status] ?? 0) + 1;
  });
  return { ms, statuses, retried, seconds: (performance.now() - t0) / 1000 };
}

/** redis-server's CPU seconds (user + system), from its own `INFO cpu`. */
async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = (await redis.info('cpu')) as string;
  const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

/** This process's CPU seconds: the logins' client and the receiver (signature checks included). */
function ownCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

async function partsOneAndTwo(redis: Redis, redisUrl: string, rx: Receiver, sealKey: string, meta: Record<string, unknown>) {
  log('parts 1 and 2: one svc (embedded database), GET /auth/session and logins, no endpoint against two');
  const svc = await startSvc('svc', { CACHE_URL: redisUrl, SVC_SECRET_ENCRYPTION_KEY: sealKey }, PINNED ? SERVER_CPUS : undefined);
  try {
    const emails = Array.from({ length: LOGINS }, (_, i) => `bench-wh-${i}@example.com`);
    const created = performance.now();
    await pool(emails.length, 8, async (i) => {
      await mustCall(svc, 'POST', '/auth/users', { email: emails[i], password: USER_PASSWORD }, 201);
    });
    log(`${LOGINS} users created in ${((performance.now() - created) / 1000).toFixed(1)} s (not timed); warming up`);
    // Warm-up: the login path and the webhook path once each, not measured.
    const warm = emails.slice(0, Math.min(LOGINS, 4 * LOGIN_CONNECTIONS));
    await loginBurst(svc, warm);
    let warmEndpoints = [await createEndpoint(svc, rx, '/warm-a'), await createEndpoint(svc, rx, '/warm-b')];
    await loginBurst(svc, warm);
    await waitUntil(() => warmEndpoints.every((e) => tally(rx, e.path, 'login.succeeded').first.size >= warm.length), 60_000);
    for (const e of warmEndpoints) await mustCall(svc, 'DELETE', `/auth/webhooks/${e.id}`, undefined, 204);
    warmEndpoints = [];

    let endpoints: Endpoint[] = [];
    const owed = new Map<string, number>();
    let made = 0;
    const setCondition = async (c: Condition) => {
      if (c === 'two' && endpoints.length === 0) {
        made++;
        endpoints = [await createEndpoint(svc, rx, `/slot${made}-a`), await createEndpoint(svc, rx, `/slot${made}-b`)];
        for (const e of endpoints) owed.set(e.path, 0);
      } else if (c === 'none' && endpoints.length > 0) {
        for (const e of endpoints) await mustCall(svc, 'DELETE', `/auth/webhooks/${e.id}`, undefined, 204);
        endpoints = [];
      }
      const listed = (await mustCall(svc, 'GET', '/auth/webhooks', undefined, 200)) as { items: { active: boolean }[] };
      const active = listed.items.filter((w) => w.active).length;
      if (active !== (c === 'two' ? 2 : 0)) throw new Error(`condition ${c}: ${active} active endpoints`);
      await sleep(500);
    };

    const order: Condition[] = ['none', 'two'];
    const sequence = Array.from({ length: ROUNDS }, (_, i) => (i % 2 === 0 ? order : [...order].reverse())).flat();
    meta.order = sequence;
    const sessionRuns: SessionRun[] = [];
    const loginRuns: LoginRun[] = [];
    const rounds = { none: 0, two: 0 };
    let duplicates = 0;
    let badSignatures = 0;
    for (const condition of sequence) {
      const r = ++rounds[condition];
      await setCondition(condition);
      const s = await measureSession(svc, condition, r);
      sessionRuns.push(s);
      log(`${condition.padEnd(4)} round ${r}: GET /auth/session ${s.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${s.latencyMs.p50.toFixed(2)} ms  p99 ${s.latencyMs.p99.toFixed(2)} ms  CPU ${s.cpuUsPerRequest.toFixed(1)} µs/req  failures ${s.failures}`);

      const cpu0 = cpuSeconds(svc.child.pid);
      const threads0 = threadCpuSeconds(svc.child.pid);
      const [bench0, redis0] = [ownCpuSeconds(), await redisCpuSeconds(redis)];
      const burst = await loginBurst(svc, emails);
      const answeredMs = Date.now();
      let drainMs: number | null = null;
      let delivered: number | null = null;
      let owedNow: number | null = null;
      if (endpoints.length) {
        for (const e of endpoints) owed.set(e.path, owed.get(e.path)! + (burst.statuses['200'] ?? 0));
        const count = () => endpoints.reduce((a, e) => a + tally(rx, e.path, 'login.succeeded').first.size, 0);
        owedNow = endpoints.reduce((a, e) => a + owed.get(e.path)!, 0);
        await waitUntil(() => count() >= owedNow!, 120_000);
        const last = Math.max(...endpoints.map((e) => Math.max(0, ...[...tally(rx, e.path, 'login.succeeded').first.values()].map((d) => d.arrivedMs))));
        drainMs = Math.max(0, last - answeredMs);
        delivered = count();
      }
      const cpu1 = cpuSeconds(svc.child.pid);
      const threads1 = threadCpuSeconds(svc.child.pid);
      const [bench1, redis1] = [ownCpuSeconds(), await redisCpuSeconds(redis)];
      const ok = burst.statuses['200'] ?? 0;
      const l: LoginRun = {
        condition,
        round: r,
        logins: LOGINS,
        ok,
        statuses: burst.statuses,
        retried: burst.retried,
        seconds: burst.seconds,
        loginsPerSec: ok / burst.seconds,
        latencyMs: percentiles(Float64Array.from(burst.ms)),
        cpuMsPerLogin: cpu0 !== null && cpu1 !== null && ok > 0 ? ((cpu1 - cpu0) * 1000) / ok : NaN,
        benchCpuMsPerLogin: ok > 0 ? ((bench1 - bench0) * 1000) / ok : NaN,
        redisCpuMsPerLogin: ok > 0 ? ((redis1 - redis0) * 1000) / ok : NaN,
        cpuMsPerLoginByThread: Object.fromEntries(Object.entries(threads1).map(([name, s1]) => [name, ok > 0 ? round(((s1 - (threads0[name] ?? 0)) * 1000) / ok, 2) : NaN])),
        drainMs,
        delivered,
        owed: owedNow,
        load1: os.loadavg()[0]!,
      };
      loginRuns.push(l);
      log(
        `${condition.padEnd(4)} round ${r}: ${ok}/${LOGINS} logins in ${l.seconds.toFixed(2)} s = ${l.loginsPerSec.toFixed(1)}/s  p50 ${l.latencyMs.p50.toFixed(0)} ms  p99 ${l.latencyMs.p99.toFixed(0)} ms  ` +
          `CPU ${l.cpuMsPerLogin.toFixed(2)} ms/login, bench ${l.benchCpuMsPerLogin.toFixed(2)}, redis ${l.redisCpuMsPerLogin.toFixed(2)} (svc: ${Object.entries(l.cpuMsPerLoginByThread).filter(([, ms]) => ms >= 0.05).map(([n, ms]) => `${n} ${ms}`).join(', ')})  retried ${l.retried}${delivered === null ? '' : `  deliveries ${delivered}/${owedNow} (last ${drainMs!.toFixed(0)} ms after the last login)`}  load ${l.load1.toFixed(2)}`,
      );
      await sleep(500);
    }
    for (const p of owed.keys()) {
      const t = tally(rx, p, 'login.succeeded');
      duplicates += t.duplicates;
      badSignatures += t.badSignatures;
    }
    return { sessionRuns, loginRuns, duplicates, badSignatures };
  } finally {
    await svc.child.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Part 3: two instances, delivery throughput

interface DeliveryResult {
  events: number;
  deliveriesOwed: number;
  deliveriesReceived: number;
  /** Distinct webhook-ids per endpoint. */
  distinct: number[];
  duplicates: number;
  missing: number;
  /** Ids that reached one endpoint and not the other. */
  mismatched: number;
  badSignatures: number;
  requestFailures: number;
  /** First request to the last answer. */
  requestSeconds: number;
  /** First request to the last delivery received. */
  seconds: number;
  eventsPerSec: number;
  deliveriesPerSec: number;
  requestsPerSec: number;
  requestLatencyMs: Percentiles;
  /** Server CPU of both instances during the requests, per request (the deliveries made meanwhile included). */
  cpuMsPerRequest: number;
  /** The same PATCHes with no endpoint, just before. */
  baseline: { requestsPerSec: number; requestLatencyMs: Percentiles; cpuMsPerRequest: number; failures: number };
  lagMs: Percentiles;
  cpuSeconds: Record<string, number | null>;
  database: string;
}

async function partThree(redis: Redis, redisUrl: string, rx: Receiver, sealKey: string): Promise<DeliveryResult> {
  await redis.flushall();
  let mongo: MongoTestServer | null = null;
  let mongoUrl = opts.mongodb;
  if (!mongoUrl) {
    log('part 3: starting a private mongo-java-server (the two instances share it)');
    mongo = await startPrivateMongoServer();
    if (!mongo) throw new Error('mongo-java-server did not start (java and the jar of test/support/mongo-java-server are needed; or pass --mongodb URL)');
    mongoUrl = mongo.url.replace(/\/[^/]*$/, `/svc_bench_webhooks_${randomBytes(4).toString('hex')}`);
  }
  const secrets = { CACHE_URL: redisUrl, MONGODB_URL: mongoUrl, SVC_SECRET_ENCRYPTION_KEY: sealKey };
  const running: Svc[] = [];
  try {
    // One after the other: the first makes the bootstrap admin and the indexes.
    running.push(await startSvc('svc-a', secrets, PINNED ? SERVER_CPUS : undefined));
    running.push(await startSvc('svc-b', secrets, PINNED ? SERVER_CPUS : undefined));
    const [a, b] = running as [Svc, Svc];
    log(`part 3: svc-a and svc-b on one Redis and one database (${mongo ? 'mongo-java-server' : 'MongoDB from --mongodb'})`);
    const users: string[] = [];
    for (let i = 0; i < 8; i++) {
      const u = (await mustCall(a, 'POST', '/auth/users', { email: `bench-wh-target-${i}@example.com`, password: USER_PASSWORD }, 201)) as { id: string };
      users.push(u.id);
    }
    /** `n` PATCHes over EVENT_CONNECTIONS connections, to svc-a and svc-b in turn: each a `user.updated` record. */
    const fire = async (n: number, tag: string) => {
      const ms: number[] = [];
      let failures = 0;
      const cpu0 = running.map((s) => cpuSeconds(s.child.pid));
      const t0 = Date.now();
      await pool(n, EVENT_CONNECTIONS, async (i) => {
        const svc = i % 2 ? b : a;
        const started = performance.now();
        const r = await call(svc.url, svc.cookie, 'PATCH', `/auth/users/${users[i % users.length]}`, { firstname: `${tag}${i}` });
        ms.push(performance.now() - started);
        if (r.status !== 200) failures++;
      });
      const t1 = Date.now();
      const cpu1 = running.map((s) => cpuSeconds(s.child.pid));
      const cpu = cpu0.reduce<number>((sum, c, i) => sum + (cpu1[i]! - c!), 0);
      return { t0, t1, failures, latencyMs: percentiles(Float64Array.from(ms)), requestsPerSec: n / ((t1 - t0) / 1000), cpuMsPerRequest: (cpu * 1000) / n };
    };
    // The same requests with no endpoint first: what the two instances do without webhooks.
    await fire(Math.min(EVENTS, 100), 'Warm');
    const baseline = await fire(EVENTS, 'None');
    log(`part 3: ${EVENTS} PATCHes with no endpoint: ${fmt(baseline.requestsPerSec, 0)}/s, p99 ${fmt(baseline.latencyMs.p99, 0)} ms, ${fmt(baseline.cpuMsPerRequest)} ms CPU each`);

    const endpoints = [await createEndpoint(a, rx, '/cluster-a'), await createEndpoint(a, rx, '/cluster-b')];
    // Each instance reads the endpoint list again within 2 s (ENDPOINT_CACHE_MS); a warm-up of both paths.
    await sleep(3000);
    for (let i = 0; i < 20; i++) await mustCall(running[i % 2]!, 'PATCH', `/auth/users/${users[i % users.length]}`, { firstname: `Warm${i}` }, 200);
    await waitUntil(() => endpoints.every((e) => tally(rx, e.path, 'user.updated').first.size >= 20), 60_000);
    await sleep(500);
    const seen = new Set(rx.deliveries.filter((d) => d.type === 'user.updated').map((d) => d.id));

    const cpu0 = Object.fromEntries(running.map((s) => [s.name, cpuSeconds(s.child.pid)]));
    const run = await fire(EVENTS, 'Bench');
    const { t0, failures } = run;
    const answered = run.t1;
    const fresh = (p: string) => {
      const t = tally(rx, p, 'user.updated');
      for (const id of seen) t.first.delete(id);
      return t;
    };
    const expected = EVENTS - failures;
    const allIn = await waitUntil(() => endpoints.every((e) => fresh(e.path).first.size >= expected), 120_000 + EVENTS * 20);
    if (!allIn) log('part 3: not every delivery arrived in time');
    const cpu1 = Object.fromEntries(running.map((s) => [s.name, cpuSeconds(s.child.pid)]));
    // Room for a duplicate to show up.
    await sleep(3000);
    const tallies = endpoints.map((e) => fresh(e.path));
    const last = Math.max(...tallies.flatMap((t) => [...t.first.values()].map((d) => d.arrivedMs)));
    const lags = Float64Array.from(tallies.flatMap((t) => [...t.first.values()].map((d) => d.arrivedMs - d.eventAtMs)));
    const idsA = new Set(tallies[0]!.first.keys());
    const idsB = new Set(tallies[1]!.first.keys());
    const mismatched = [...idsA].filter((id) => !idsB.has(id)).length + [...idsB].filter((id) => !idsA.has(id)).length;
    const seconds = (last - t0) / 1000;
    const received = tallies.reduce((n, t) => n + t.first.size + t.duplicates, 0);
    const cpu: Record<string, number | null> = {};
    for (const s of running) cpu[s.name] = cpu0[s.name] != null && cpu1[s.name] != null ? round(cpu1[s.name]! - cpu0[s.name]!, 2) : null;
    return {
      events: EVENTS,
      deliveriesOwed: 2 * expected,
      deliveriesReceived: received,
      distinct: tallies.map((t) => t.first.size),
      duplicates: tallies.reduce((n, t) => n + t.duplicates, 0),
      missing: tallies.reduce((n, t) => n + Math.max(0, expected - t.first.size), 0),
      mismatched,
      badSignatures: tallies.reduce((n, t) => n + t.badSignatures, 0),
      requestFailures: failures,
      requestSeconds: (answered - t0) / 1000,
      seconds,
      eventsPerSec: Math.min(...tallies.map((t) => t.first.size)) / seconds,
      deliveriesPerSec: tallies.reduce((n, t) => n + t.first.size, 0) / seconds,
      requestsPerSec: run.requestsPerSec,
      requestLatencyMs: run.latencyMs,
      cpuMsPerRequest: run.cpuMsPerRequest,
      baseline: { requestsPerSec: baseline.requestsPerSec, requestLatencyMs: baseline.latencyMs, cpuMsPerRequest: baseline.cpuMsPerRequest, failures: baseline.failures },
      lagMs: percentiles(lags),
      cpuSeconds: cpu,
      database: mongo ? 'mongo-java-server (in-memory MongoDB wire-protocol server of the test suites)' : 'MongoDB from --mongodb',
    };
  } finally {
    await Promise.all(running.map((s) => s.child.stop()));
    await mongo?.stop();
  }
}

// ---------------------------------------------------------------------------------------------

function ensureBuilt(dir: string): void {
  const build = pathToFileURL(path.join(dir, 'bin', 'build.js')).href;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `const { build } = await import(${JSON.stringify(build)}); await build();`], { cwd: dir, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`building svc's dist/ in ${dir} failed`);
}

function gitInfo(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT_DIR, encoding: 'utf8' }).stdout?.trim();
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'routes'], { cwd: PROJECT_DIR, encoding: 'utf8' }).stdout?.trim();
  return head ? `${head}${dirty ? ' + uncommitted changes in src/ or routes/' : ''}` : 'unknown';
}

const fmt = (x: number | null | undefined, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(digits));

interface Row {
  measure: string;
  none: number;
  two: number;
  ratio: number;
  goal: string;
  met: boolean | null;
  digits: number;
}

function comparisons(sessionRuns: SessionRun[], loginRuns: LoginRun[]): Row[] {
  const med = <T>(runs: T[], c: Condition, f: (r: T) => number) => median(runs.filter((r) => (r as { condition: Condition }).condition === c).map(f));
  const row = <T>(measure: string, runs: T[], f: (r: T) => number, goal: string, ok: ((ratio: number) => boolean) | null, digits: number): Row => {
    const none = med(runs, 'none', f);
    const two = med(runs, 'two', f);
    const ratio = two / none;
    return { measure, none, two, ratio, goal, met: ok && Number.isFinite(ratio) ? ok(ratio) : null, digits };
  };
  return [
    row('`GET /auth/session` req/s', sessionRuns, (r) => r.reqPerSec, '>= 0.95', (x) => x >= 0.95, 0),
    row('`GET /auth/session` p99 ms', sessionRuns, (r) => r.latencyMs.p99, '<= 1.05', (x) => x <= 1.05, 2),
    row('`GET /auth/session` p50 ms', sessionRuns, (r) => r.latencyMs.p50, '', null, 2),
    row('`GET /auth/session` server CPU µs/request', sessionRuns, (r) => r.cpuUsPerRequest, '', null, 1),
    row('`POST /auth/login` logins/s', loginRuns, (r) => r.loginsPerSec, '>= 0.95', (x) => x >= 0.95, 1),
    row('`POST /auth/login` p99 ms', loginRuns, (r) => r.latencyMs.p99, '<= 1.05', (x) => x <= 1.05, 0),
    row('`POST /auth/login` p50 ms', loginRuns, (r) => r.latencyMs.p50, '', null, 0),
    row('server CPU ms per login, until its deliveries were made', loginRuns, (r) => r.cpuMsPerLogin, '', null, 2),
    row('- of it svc\'s event loop (main thread)', loginRuns, (r) => r.cpuMsPerLoginByThread.main ?? NaN, '', null, 2),
    row('the bench process\'s CPU ms per login (logins\' client, receiver)', loginRuns, (r) => r.benchCpuMsPerLogin, '', null, 2),
    row('redis-server\'s CPU ms per login', loginRuns, (r) => r.redisCpuMsPerLogin, '', null, 2),
  ];
}

function report(meta: Record<string, unknown>, rows: Row[], sessionRuns: SessionRun[], loginRuns: LoginRun[], partA: { duplicates: number; badSignatures: number }, d: DeliveryResult | null, dError: string | null): string {
  const lines: string[] = [];
  lines.push(`# Webhooks benchmark, ${meta.date as string}`, '');
  if (meta.note) lines.push(`> **${meta.note as string}**`, '');
  lines.push(
    `svc at ${meta.git as string}, as \`npm start\` runs it (compiled), \`SVC_ALLOW_INSECURE_WEBHOOK_URLS=1\`, \`LOG_LEVEL=warn\`; one private redis-server (${meta.redis as string}); ` +
      `a loopback receiver in the bench process (node:http, 204 at once, every signature checked with \`standardwebhooks\`). Node ${meta.node as string}, ${meta.cpus as string}; ` +
      `load average ${meta.loadStart as string} at start, ${meta.loadEnd as string} at the end${meta.pinned ? `; pinned: svc on CPU ${SERVER_CPUS}, the bench (autocannon, logins, receiver), redis-server and mongo-java-server on CPU ${LOADER_CPUS}` : '; not pinned'}.`,
    '',
  );
  lines.push(
    `**Parts 1 and 2**: one instance, embedded database, Redis store. ${meta.rounds as number} ABBA rounds (${(meta.order as string[]).join(' ')}); per slot \`GET /auth/session\` with ${CONNECTIONS} connections ` +
      `(${WARMUP} s warm-up + ${DURATION} s), then ${LOGINS} logins (${LOGINS} users, each once) over ${LOGIN_CONNECTIONS} connections; "two" = two active endpoints subscribed to every type ` +
      `(each login's \`login.succeeded\` goes to both; the slot waits for all of them). Medians of the rounds.`,
    '',
  );
  lines.push('| measure | no endpoint | two endpoints | two / none | goal | |');
  lines.push('|---|---:|---:|---:|---|---|');
  for (const r of rows) lines.push(`| ${r.measure} | ${fmt(r.none, r.digits)} | ${fmt(r.two, r.digits)} | ${fmt(r.ratio, 3)} | ${r.goal} | ${r.met === null ? '' : r.met ? 'met' : 'missed'} |`);
  lines.push('');
  lines.push('Each round:', '');
  lines.push('| slot | GET req/s | GET p99 ms | GET CPU µs/req | logins/s | login p50 / p99 ms | CPU ms/login | deliveries (last after the logins) | 429 retried | load 1 min |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (let i = 0; i < sessionRuns.length; i++) {
    const s = sessionRuns[i]!;
    const l = loginRuns[i];
    lines.push(
      `| ${s.condition} ${s.round} | ${fmt(s.reqPerSec, 0)} | ${fmt(s.latencyMs.p99)} | ${fmt(s.cpuUsPerRequest, 1)} | ${fmt(l?.loginsPerSec, 1)} | ${fmt(l?.latencyMs.p50, 0)} / ${fmt(l?.latencyMs.p99, 0)} | ${fmt(l?.cpuMsPerLogin)} | ` +
        `${l?.delivered == null ? '-' : `${l.delivered}/${l.owed} (${fmt(l.drainMs, 0)} ms)`} | ${l?.retried ?? '-'} | ${fmt(l?.load1)} |`,
    );
  }
  const failures = sessionRuns.reduce((n, s) => n + s.failures, 0);
  const loginFailures = loginRuns.reduce((n, l) => n + (l.logins - l.ok), 0);
  lines.push('', `GET errors + non-2xx: ${failures}; logins not 200: ${loginFailures}; \`login.succeeded\` deliveries received more than once: ${partA.duplicates}; bad signatures: ${partA.badSignatures}.`, '');
  // Less moved by a busy machine than the rates: what the two deliveries of a login cost svc's CPU.
  const cpu = rows.find((r) => r.measure.startsWith('server CPU ms per login'));
  if (cpu) lines.push(`Server CPU per delivery, (two - none) / 2 of the medians above: ${fmt((cpu.two - cpu.none) / 2)} ms.`, '');
  if (d) {
    lines.push(
      `**Part 3, delivery throughput**: two instances (svc-a, svc-b) on the same Redis (the queue's stream) and database (${d.database}), two endpoints subscribed to every type; ` +
        `${d.events} events (\`PATCH /auth/users/:id\`, each a \`user.updated\` record, to both endpoints) sent over ${EVENT_CONNECTIONS} connections to the two instances in turn.`,
      '',
    );
    lines.push('| measure | value |');
    lines.push('|---|---:|');
    lines.push(`| events/s, first request to last delivery | ${fmt(d.eventsPerSec, 0)} |`);
    lines.push(`| deliveries/s (two per event) | ${fmt(d.deliveriesPerSec, 0)} |`);
    lines.push(`| the PATCHes: requests/s, first to last answer (with no endpoint, just before) | ${fmt(d.requestsPerSec, 0)} (${fmt(d.baseline.requestsPerSec, 0)}) |`);
    lines.push(`| the PATCHes: p50 / p99 ms (with no endpoint) | ${fmt(d.requestLatencyMs.p50, 0)} / ${fmt(d.requestLatencyMs.p99, 0)} (${fmt(d.baseline.requestLatencyMs.p50, 0)} / ${fmt(d.baseline.requestLatencyMs.p99, 0)}) |`);
    lines.push(`| server CPU ms per event, both instances, while the requests ran (with no endpoint) | ${fmt(d.cpuMsPerRequest)} (${fmt(d.baseline.cpuMsPerRequest)}) |`);
    lines.push(`| seconds: requests answered / last delivery | ${fmt(d.requestSeconds)} / ${fmt(d.seconds)} |`);
    lines.push(`| delivery lag (arrival - the record's \`at\`) p50 / p99 / max ms | ${fmt(d.lagMs.p50, 0)} / ${fmt(d.lagMs.p99, 0)} / ${fmt(d.lagMs.max, 0)} |`);
    lines.push(`| deliveries received / owed | ${d.deliveriesReceived} / ${d.deliveriesOwed} |`);
    lines.push(`| distinct webhook-ids per endpoint | ${d.distinct.join(' / ')} |`);
    lines.push(`| duplicates (a webhook-id again at the same endpoint) | ${d.duplicates} |`);
    lines.push(`| missing / ids at one endpoint only / bad signatures / failed requests | ${d.missing} / ${d.mismatched} / ${d.badSignatures} / ${d.requestFailures} |`);
    lines.push(`| server CPU s, first request to last delivery (svc-a / svc-b) | ${Object.values(d.cpuSeconds).map((x) => fmt(x)).join(' / ')} |`);
    lines.push('');
  }
  if (dError) lines.push(`**Part 3**: not measured: ${dError}`, '');
  return lines.join('\n');
}

async function main() {
  ensureBuilt(PROJECT_DIR);
  if (PINNED) {
    if (os.cpus().length < 2) throw new Error('--pinned needs at least 2 CPUs');
    pinSelf(LOADER_CPUS);
    log(`pinned: svc on CPU ${SERVER_CPUS}; this process, redis-server and mongo-java-server on CPU ${LOADER_CPUS}`);
  }
  mkdirSync(OUT_DIR, { recursive: true });
  const meta: Record<string, unknown> = {
    date: new Date().toISOString(),
    note: opts.note ?? null,
    pinned: PINNED,
    quick: QUICK,
    node: process.version,
    cpus: `${os.cpus().length} x ${os.cpus()[0]?.model.trim() ?? '?'}`,
    loadStart: load(),
    git: gitInfo(),
    rounds: ROUNDS,
    warmupS: WARMUP,
    durationS: DURATION,
    connections: CONNECTIONS,
    logins: LOGINS,
    loginConnections: LOGIN_CONNECTIONS,
    events: EVENTS,
    eventConnections: EVENT_CONNECTIONS,
  };
  const redisPort = await freePort();
  const redisChild = startRedisServer(redisPort);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const redis = await redisReady(redisUrl, redisChild);
  meta.redis = /redis_version:(\S+)/.exec((await redis.info('server')) as string)?.[1] ?? '?';
  const rx = await startReceiver();
  const sealKey = randomBytes(32).toString('base64');
  let exitCode = 0;
  try {
    const partA = await partsOneAndTwo(redis, redisUrl, rx, sealKey, meta);
    let delivery: DeliveryResult | null = null;
    let deliveryError: string | null = null;
    try {
      delivery = await partThree(redis, redisUrl, rx, sealKey);
      log(
        `part 3: ${fmt(delivery.eventsPerSec, 0)} events/s, ${fmt(delivery.deliveriesPerSec, 0)} deliveries/s; lag p50 ${fmt(delivery.lagMs.p50, 0)} ms p99 ${fmt(delivery.lagMs.p99, 0)} ms; ` +
          `duplicates ${delivery.duplicates}, missing ${delivery.missing}, bad signatures ${delivery.badSignatures}`,
      );
    } catch (err) {
      deliveryError = (err as Error).message.split('\n')[0]!;
      log(`part 3 FAILED: ${(err as Error).message}`);
      exitCode = 1;
    }
    meta.loadEnd = load();
    meta.totalSeconds = round((performance.now() - began) / 1000, 0);
    const rows = comparisons(partA.sessionRuns, partA.loginRuns);
    const markdown = report(meta, rows, partA.sessionRuns, partA.loginRuns, partA, delivery, deliveryError);
    process.stdout.write(`\n${markdown}\n`);
    const base = path.join(OUT_DIR, `${(meta.date as string).slice(0, 19).replace(/:/g, '-')}-webhooks`);
    const json = { meta, comparisons: rows, sessionRuns: partA.sessionRuns, loginRuns: partA.loginRuns, loginDeliveries: { duplicates: partA.duplicates, badSignatures: partA.badSignatures }, delivery, deliveryError };
    writeFileSync(`${base}.md`, `${markdown}\n`);
    writeFileSync(`${base}.json`, `${JSON.stringify(json, (_key, value: unknown) => (typeof value === 'number' ? round(value, 3) : value), 1)}\n`);
    log(`wrote ${path.relative(PROJECT_DIR, base)}.md and .json in ${meta.totalSeconds as number} s`);
    if (PROF_DIR) log(`CPU profiles in ${PROF_DIR} (npx tsx bench/prof-top.ts <file>)`);
  } finally {
    await rx.close();
    redis.disconnect();
    await redisChild.stop();
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  }
  process.exitCode = exitCode;
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1); // the exit hook kills the children
  },
);
