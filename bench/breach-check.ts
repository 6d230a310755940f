// `npm run bench:breach` (`tsx bench/breach-check.ts [options]`): what the breached-password check (issue 56,
// CONTRACT 14, `auth.passwords.breachCheck`) costs. Goals of the issue: login throughput with the check off
// unchanged (logins never check a password against the range API), and with it on, the p50 it adds to a
// request that sets a password is the range call and nothing else.
//
// ONE run: svc started twice from this checkout's sources (`node --import tsx <npm start's flags>
// src/server.ts`: the comparison is off against on, and a shared working tree that changes under a
// run would make `npm start` rebuild dist/ before each start), `off` (no breach check) and `on` (`breachCheck.enabled`,
// `rangeUrl` = a range server of this process on loopback that answers after a fixed delay, `--delay`
// ms, with ~800 padded `SUFFIX:COUNT` lines as the real API does with `Add-Padding`); one private
// redis-server; the embedded database. Rounds in ABBA order (off on on off ...):
// 1. Logins: N users (made untimed through the admin API), N `POST /auth/login` over C connections:
//    logins/s and latency. The range server must see no request while they run.
// 2. Setting a password: M `POST /auth/users` (the admin creates a user: an argon2 hash, a database
//    write, and with `on` the range call) one at a time, so p50 is the route's own time with no queueing.
//    The two stacks take turns request by request (pairs, the order alternating), each pair followed by
//    the range call alone from this process (`GET <rangeUrl><prefix>`, the same delay and answer, read to
//    the end): the median of the pairs' differences (what the check adds) is set beside the range call's p50.
//
// Prints a markdown table and writes bench/results/<date>-breach.{md,json}.
//
// Options: --rounds N (ABBA rounds, 4)  --logins N (100)  --connections N (logins in flight, 8)
//          --sets N (password sets per stack and round, 40)  --delay MS (the range server's, 20)
//          --quick (2 rounds, 30 logins, 10 sets)  --note TEXT  --out DIR (bench/results)
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { baseEnv, cpuSeconds, freePort, npmStartFlags, PROJECT_DIR, sleep, startChild, startRedisServer, waitHealthy, writeDotEnv, type Child } from './lib/procs.ts';
import { median, percentiles, round, type Percentiles } from './lib/stats.ts';

const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string' },
    logins: { type: 'string' },
    connections: { type: 'string', default: '8' },
    sets: { type: 'string' },
    delay: { type: 'string', default: '20' },
    quick: { type: 'boolean', default: false },
    note: { type: 'string' },
    out: { type: 'string', default: 'bench/results' },
  },
  strict: true,
});
const QUICK = opts.quick;
const ROUNDS = Number(opts.rounds ?? (QUICK ? 2 : 4));
const LOGINS = Number(opts.logins ?? (QUICK ? 30 : 100));
const CONNECTIONS = Number(opts.connections);
const SETS = Number(opts.sets ?? (QUICK ? 10 : 40));
const DELAY_MS = Number(opts.delay);
for (const [name, n] of Object.entries({ rounds: ROUNDS, logins: LOGINS, connections: CONNECTIONS, sets: SETS, delay: DELAY_MS })) {
  if (!Number.isInteger(n) || n < (name === 'delay' ? 0 : 1)) throw new Error(`--${name}: not a valid number`);
}
const OUT_DIR = path.resolve(PROJECT_DIR, opts.out ?? 'bench/results');

const began = performance.now();
const log = (msg: string) => process.stderr.write(`[${((performance.now() - began) / 1000).toFixed(0).padStart(4)}s] ${msg}\n`);
const ADMIN = { email: 'bench-admin@example.com', password: randomBytes(18).toString('base64url') };
const USER_PASSWORD = `bench-${randomBytes(9).toString('base64url')}`;
const tempDirs: string[] = [];
type Stack = 'off' | 'on';

// ---------------------------------------------------------------------------------------------
// The range server: a fixed delay, then ~800 padded lines (the size of a real answer with Add-Padding)

interface RangeServer {
  url: string;
  /** Every request's path. */
  paths: string[];
  close(): Promise<void>;
}

