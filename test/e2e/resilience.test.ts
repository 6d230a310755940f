// Resilience of the real process (CONTRACT sections 1 and 2): a store or database outage answers
// 503 quickly and heals by itself without a restart; SIGTERM finishes in-flight requests and exits
// 0; the embedded database keeps its data across restarts and crashes and admits one process at a
// time. Every server here is private to this file (own ports, own data dirs), all on loopback.

import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { startPrivateMongoServer, type MongoTestServer } from '../support/mongo.ts';
import { redisServerAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis.ts';
import { freePort, sleep, startReadySvc, startSvc, stopAll, tempDir, type SvcProcess } from '../support/spawn.ts';

const ADMIN = { email: 'ops@example.test', password: 'resilience-admin-pw' };
const ADMIN_ENV = { SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password };

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});
afterAll(stopAll);

interface Timed {
  status: number;
  body: unknown;
  ms: number;
  contentType: string | null;
}

/** A request with a hard 10 s cap, timed. */
async function timed(url: string, init: RequestInit = {}): Promise<Timed> {
  const started = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // keep the text
  }
  return { status: res.status, body, ms: Math.round(performance.now() - started), contentType: res.headers.get('content-type') };
}

const health = (svc: SvcProcess) => timed(`${svc.url}/health`);

async function login(svc: SvcProcess, email = ADMIN.email, password = ADMIN.password): Promise<Timed & { cookie?: string }> {
  const started = performance.now();
  const res = await fetch(`${svc.url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return {
    status: res.status,
    body: text ? JSON.parse(text) : null,
    ms: Math.round(performance.now() - started),
    contentType: res.headers.get('content-type'),
    cookie: res.headers.get('set-cookie')?.split(';')[0],
  };
}

/** Polls `/health` (each try capped) until it answers 200; returns the ms it took, or throws. */
async function waitHealthy(svc: SvcProcess, withinMs: number): Promise<number> {
  const started = performance.now();
  let last: Timed | undefined;
  while (performance.now() - started < withinMs) {
    try {
      last = await health(svc);
      if (last.status === 200) return Math.round(performance.now() - started);
    } catch {
      // keep polling
    }
    await sleep(100);
  }
  throw new Error(`/health not 200 within ${withinMs} ms (last: ${JSON.stringify(last)})\n${svc.output()}`);
}

/**
 * How long one answer during an outage may take. The service answers within 2 s (its /health probe gives
 * up after 1.5 s, a store command after 1.5 s), but a wall-clock bound must hold at 3x its quiet value
 * on a busy 2-core machine; without those deadlines a request would hang until the 30 s request timeout.
 */
const OUTAGE_ANSWER_MS = 5000;

/** Several /health calls during an outage: each 503 with `expected` (quickly). Returns the timings. */
async function expectDownFast(svc: SvcProcess, expected: Record<string, string>, times = 4): Promise<number[]> {
  const timings: number[] = [];
  for (let i = 0; i < times; i++) {
    const res = await health(svc);
    timings.push(res.ms);
    expect(res.status, `try ${i + 1}: ${JSON.stringify(res)}`).toBe(503);
    expect(res.body).toEqual(expected);
    expect(res.contentType).toMatch(/^application\/json/);
    expect(res.ms, `try ${i + 1} took ${res.ms} ms (all: ${timings.join(', ')})`).toBeLessThan(OUTAGE_ANSWER_MS);
  }
  return timings;
}

function expectUnavailable(res: Timed) {
  expect(res.status, JSON.stringify(res)).toBe(503);
  expect(res.body).toEqual({ error: { code: 'unavailable', message: expect.stringMatching(/\S/) } });
  expect(res.contentType).toMatch(/^application\/json/);
}

describe.skipIf(!redisServerAvailable)('Redis outage', () => {
  it('Redis killed: /health 503 store down within 2 s each, 503 unavailable for store work, healed after Redis returns', async () => {
    const port = await freePort();
    let redis: PrivateRedis = await startPrivateRedis(port);
    cleanups.push(() => redis.kill());
    const svc = await startReadySvc({ env: { CACHE_URL: redis.url, ...ADMIN_ENV } });

    expect((await health(svc)).body).toEqual({ status: 'ok', store: 'ok', db: 'ok' });
    const before = await login(svc);
    expect(before.status).toBe(200);

    await redis.kill('SIGKILL');
    const killedAt = performance.now();
    const timings = await expectDownFast(svc, { status: 'down', store: 'down', db: 'ok' }, 5);

    // Work that needs the store says "unavailable", not "wrong password" or "log in again".
    const duringLogin = await login(svc);
    expectUnavailable(duringLogin);
    expect(duringLogin.ms).toBeLessThan(OUTAGE_ANSWER_MS);
    const duringSession = await timed(`${svc.url}/auth/session`, { headers: { cookie: before.cookie! } });
    expectUnavailable(duringSession);
    // A probe that carries a session cookie (a browser, a proxy that forwards one) learns which part is
    // down too: the health body, not the session lookup's 503 unavailable.
    for (const path of ['/health', '/api/health']) {
      const probed = await timed(`${svc.url}${path}`, { headers: { cookie: before.cookie! } });
      expect(probed.status, `${path}: ${JSON.stringify(probed)}`).toBe(503);
      expect(probed.body).toEqual({ status: 'down', store: 'down', db: 'ok' });
    }
    // Only there: every other route the cookie reaches says the store is unavailable (`?x=1` passes
    // the session lane, so the app's session hook looks the cookie up), never answers as anonymous.
    for (const path of ['/auth/session?x=1', '/health/', '/svc__todo/all', '/auth/users']) {
      expectUnavailable(await timed(`${svc.url}${path}`, { headers: { cookie: before.cookie! } }));
    }

    // A real outage lasts a while: the process stays up and keeps answering 503 quickly.
    await sleep(Math.max(0, 2000 - (performance.now() - killedAt)));
    timings.push(...(await expectDownFast(svc, { status: 'down', store: 'down', db: 'ok' }, 2)));
    expect(svc.running, svc.output()).toBe(true);
    // The operator learns of it from the log, once per outage rather than once per retry.
    const lost = svc.logs().filter((l) => (l.level ?? 0) >= 50 && !l.reqId && JSON.stringify(l).includes('cache'));
    expect(lost.length, svc.stdout()).toBeGreaterThanOrEqual(1);
    expect(lost.length, svc.stdout()).toBeLessThanOrEqual(2);
    const linesBeforeRestart = svc.logs().length;

    redis = await startPrivateRedis(port);
    const healedInMs = await waitHealthy(svc, 5000);
    expect(svc.running).toBe(true);
    expect((await login(svc)).status).toBe(200); // the store works again, without a restart
    console.info(`redis killed: /health during outage ${timings.join(', ')} ms; healthy again ${healedInMs} ms after restart`);
    const restored = svc.logs().slice(linesBeforeRestart).filter((l) => l.level === 30 && !l.reqId && JSON.stringify(l).includes('cache'));
    expect(restored.length, svc.stdout()).toBeGreaterThanOrEqual(1);
    expect(await svc.stop()).toBe(0);
  });

  it('Redis frozen (no answers, connection open): /health 503 within 2 s; sessions survive once it answers again', async () => {
    const redis = await startPrivateRedis(await freePort());
    cleanups.push(() => redis.kill());
    const svc = await startReadySvc({ env: { CACHE_URL: redis.url, ...ADMIN_ENV } });
    const { cookie } = await login(svc);
    expect((await timed(`${svc.url}/auth/session`, { headers: { cookie: cookie! } })).status).toBe(200);
    // What the frozen server is asked shows once it answers again (its socket buffers keep it).
    const monitor = await new Redis(redis.url, { lazyConnect: true }).monitor(); // its own connection; the first never connects
    monitor.on('error', () => {}); // the server is killed at the end
    cleanups.unshift(async () => monitor.disconnect());
    const lookups: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => void (args[0]?.toLowerCase() === 'getex' && lookups.push(args[1]!)));

    redis.freeze();
    await sleep(100); // a signal is delivered asynchronously
    const timings = await expectDownFast(svc, { status: 'down', store: 'down', db: 'ok' }, 3);
    // A request that needs the store gives up after the store's command timeout (1.5 s), with 503: it
    // asks once (GET /auth/session's lane used to hand a failed lookup to the app, which asked again).
    const during = await timed(`${svc.url}/auth/session`, { headers: { cookie: cookie! } });
    expectUnavailable(during);
    expect(during.ms).toBeLessThan(OUTAGE_ANSWER_MS);
    redis.thaw();
    const healedInMs = await waitHealthy(svc, 5000);
    await expect.poll(() => lookups.length, { timeout: 5000 }).toBeGreaterThan(0);
    await sleep(500); // a second lookup, if any, sat in the same buffer
    expect(lookups, 'one session lookup for one request').toHaveLength(1);
    const line = svc.logs().find((l) => l.msg === 'request' && l.path === '/auth/session' && l.status === 503);
    expect(line?.ms, 'the access line counts the wait for the store').toBeGreaterThanOrEqual(1400);
    console.info(`redis frozen: /health during outage ${timings.join(', ')} ms; /auth/session ${during.ms} ms; healthy again ${healedInMs} ms after thaw`);

    const after = await timed(`${svc.url}/auth/session`, { headers: { cookie: cookie! } });
    expect(after.status, JSON.stringify(after)).toBe(200);
    expect(svc.running).toBe(true);
    expect(await svc.stop()).toBe(0);
  });
});

// A private mongo-java-server can be had when the suites' own one runs; otherwise (MONGODB_TEST_URL
// set) find out once by starting one.
const mongoAvailable =
  inject('mongoKind') === 'mongo-java-server' ||
  (await startPrivateMongoServer(0).then(async (m) => {
    await m?.stop();
    return m !== null;
  }));

describe.skipIf(!mongoAvailable)('MongoDB outage', () => {
  it('MongoDB stopped: /health 503 db down within 2 s each, 503 unavailable for db work, healed after it returns', async () => {
    let mongo = (await startPrivateMongoServer(await freePort()))!;
    expect(mongo).toBeTruthy();
    cleanups.push(() => mongo.stop());
    const port = Number(new URL(mongo.url).port);
    const svc = await startReadySvc({ env: { MONGODB_URL: mongo.url, ...ADMIN_ENV } });
    expect((await health(svc)).body).toEqual({ status: 'ok', store: 'ok', db: 'ok' });
    expect((await login(svc)).status).toBe(200);

    await mongo.stop();
    const timings = await expectDownFast(svc, { status: 'down', store: 'ok', db: 'down' }, 4);

    // A login while the database is away is "unavailable", never "invalid credentials".
    expectUnavailable(await login(svc));
    expect(svc.running, svc.output()).toBe(true);
    // The operator learns of it from the log, once per outage rather than once per request.
    const lost = svc.logs().filter((l) => (l.level ?? 0) >= 50 && !l.reqId && l.db === 'mongodb');
    expect(lost.length, svc.stdout()).toBe(1);
    const linesBeforeRestart = svc.logs().length;

    const restarted: MongoTestServer | null = await startPrivateMongoServer(port);
    expect(restarted, `mongo-java-server did not start again on port ${port}`).toBeTruthy();
    mongo = restarted!;
    const healedInMs = await waitHealthy(svc, 8000);
    console.info(`mongodb stopped: /health during outage ${timings.join(', ')} ms; healthy again ${healedInMs} ms after restart`);
    expect(svc.running).toBe(true);
    const restored = svc.logs().slice(linesBeforeRestart).filter((l) => l.level === 30 && !l.reqId && l.db === 'mongodb');
    expect(restored.length, svc.stdout()).toBe(1);
    expect(await svc.stop()).toBe(0);
  });

  it('MongoDB frozen (connection open, no answers): /health 503 within 2 s, db work 503 unavailable, healed after thaw', async () => {
    const mongo = (await startPrivateMongoServer(0))!;
    expect(mongo?.pid).toBeTruthy();
    cleanups.push(() => mongo.stop());
    const svc = await startReadySvc({ env: { MONGODB_URL: mongo.url, ...ADMIN_ENV } });
    expect((await login(svc)).status).toBe(200);

    process.kill(mongo.pid!, 'SIGSTOP');
    cleanups.push(async () => process.kill(mongo.pid!, 'SIGCONT'));
    await sleep(100); // a signal is delivered asynchronously
    const timings = await expectDownFast(svc, { status: 'down', store: 'ok', db: 'down' }, 2);
    // No answer at all (as in a network partition that drops packets): an operation on an open
    // connection waits until the driver's monitor finds the server silent (connectTimeoutMS 2 s after
    // its check began, src/db/mongo.ts) and interrupts it: 503; from then on 503 at once.
    const first = await login(svc);
    expectUnavailable(first);
    expect(first.ms).toBeLessThan(12_000);
    const second = await login(svc);
    expectUnavailable(second);
    expect(second.ms).toBeLessThan(12_000);

    process.kill(mongo.pid!, 'SIGCONT');
    const healedInMs = await waitHealthy(svc, 8000);
    expect((await login(svc)).status).toBe(200);
    console.info(`mongodb frozen: /health ${timings.join(', ')} ms; login ${first.ms} then ${second.ms} ms; healthy again ${healedInMs} ms after thaw`);
    expect(await svc.stop()).toBe(0);
  });
});

describe.skipIf(!redisServerAvailable)('SIGTERM', () => {
  it('finishes in-flight requests on keep-alive connections with 200, refuses new connections, exits 0, logs "stopped"', async () => {
    const redis = await startPrivateRedis(await freePort());
    cleanups.push(() => redis.kill());
    const svc = await startReadySvc({ env: { CACHE_URL: redis.url } });
    const N = 6;
    const agent = new http.Agent({ keepAlive: true, maxSockets: N });
    cleanups.push(async () => agent.destroy());

    const get = () =>
      new Promise<{ status: number; body: string; reused: boolean; at: number }>((resolve, reject) => {
        const req = http.get(`${svc.url}/health`, { agent }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString('utf8')));
          res.on('end', () => resolve({ status: res.statusCode!, body, reused: req.reusedSocket, at: performance.now() }));
        });
        req.on('error', reject);
      });

    // Open N keep-alive connections.
    const warm = await Promise.all(Array.from({ length: N }, get));
    expect(warm.every((r) => r.status === 200)).toBe(true);

    // Make every /health take ~1 s (Redis holds all commands), fire N requests on those
    // connections, and send SIGTERM while they wait.
    expect(await redis.command(['CLIENT', 'PAUSE', '1000', 'ALL'])).toBe('+OK');
    const inFlight = Promise.all(Array.from({ length: N }, get));
    await sleep(250);
    const sigtermAt = performance.now();
    process.kill(svc.pid, 'SIGTERM');
    await sleep(250);

    // The listener is closed: a new connection is refused while the old ones finish.
    const refused = await new Promise<boolean>((resolve) => {
      const s = net.connect({ port: svc.port, host: '127.0.0.1' });
      s.once('connect', () => {
        s.destroy();
        resolve(false);
      });
      s.once('error', () => resolve(true));
    });
    expect(refused, 'a new connection was accepted after SIGTERM').toBe(true);

    const results = await inFlight;
    for (const r of results) {
      expect(r.status, r.body).toBe(200);
      expect(JSON.parse(r.body)).toEqual({ status: 'ok', store: 'ok', db: 'ok' });
      expect(r.reused, 'the request did not use a kept-alive connection').toBe(true);
      expect(r.at, 'the request had finished before SIGTERM').toBeGreaterThan(sigtermAt);
    }

    const code = await Promise.race([svc.exited, sleep(8000).then(() => 'still running')]);
    expect(code, svc.output()).toBe(0);
    expect(svc.logs().some((l) => l.msg === 'stopped'), svc.output()).toBe(true);
    expect(svc.stderr()).toBe('');
  });
});

describe('embedded database across restarts', () => {
  it('keeps its data across svc start/stop, holds the LOCK while running and releases it on stop', async () => {
    const dir = tempDir('svc-data-');

    // Data written before svc ever ran (directly, as another tool would while svc is stopped).
    const before = new EmbeddedDatabase(dir);
    const notes = await before.collection<{ _id: string; text: string }>('svctest-notes');
    await notes.insertOne({ _id: 'n1', text: 'written before svc started' });
    await before.close();
    expect(existsSync(path.join(dir, 'LOCK'))).toBe(false);

    // First run: bootstrap admin with a random password, printed once; the admin creates a user.
    const first = await startReadySvc({ dataDir: dir });
    expect(readFileSync(path.join(dir, 'LOCK'), 'utf8').trim()).toBe(String(first.pid));
    expect(() => new EmbeddedDatabase(dir)).toThrow(new RegExp(`in use by process ${first.pid}`));

    const printed = await first.waitForLog((l) => /bootstrap admin created/.test(l.msg ?? ''));
    const password = /password (\S+)/.exec(printed.msg ?? '')?.[1];
    expect(password, printed.msg).toBeTruthy();
    const admin = await login(first, 'admin@localhost', password!);
    expect(admin.status, JSON.stringify(admin)).toBe(200);
    const created = await timed(`${first.url}/auth/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: admin.cookie! },
      body: JSON.stringify({ email: 'kept@example.test', password: 'kept-user-password' }),
    });
    expect(created.status, JSON.stringify(created)).toBe(201);

    expect(await first.stop('SIGTERM')).toBe(0);
    expect(existsSync(path.join(dir, 'LOCK')), 'LOCK left behind after a clean stop').toBe(false);

    // Second run on the same folder: same users, no second bootstrap admin.
    const second = await startReadySvc({ dataDir: dir });
    expect((await login(second, 'admin@localhost', password!)).status).toBe(200);
    expect((await login(second, 'kept@example.test', 'kept-user-password')).status).toBe(200);
    expect(second.logs().some((l) => /bootstrap admin created/.test(l.msg ?? ''))).toBe(false);
    expect(await second.stop('SIGINT')).toBe(0);

    // And the data written outside svc is untouched.
    const after = new EmbeddedDatabase(dir);
    const again = await after.collection<{ _id: string; text: string }>('svctest-notes');
    expect(await again.find({})).toEqual([{ _id: 'n1', text: 'written before svc started' }]);
    await after.close();
  });

  it('a second svc on the same data folder refuses to start, naming the lock; the first keeps serving', async () => {
    const dir = tempDir('svc-data-');
    const first = await startReadySvc({ dataDir: dir });
    const second = await startSvc({ dataDir: dir });
    expect(second.ready, second.output()).toBe(false);
    expect(second.exitCode, second.output()).not.toBe(0);
    expect(second.stderr()).toMatch(new RegExp(`in use by process ${first.pid}`));
    expect(second.stderr()).toContain(dir);
    expect((await health(first)).status).toBe(200);
    expect(readFileSync(path.join(dir, 'LOCK'), 'utf8').trim()).toBe(String(first.pid)); // not stolen
    expect(await first.stop()).toBe(0);
  });

  it('after a crash (SIGKILL) the stale LOCK does not block the next start, and acknowledged writes survive', async () => {
    const dir = tempDir('svc-data-');
    const crashed = await startReadySvc({ dataDir: dir, env: ADMIN_ENV });
    const admin = await login(crashed);
    const created = await timed(`${crashed.url}/auth/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: admin.cookie! },
      body: JSON.stringify({ email: 'survivor@example.test', password: 'survivor-password' }),
    });
    expect(created.status, JSON.stringify(created)).toBe(201);
    expect(await crashed.stop('SIGKILL')).toBeNull();
    expect(existsSync(path.join(dir, 'LOCK'))).toBe(true); // left behind by the crash

    const next = await startReadySvc({ dataDir: dir, env: ADMIN_ENV });
    expect((await login(next, 'survivor@example.test', 'survivor-password')).status).toBe(200);
    expect(await next.stop()).toBe(0);
  });
});
