// Soak (issue 13, "Resilience"): the real process on a private Redis (and a private MongoDB wire-
// protocol server when one can be had), 10,000 live sessions, then a warm-up and 60 s of mixed
// traffic: session lookups with random valid cookies, ?expand=user, unknown and malformed cookies,
// anonymous callers, /health, todo CRUD, logins and logouts. Zero 5xx, every answer the one its kind
// calls for, and what svc holds in memory may not grow by 10% after the warm-up.
//
// How memory is judged. Not by RSS: RSS is mostly the size V8 chose for its heap, and that choice
// depends on how the garbage collector keeps up with the allocation rate, which on a busy machine it
// does later and less (its concurrent marking and sweeping threads compete for the CPU). Measured on
// 2 cores under this load, RSS saws by ~20% from one second to the next and V8 shrinks and grows the
// heap now and then; with a second process burning a core the RSS "level" grew +12% with no leak (the
// run that failed), and fell 8-16% in the runs since, one of them WITH a leak (below). So the figure
// is the memory still reachable after a full collection: svc is started with --expose-gc, and the
// preload test/support/heap-report.ts collects (twice) on SIGUSR2 and prints heapUsed + external
// (Buffers and other memory that JS objects hold outside the V8 heap). The traffic is paused for each
// reading, so no request in flight adds to it. That is the live data: a leak raises it by what leaks, and a busy machine does not (the
// collection is forced, whatever CPU the collector would have had). Three readings at the end of the
// warm-up and three at the end, a second of traffic apart; each level is the lowest of its three.
// Judged twice: the end level may not be 10% above the warm-up level (issue 13), and, since a busy
// machine serves fewer requests in the same minute (so a leak per request grows less), it may not
// have grown by more than 64 bytes per request served in between, once past 2 MiB (readings of one
// run differ by up to ~1.5 MiB). RSS and V8's heap sizes are still reported.
// Checked by adding a leak of ~1 KB per request to svc, on a busy machine (54 requests/s): live memory
// +5.4% (under 10%) but 843 bytes per request: failed; RSS meanwhile fell 8.5%.

import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { describeTally, hit, jsonInit, procAvailable, runWorkers, sampleRss, show, sleep, type Hit } from '../support/load.ts';
import { startPrivateMongoServer, type MongoTestServer } from '../support/mongo.ts';
import { redisServerAvailable, startPrivateRedis } from '../support/private-redis.ts';
import { freePort, startReadySvc, stopAll, tempDir } from '../support/spawn.ts';

const CI = process.env.CI === 'true';
const ADMIN = { email: 'soak-admin@example.test', password: 'soak-admin-password' };
const USER_PASSWORD = 'soak-user-password';
const USERS = 20;
const SESSIONS = 10_000;
/** Live memory (after a full GC) may not grow by more than this after the warm-up... */
const LIVE_GROWTH_LIMIT = 0.1;
/** ...nor by more than this per request served after it, once past the noise floor. */
const LEAK_BYTES_PER_REQUEST = 64;
const LEAK_NOISE_FLOOR = 2 * 1024 * 1024;
const REAL_LOGINS = 300;
/** Seconds; SOAK_WARMUP_S / SOAK_MEASURE_S run a longer soak by hand. */
const WARMUP_S = Number(process.env.SOAK_WARMUP_S ?? 30);
const MEASURE_S = Number(process.env.SOAK_MEASURE_S ?? 60);
/** svc's defaults (docs/configuration.md): auth.store.keyPrefix, auth.session.ttl, auth.session.maxLifetime. */
const KEY_PREFIX = 'auth:';
const SESSION_TTL_S = 86_400;
const MAX_LIFETIME_S = 2_592_000;

const HEAP_REPORT = fileURLToPath(new URL('../support/heap-report.ts', import.meta.url));

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});
afterAll(stopAll);

const loud = (line: string) => process.stderr.write(`\n${'!'.repeat(8)} ${line} ${'!'.repeat(8)}\n\n`);
if (!redisServerAvailable) loud(`${CI ? 'FAILING' : 'SKIPPED'}: the soak needs redis-server on PATH`);
if (!procAvailable) loud(`${CI ? 'FAILING' : 'SKIPPED'}: the soak samples memory from /proc (Linux)`);

interface Holder {
  cookie: string;
  userId: string;
}

const pick = <T>(list: T[]): T => list[Math.floor(Math.random() * list.length)]!;
const mb = (kb: number) => (kb / 1024).toFixed(1);
const MiB = 1024 * 1024;