function rangeAnswer(prefix: string): string {
  const lines: string[] = [];
  for (let i = 0; i < 800; i++) lines.push(`${createHash('sha1').update(`${prefix}${i}`).digest('hex').toUpperCase().slice(5)}:${i % 3 === 0 ? 0 : i + 1}`);
  return lines.join('\r\n');
}

async function startRangeServer(): Promise<RangeServer> {
  const paths: string[] = [];
  const server: Server = createServer((req, res) => {
    const p = req.url ?? '/';
    paths.push(p);
    const prefix = /^\/range\/([0-9A-F]{5})$/.exec(p)?.[1];
    const body = prefix ? rangeAnswer(prefix) : '';
    setTimeout(() => res.writeHead(prefix ? 200 : 404, { 'content-type': 'text/plain' }).end(body), DELAY_MS);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}/range/`,
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// svc

interface Svc {
  stack: Stack;
  child: Child;
  url: string;
  cookie: string;
}

async function call(base: string, cookie: string, method: string, p: string, json?: unknown): Promise<{ status: number; body: string; cookie: string; retryAfter: number }> {
  const res = await fetch(base + p, {
    method,
    headers: { ...(cookie ? { cookie } : {}), ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    signal: AbortSignal.timeout(60_000),
  });
  const body = await res.text();
  const cookies = res.headers
    .getSetCookie()
    .map((line) => line.split(';')[0]!.trim())
    .filter((pair) => !pair.endsWith('='));
  return { status: res.status, body, cookie: cookies.join('; '), retryAfter: Number(res.headers.get('retry-after')) || 0 };
}

async function startSvc(stack: Stack, redisUrl: string, rangeUrl: string): Promise<Svc> {
  const appRoot = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-breach-app-'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-breach-data-'));
  tempDirs.push(appRoot, dataDir);
  const breachCheck = stack === 'on' ? { enabled: true, rangeUrl, failOpen: false } : { enabled: false };
  writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { cookie: { secure: false }, store: { keyPrefix: `${stack}:` }, passwords: { breachCheck } } }));
  writeDotEnv(appRoot, { CACHE_URL: redisUrl, SVC_ADMIN_PASSWORD: ADMIN.password });
  const port = await freePort();
  const child = startChild({
    name: `svc-${stack}`,
    argv: ['node', ...npmStartFlags(), 'src/server.ts'],
    env: { ...baseEnv(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', SVC_APP_PATH: appRoot, SVC_DATA_DIR: dataDir, SVC_ADMIN_EMAIL: ADMIN.email },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(child, `${url}/health`, 120_000);
  const login = await call(url, '', 'POST', '/auth/login', ADMIN);
  if (login.status !== 200) throw new Error(`svc-${stack}: the admin login answered ${login.status}: ${login.body}\n${child.output()}`);
  return { stack, child, url, cookie: login.cookie };
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

interface LoginRun {
  stack: Stack;
  round: number;
  loginsPerSec: number;
  latencyMs: Percentiles;
  /** Server CPU (user + system, all threads) per login: on a shared machine steadier than logins/s. */
  cpuMsPerLogin: number;
  /** Requests the range server got while the logins ran (must be 0). */
  rangeCalls: number;
}

interface SetRun {
  round: number;
  off: Percentiles;
  on: Percentiles;
  /** Per pair (the same i, the two stacks one right after the other): on - off, ms. */
  addedMs: Percentiles;
  /** The range call alone from the bench process, made right after each pair. */
  rangeCallMs: Percentiles;
  cpuMsPerSet: Record<Stack, number>;
  rangeCalls: number;
}

async function measureLogins(svc: Svc, users: string[], range: RangeServer, round: number): Promise<LoginRun> {
  const calls = range.paths.length;
  const latencies = new Float64Array(users.length);
  const cpu = cpuSeconds(svc.child.pid) ?? NaN;
  const start = performance.now();
  await pool(users.length, CONNECTIONS, async (i) => {
    for (;;) {
      const t = performance.now();
      const r = await call(svc.url, '', 'POST', '/auth/login', { email: users[i], password: USER_PASSWORD });
      if (r.status === 429) {
        await sleep(r.retryAfter * 1000 || 200);
        continue;
      }
      if (r.status !== 200) throw new Error(`svc-${svc.stack}: a login answered ${r.status}: ${r.body}`);
      latencies[i] = performance.now() - t;
      return;
    }
  });
  const seconds = (performance.now() - start) / 1000;
  const cpuMsPerLogin = (((cpuSeconds(svc.child.pid) ?? NaN) - cpu) * 1000) / users.length;
  return { stack: svc.stack, round, loginsPerSec: users.length / seconds, latencyMs: percentiles(latencies), cpuMsPerLogin, rangeCalls: range.paths.length - calls };
}

let made = 0;
async function setPassword(svc: Svc): Promise<number> {
  const email = `set-${svc.stack}-${++made}@example.com`;
  const t = performance.now();
  const r = await call(svc.url, svc.cookie, 'POST', '/auth/users', { email, password: `pw-${randomBytes(12).toString('base64url')}` });
  const ms = performance.now() - t;
  if (r.status !== 201) throw new Error(`svc-${svc.stack}: POST /auth/users answered ${r.status}: ${r.body}`);
  return ms;
}

/** The range call alone, from this process: what svc waits for when the check is on. */
async function rangeCall(range: RangeServer): Promise<number> {
  const prefix = createHash('sha1').update(randomBytes(8)).digest('hex').slice(0, 5).toUpperCase();
  const t = performance.now();
  const res = await fetch(`${range.url}${prefix}`, { headers: { 'Add-Padding': 'true' } });
  await res.text();
  return performance.now() - t;
}

/**
 * Password sets in pairs (off then on, or on then off, alternating), each pair followed by the range call
 * alone: on a shared machine whose load swings, the three see the same moment, and the median of the
 * pairs' differences is what the check adds.
 */
async function measureSets(stacks: Record<Stack, Svc>, range: RangeServer, round: number): Promise<SetRun> {
  const calls = range.paths.length;
  const off = new Float64Array(SETS);
  const on = new Float64Array(SETS);
  const added = new Float64Array(SETS);
  const alone = new Float64Array(SETS);
  const cpu = { off: cpuSeconds(stacks.off.child.pid) ?? NaN, on: cpuSeconds(stacks.on.child.pid) ?? NaN };
  for (let i = 0; i < SETS; i++) {
    if ((i + round) % 2) {
      on[i] = await setPassword(stacks.on);
      off[i] = await setPassword(stacks.off);
    } else {
      off[i] = await setPassword(stacks.off);
      on[i] = await setPassword(stacks.on);
    }
    added[i] = on[i]! - off[i]!;
    alone[i] = await rangeCall(range);
  }
  const cpuMs = (stack: Stack) => (((cpuSeconds(stacks[stack].child.pid) ?? NaN) - cpu[stack]) * 1000) / SETS;
  return { round, off: percentiles(off), on: percentiles(on), addedMs: percentiles(added), rangeCallMs: percentiles(alone), cpuMsPerSet: { off: cpuMs('off'), on: cpuMs('on') }, rangeCalls: range.paths.length - calls - SETS };
}

// ---------------------------------------------------------------------------------------------

function gitInfo(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT_DIR, encoding: 'utf8' }).stdout?.trim();
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'routes'], { cwd: PROJECT_DIR, encoding: 'utf8' }).stdout?.trim();
  return head ? `${head}${dirty ? ' + uncommitted changes in src/ or routes/' : ''}` : 'unknown';
}

const fmt = (x: number, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');

async function main(): Promise<void> {
  const date = new Date().toISOString();
  const meta: Record<string, unknown> = { date, git: gitInfo(), node: process.version, cpus: os.cpus().length, loadStart: os.loadavg()[0]!.toFixed(2), rounds: ROUNDS, logins: LOGINS, connections: CONNECTIONS, sets: SETS, delayMs: DELAY_MS, note: opts.note ?? '' };
  const redisPort = await freePort();
  const redisChild = startRedisServer(redisPort);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const range = await startRangeServer();
  const running: Svc[] = [];
  try {
    const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => {});
    for (let i = 0; ; i++) {
      try {
        await redis.connect();
        break;
      } catch (err) {
        if (i > 100 || !redisChild.running) throw new Error(`redis-server did not start\n${redisChild.output()}`, { cause: err });
        redis.disconnect();
        await sleep(100);
      }
    }
    meta.redis = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? '?';
    redis.disconnect();
    const stacks = { off: await startSvc('off', redisUrl, range.url), on: await startSvc('on', redisUrl, range.url) };
    running.push(stacks.off, stacks.on);
    // The login users, untimed (the `on` stack checks their passwords at the range server as it makes them).
    const users = Array.from({ length: LOGINS }, (_, i) => `login-${i}@example.com`);
    for (const svc of running) {
      await pool(users.length, 4, async (i) => {
        const r = await call(svc.url, svc.cookie, 'POST', '/auth/users', { email: users[i], password: USER_PASSWORD });
        if (r.status !== 201) throw new Error(`svc-${svc.stack}: creating ${users[i]} answered ${r.status}: ${r.body}`);
      });
    }
    log(`${LOGINS} users on each stack; ${range.paths.length} range calls so far (the on stack's ${LOGINS} creations)`);

    const loginRuns: LoginRun[] = [];
    const setRuns: SetRun[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order: Stack[] = r % 2 ? ['on', 'off'] : ['off', 'on'];
      for (const stack of order) {
        const l = await measureLogins(stacks[stack], users, range, r);
        loginRuns.push(l);
        log(`round ${r + 1} ${stack}: ${fmt(l.loginsPerSec)} logins/s (p50 ${fmt(l.latencyMs.p50)} ms, ${fmt(l.cpuMsPerLogin, 2)} CPU ms each, range calls ${l.rangeCalls})`);
      }
      const s = await measureSets(stacks, range, r);
      setRuns.push(s);
      log(`round ${r + 1} password sets: p50 off ${fmt(s.off.p50)} ms, on ${fmt(s.on.p50)} ms, added (paired) ${fmt(s.addedMs.p50)} ms, the range call alone ${fmt(s.rangeCallMs.p50)} ms; CPU ms each off ${fmt(s.cpuMsPerSet.off, 2)} on ${fmt(s.cpuMsPerSet.on, 2)}`);
    }
    const longest = Math.max(...range.paths.map((p) => p.slice('/range/'.length).length));
    meta.loadEnd = os.loadavg()[0]!.toFixed(2);
    meta.totalSeconds = round((performance.now() - began) / 1000, 0);

    const med = <T extends { stack: Stack }>(runs: T[], stack: Stack, f: (r: T) => number) => median(runs.filter((x) => x.stack === stack).map(f));
    const loginsOff = med(loginRuns, 'off', (x) => x.loginsPerSec);
    const loginsOn = med(loginRuns, 'on', (x) => x.loginsPerSec);
    const medSets = (f: (r: SetRun) => number) => median(setRuns.map(f));
    const added = medSets((x) => x.addedMs.p50);
    const alone = medSets((x) => x.rangeCallMs.p50);
    const cpuOff = medSets((x) => x.cpuMsPerSet.off);
    const cpuOn = medSets((x) => x.cpuMsPerSet.on);
    const loginRangeCalls = loginRuns.reduce((n, x) => n + x.rangeCalls, 0);
    const lines = [
      `# Breached-password check: cost (${date})`,
      '',
      `svc at ${meta.git as string}, from its sources (tsx) with \`npm start\`'s node flags, \`LOG_LEVEL=warn\`, embedded database, one private redis-server (${meta.redis as string}); ` +
        `Node ${process.version}, ${os.cpus().length} CPUs, load ${meta.loadStart as string} -> ${meta.loadEnd as string}; ${ROUNDS} ABBA rounds; ` +
        `range server on loopback answering after ${DELAY_MS} ms with 800 padded lines; ${LOGINS} logins over ${CONNECTIONS} connections, ${SETS} password sets one at a time, per stack and round.${opts.note ? ` Note: ${opts.note}` : ''}`,
      '',
      '| measure (median of rounds) | off | on | on / off, on - off |',
      '|---|---:|---:|---:|',
      `| \`POST /auth/login\` logins/s | ${fmt(loginsOff)} | ${fmt(loginsOn)} | ${fmt(loginsOn / loginsOff, 2)}x |`,
      `| \`POST /auth/login\` server CPU ms per login | ${fmt(med(loginRuns, 'off', (x) => x.cpuMsPerLogin), 2)} | ${fmt(med(loginRuns, 'on', (x) => x.cpuMsPerLogin), 2)} | ${fmt(med(loginRuns, 'on', (x) => x.cpuMsPerLogin) / med(loginRuns, 'off', (x) => x.cpuMsPerLogin), 2)}x |`,
      `| \`POST /auth/login\` p50 ms | ${fmt(med(loginRuns, 'off', (x) => x.latencyMs.p50))} | ${fmt(med(loginRuns, 'on', (x) => x.latencyMs.p50))} | |`,
      `| range calls during logins | ${loginRuns.filter((x) => x.stack === 'off').reduce((n, x) => n + x.rangeCalls, 0)} | ${loginRuns.filter((x) => x.stack === 'on').reduce((n, x) => n + x.rangeCalls, 0)} | |`,
      `| \`POST /auth/users\` (sets a password) p50 ms | ${fmt(medSets((x) => x.off.p50))} | ${fmt(medSets((x) => x.on.p50))} | paired: +${fmt(added)} ms |`,
      `| \`POST /auth/users\` p99 ms | ${fmt(medSets((x) => x.off.p99))} | ${fmt(medSets((x) => x.on.p99))} | |`,
      `| \`POST /auth/users\` server CPU ms per request | ${fmt(cpuOff, 2)} | ${fmt(cpuOn, 2)} | +${fmt(cpuOn - cpuOff, 2)} ms |`,
      `| the range call alone (from the bench process, after each pair) p50 ms | | ${fmt(alone)} | added - range call: ${fmt(added - alone)} ms |`,
      '',
      `Longest path the range server saw after \`/range/\`: ${longest} characters (only the 5-hex prefix leaves svc). Logins caused ${loginRangeCalls} range calls.`,
      '',
      '| round | stack | logins/s | login p50 ms | login p99 ms | CPU ms/login | range calls |',
      '|---:|---|---:|---:|---:|---:|---:|',
      ...loginRuns.map((l) => `| ${l.round + 1} | ${l.stack} | ${fmt(l.loginsPerSec)} | ${fmt(l.latencyMs.p50)} | ${fmt(l.latencyMs.p99)} | ${fmt(l.cpuMsPerLogin, 2)} | ${l.rangeCalls} |`),
      '',
      '| round | set p50 off | set p50 on | added p50 (paired) | range call alone p50 | CPU ms/set off | CPU ms/set on | range calls of on |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...setRuns.map((x) => `| ${x.round + 1} | ${fmt(x.off.p50)} | ${fmt(x.on.p50)} | ${fmt(x.addedMs.p50)} | ${fmt(x.rangeCallMs.p50)} | ${fmt(x.cpuMsPerSet.off, 2)} | ${fmt(x.cpuMsPerSet.on, 2)} | ${x.rangeCalls} |`),
    ];
    const markdown = lines.join('\n');
    process.stdout.write(`\n${markdown}\n`);
    mkdirSync(OUT_DIR, { recursive: true });
    const base = path.join(OUT_DIR, `${date.slice(0, 19).replace(/:/g, '-')}-breach`);
    writeFileSync(`${base}.md`, `${markdown}\n`);
    writeFileSync(`${base}.json`, `${JSON.stringify({ meta, loginRuns, setRuns, longestPrefix: longest }, (_k, v: unknown) => (typeof v === 'number' ? round(v, 3) : v), 1)}\n`);
    log(`wrote ${path.relative(PROJECT_DIR, base)}.md and .json`);
    if (loginRangeCalls !== 0 || longest !== 5) process.exitCode = 1;
  } finally {
    await Promise.all(running.map((s) => s.child.stop()));
    await range.close();
    await redisChild.stop();
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1); // the exit hook kills the children
  },
);