describe.skipIf((!redisServerAvailable || !procAvailable) && !CI)('soak', () => {
  it(`${WARMUP_S} s warm-up + ${MEASURE_S} s of mixed traffic over ${SESSIONS} sessions: zero 5xx, every answer as expected, live memory grows < 10% after the warm-up`, async () => {
    const setupStarted = performance.now();
    const phases: string[] = [];
    const phase = (name: string) => phases.push(`${name} ${((performance.now() - setupStarted) / 1000).toFixed(1)} s`);
    const redis = await startPrivateRedis(await freePort());
    cleanups.push(() => redis.kill());
    // MongoDB as in production when a mongo-java-server can be had, else the embedded database.
    let mongo: MongoTestServer | null = null;
    if (inject('mongoKind') === 'mongo-java-server' || CI) {
      mongo = await startPrivateMongoServer(0);
      expect(mongo, 'mongo-java-server did not start').toBeTruthy();
      cleanups.push(() => mongo!.stop());
    } else loud('soak: no mongo-java-server, running on the embedded database');
    // The store and database URLs and the admin password in the app root's .env, as production should
    // hand them over: in svc's environment they would make it start a worker without them
    // (src/secret-env.ts), and the pid sampled below would be that first process, not the service.
    const appRoot = tempDir('svc-soak-app-');
    const dotEnv = { CACHE_URL: redis.url, ...(mongo ? { MONGODB_URL: mongo.url } : {}), SVC_ADMIN_PASSWORD: ADMIN.password };
    writeFileSync(path.join(appRoot, '.env'), Object.entries(dotEnv).map(([k, v]) => `${k}=${JSON.stringify(v)}\n`).join(''), { mode: 0o600 });
    const svc = await startReadySvc({
      appRoot,
      env: {
        LOG_LEVEL: 'warn',
        // tsx first: Node runs NODE_OPTIONS' imports before the command line's. --expose-gc: for the
        // forced collections of heap-report.ts (test only).
        NODE_OPTIONS: `--expose-gc --import tsx --import ${HEAP_REPORT}`,
        SVC_ADMIN_EMAIL: ADMIN.email,
      },
    });
    cleanups.push(() => svc.stop('SIGKILL'));
    const url = (path: string) => `${svc.url}${path}`;
    phase('started');

    // Users, through the admin API.
    const admin = await hit('login', url('/auth/login'), jsonInit('POST', ADMIN));
    expect(admin.status, show(admin)).toBe(200);
    const users: { id: string; email: string }[] = [];
    for (let i = 0; i < USERS; i++) {
      const email = `soak${i}@example.test`;
      const res = await hit('create-user', url('/auth/users'), jsonInit('POST', { email, password: USER_PASSWORD }, admin.cookie));
      expect(res.status, show(res)).toBe(201);
      users.push({ id: (res.json as { id: string }).id, email });
    }

    phase('users created');
    // 10,000 sessions. Logging in 10,000 times costs 10,000 argon2 verifications, so the sessions are
    // written straight into svc's Redis exactly as src/auth/sessions.ts `create()` writes them: id =
    // 32 random bytes base64url (the cookie), key `auth:session:<sha256hex(id)>` holding the JSON record
    // {userId,isAdmin,provider,createdAt,expiresAt} with the session TTL, and the hash added to the
    // per-user index `auth:user-sessions:<userId>`. svc then finds them through its own lookup.
    const cookieName = 'sid_app';
    const pool: Holder[] = [];
    const r = new Redis(redis.url);
    try {
      const now = Date.now();
      for (let batch = 0; batch < SESSIONS; batch += 1000) {
        const pipe = r.pipeline();
        for (let i = batch; i < Math.min(SESSIONS, batch + 1000); i++) {
          const user = users[i % USERS]!;
          const id = randomBytes(32).toString('base64url');
          const hash = createHash('sha256').update(id).digest('hex');
          const record = { userId: user.id, isAdmin: false, provider: 'password', createdAt: now, expiresAt: now + SESSION_TTL_S * 1000 };
          pipe.set(`${KEY_PREFIX}session:${hash}`, JSON.stringify(record), 'EX', SESSION_TTL_S);
          pipe.sadd(`${KEY_PREFIX}user-sessions:${user.id}`, hash);
          pool.push({ cookie: `${cookieName}=${id}`, userId: user.id });
        }
        for (const user of users) pipe.expire(`${KEY_PREFIX}user-sessions:${user.id}`, MAX_LIFETIME_S);
        const results = await pipe.exec();
        expect(results?.every(([err]) => err === null)).toBe(true);
      }
      expect(await r.dbsize()).toBeGreaterThanOrEqual(SESSIONS);
    } finally {
      r.disconnect();
    }
    // They are sessions to svc: a sample answers 200 with its own user.
    for (let i = 0; i < 20; i++) {
      const holder = pick(pool);
      const res = await hit('check', url('/auth/session'), { headers: { cookie: holder.cookie } });
      expect(res.status, show(res)).toBe(200);
      expect((res.json as { userId: string }).userId).toBe(holder.userId);
    }

    phase('sessions written');
    // A few hundred real logins (4 at a time, never two of one user at once), kept as sessions too.
    let loginIndex = 0;
    const realLogins: Hit[] = [];
    await runWorkers(
      4,
      async (w) => {
        const user = users[(loginIndex++ * 4 + w) % USERS]!;
        const res = await hit('login', url('/auth/login'), jsonInit('POST', { email: user.email, password: USER_PASSWORD }));
        realLogins.push(res);
        if (res.status === 200) pool.push({ cookie: res.cookie!, userId: user.id });
      },
      { stop: () => realLogins.length >= REAL_LOGINS - 3, maxIterations: REAL_LOGINS / 4, maxMs: 120_000 },
    );
    expect(realLogins.filter((h) => h.status !== 200).map(show)).toEqual([]);
    expect(realLogins.length).toBeGreaterThanOrEqual(REAL_LOGINS - 3);

    phase('real logins done');
    // The traffic. Every request's expected answer is known; anything else is recorded.
    const hits: Hit[] = [];
    const unexpected: string[] = [];
    const expectStatus = (h: Hit, want: number, extra?: (h: Hit) => boolean) => {
      hits.push(h);
      if (h.status !== want || (extra && !extra(h))) unexpected.push(`${show(h)} (want ${want})`);
      return h.status === want;
    };
    let stop = false;
    const bounds = { stop: () => stop, maxIterations: 1_000_000, maxMs: (WARMUP_S + MEASURE_S + 30) * 1000 };
    const mixed = async () => {
      const roll = Math.random();
      if (roll < 0.45) {
        const h = pick(pool);
        expectStatus(await hit('session', url('/auth/session'), { headers: { cookie: h.cookie } }), 200, (res) => (res.json as { userId?: string }).userId === h.userId);
      } else if (roll < 0.58) {
        const h = pick(pool);
        expectStatus(await hit('expand', url('/auth/session?expand=user'), { headers: { cookie: h.cookie } }), 200, (res) => (res.json as { user?: { id?: string } }).user?.id === h.userId);
      } else if (roll < 0.66) {
        // Well-formed but unknown: costs a store lookup.
        expectStatus(await hit('unknown-cookie', url('/auth/session'), { headers: { cookie: `${cookieName}=${randomBytes(32).toString('base64url')}` } }), 401, (res) => res.code === 'unauthenticated');
      } else if (roll < 0.7) {
        const junk = pick(['x', 'a'.repeat(42), `${randomBytes(32).toString('base64url')}=`, '%%%', randomBytes(40).toString('hex')]);
        expectStatus(await hit('malformed-cookie', url('/auth/session'), { headers: { cookie: `${cookieName}=${junk}` } }), 401, (res) => res.code === 'unauthenticated');
      } else if (roll < 0.78) {
        expectStatus(await hit('anonymous', url(pick(['/auth/session', '/svc__todo/all', '/auth/users']))), 401);
      } else if (roll < 0.82) {
        expectStatus(await hit('health', url('/health')), 200);
      } else {
        // Todo CRUD as one user: create, read, change, delete for good.
        const h = pick(pool);
        const created = await hit('todo', url('/svc__todo/todo'), jsonInit('POST', { name: `soak ${Math.random()}`, tags: ['soak'] }, h.cookie));
        if (!expectStatus(created, 201)) return;
        const id = (created.json as { data: { _id: string } }).data._id;
        if (!expectStatus(await hit('todo', url(`/svc__todo/todo/${id}`), { headers: { cookie: h.cookie } }), 200)) return;
        if (!expectStatus(await hit('todo', url(`/svc__todo/todo/${id}`), jsonInit('PATCH', { content: 'changed' }, h.cookie)), 200)) return;
        expectStatus(await hit('todo', url(`/svc__todo/todo/${id}/hard`), { method: 'DELETE', headers: { cookie: h.cookie } }), 200);
      }
    };
    // Log in, use the session, log out, check it is gone: each worker with its own half of the users.
    const loginLogout = async (w: number, i: number) => {
      const user = users[(i * 2 + w) % USERS]!;
      const res = await hit('login', url('/auth/login'), jsonInit('POST', { email: user.email, password: USER_PASSWORD }));
      if (!expectStatus(res, 200)) return;
      expectStatus(await hit('session', url('/auth/session'), { headers: { cookie: res.cookie! } }), 200);
      expectStatus(await hit('logout', url('/auth/logout'), { method: 'POST', headers: { cookie: res.cookie! } }), 204);
      expectStatus(await hit('after-logout', url('/auth/session'), { headers: { cookie: res.cookie! } }), 401);
    };

    // The traffic can be paused: every worker parks before its next step, so a reading sees no
    // request in flight (each would add its own objects to it).
    const WORKERS = 26;
    let pause: Promise<void> | undefined;
    let resume = () => {};
    let parked = 0;
    const pausable =
      <A extends unknown[]>(step: (...args: A) => Promise<void>) =>
      async (...args: A) => {
        if (pause) {
          parked++;
          await pause;
          parked--;
        }
        await step(...args);
      };

    // What svc holds after a full collection (heap-report.ts, on SIGUSR2): heapUsed + external,
    // read while the traffic is paused. Resolves with null when the traffic would not pause.
    type Live = { seq: number; heapUsed: number; external: number; gcMs: number };
    let gcSeq = 0;
    const liveReadings: { at: string; live: number; gcMs: number }[] = [];
    const liveNow = async (at: string): Promise<number> => {
      pause = new Promise<void>((r) => (resume = r));
      try {
        const deadline = performance.now() + 10_000;
        while (parked < WORKERS && !stop && performance.now() < deadline) await sleep(10);
        expect(parked, 'workers parked for a memory reading').toBe(WORKERS);
        const seq = ++gcSeq;
        process.kill(svc.pid, 'SIGUSR2');
        const line = (await svc.waitForLog((l) => l.msg === 'heap-after-gc' && l.seq === seq, 15_000)) as unknown as Live;
        expect(line.heapUsed, 'svc was started without --expose-gc').toBeTypeOf('number');
        liveReadings.push({ at, live: line.heapUsed + line.external, gcMs: line.gcMs });
        return line.heapUsed + line.external;
      } finally {
        pause = undefined;
        resume();
      }
    };
    /** The lowest of three readings, with a second of traffic between them. */
    const liveLevel = async (at: string) => {
      const readings: number[] = [];
      for (let i = 0; i < 3; i++) {
        if (i) await sleep(1000);
        readings.push(await liveNow(at));
      }
      return Math.min(...readings);
    };

    const rss = sampleRss(svc.pid, 1000);
    const started = performance.now();
    const traffic = Promise.all([runWorkers(24, pausable(mixed), bounds), runWorkers(2, pausable(loginLogout), bounds)]);
    await sleep(WARMUP_S * 1000);
    const warmCount = hits.length;
    const warmLive = await liveLevel('warm-up');
    const warmLiveCount = hits.length;
    // Readings along the way, for the report: a leak shows as a steady climb.
    const measureEnd = started + (WARMUP_S + MEASURE_S) * 1000;
    while (measureEnd - performance.now() > 20_000) {
      await sleep(10_000);
      await liveNow(`${Math.round((performance.now() - started) / 1000)} s`);
    }
    await sleep(Math.max(0, measureEnd - performance.now() - 3000));
    const endLiveCount = hits.length;
    const endLive = await liveLevel('end');
    stop = true;
    await traffic;
    const seconds = (performance.now() - started) / 1000;
    const samples = rss.stop();
    const liveGrowth = (endLive - warmLive) / warmLive;
    const perRequest = (endLive - warmLive) / (endLiveCount - warmLiveCount);

    const total = samples.at(-1)!.t;
    const rssIn = (from: number, to: number) => samples.filter((x) => x.t >= from && x.t <= to).map((x) => x.kb);
    const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? NaN;
    const warmLevel = quantile(rssIn(0, WARMUP_S), 0.9);
    const endLevel = quantile(rssIn(total - 10, total), 0.5);
    const growth = (endLevel - warmLevel) / warmLevel;
    const warmPeak = Math.max(...rssIn(0, WARMUP_S));
    const afterPeak = Math.max(...rssIn(WARMUP_S + 0.01, total));
    const rows: string[] = [];
    for (let i = 0; i < samples.length; i += 10) rows.push(`  ${samples.slice(i, i + 10).map((x) => `${String(Math.round(x.t)).padStart(3)}s ${mb(x.kb).padStart(6)}`).join(' ')}`);
    // The live heap: the lowest heapUsed of each 10 s (just after a collection), from the preload.
    const heap = svc.logs().filter((l) => l.msg === 'heapstat') as unknown as { t: number; heapUsed: number; heapTotal: number }[];
    const heapRows: string[] = [];
    for (let t = 0; t <= (heap.at(-1)?.t ?? -1); t += 10) {
      const inWindow = heap.filter((x) => x.t >= t && x.t < t + 10);
      if (inWindow.length) heapRows.push(`${t}s ${Math.min(...inWindow.map((x) => x.heapUsed))}/${Math.max(...inWindow.map((x) => x.heapTotal))}`);
    }
    console.info(
      [
        `setup: ${phases.join(', ')}`,
        `soak: ${hits.length} requests in ${seconds.toFixed(1)} s (${Math.round(hits.length / seconds)}/s; ${warmCount} in the warm-up) over ${pool.length} sessions (${SESSIONS} written to Redis, ${realLogins.length} real logins before the traffic); database: ${mongo ? 'MongoDB (mongo-java-server)' : 'embedded'}`,
        describeTally(hits),
        `RSS (MB) every second from the start of the traffic:`,
        ...rows,
        `live memory after a full GC (heapUsed + external, MiB): ${liveReadings.map((r) => `${r.at} ${(r.live / MiB).toFixed(1)}`).join(', ')} (each GC ${Math.max(...liveReadings.map((r) => r.gcMs))} ms at most)`,
        `live memory growth: warm-up level ${(warmLive / MiB).toFixed(1)} MiB -> end level ${(endLive / MiB).toFixed(1)} MiB: ${(liveGrowth * 100).toFixed(1)}%, ${perRequest.toFixed(1)} bytes per request over ${endLiveCount - warmLiveCount} requests (a leak of ${Math.round(Math.min(LIVE_GROWTH_LIMIT * warmLive, Math.max(LEAK_NOISE_FLOOR, LEAK_BYTES_PER_REQUEST * (endLiveCount - warmLiveCount))) / (endLiveCount - warmLiveCount))} bytes per request would have failed this run)`,
        `RSS (reported, not judged): warm-up level (p90 of 0-${WARMUP_S} s) ${mb(warmLevel)} MB -> end level (median of the last 10 s) ${mb(endLevel)} MB: ${(growth * 100).toFixed(1)}%`,
        `RSS high-water marks: warm-up ${mb(warmPeak)} MB, after it ${mb(afterPeak)} MB (${(((afterPeak - warmPeak) / warmPeak) * 100).toFixed(1)}%); sample at ${WARMUP_S} s ${mb(rssIn(0, WARMUP_S).at(-1)!)} MB, last ${mb(samples.at(-1)!.kb)} MB`,
        `heap (MiB; svc's clock; per 10 s lowest heapUsed / highest heapTotal): ${heapRows.join(', ')}`,
      ].join('\n'),
    );

    expect(hits.filter((h) => h.status >= 500).map(show), '5xx answers').toEqual([]);
    expect(unexpected.slice(0, 20), `${unexpected.length} unexpected answers`).toEqual([]);
    // Enough traffic that a leak would show: every kind ran, and the warm-up was not the whole run.
    for (const kind of ['session', 'expand', 'unknown-cookie', 'malformed-cookie', 'anonymous', 'health', 'todo', 'login', 'logout', 'after-logout']) {
      expect(hits.filter((h) => h.kind === kind).length, `${kind} requests`).toBeGreaterThan(10);
    }
    // The measured minute is twice the warm-up: a quarter of all requests holds even when the machine
    // got three times busier after the warm-up (a CI run starting beside it halved the rate once).
    expect(hits.length - warmCount, 'requests after the warm-up').toBeGreaterThan(hits.length / 4);
    expect(samples.length, 'RSS samples').toBeGreaterThanOrEqual(WARMUP_S + MEASURE_S - 5);
    const grew = `live memory grew from ${(warmLive / MiB).toFixed(1)} MiB (warm-up) to ${(endLive / MiB).toFixed(1)} MiB (end)`;
    expect(liveGrowth, grew).toBeLessThan(LIVE_GROWTH_LIMIT);
    if (endLive - warmLive > LEAK_NOISE_FLOOR) expect(perRequest, `${grew}: bytes per request served`).toBeLessThan(LEAK_BYTES_PER_REQUEST);
    expect(svc.running).toBe(true);
    expect(await svc.stop()).toBe(0);
  });
});
