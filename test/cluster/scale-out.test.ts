// svc on Redis Cluster (3 masters + 3 replicas) and on Redis with Sentinel (primary + replica + 3
// Sentinels), real servers started here (test/cluster/support/topology.ts). On each: the store
// contract; login, the session, logout-all, single-use OAuth state and the login rate limit; two svc
// instances sharing it; then the master holding a logged-in session is killed (after its write is
// replicated: WAIT) and, once a replica has taken over, the session still works.

import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/store/redis.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { redisServerAvailable } from '../support/private-redis.ts';
import { storeContract } from '../support/store-contract.ts';
import { kill, startCluster, startSentinel, stopAll, until, type ClusterTopology, type SentinelTopology } from './support/topology.ts';

if (!redisServerAvailable && process.env.CI === 'true') throw new Error('CI=true but redis-server is not installed');
if (!redisServerAvailable) process.stderr.write('\n!!!!!!!! SKIPPED: the scale-out suites need redis-server !!!!!!!!\n\n');

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const PASSWORD = 'correct horse battery';

interface Topology {
  url: string;
  /** The data port holding `key` now (its slot's master, or the Sentinel-reported master). */
  masterFor(key: string): Promise<number>;
  /** Whether the local session cache can run here: Sentinel yes (one master), a Cluster no (tracking is per node). */
  tracks: boolean;
}

/** Connections of svc instances that track session keys in broadcasting mode (CLIENT LIST flag B) on a server. */
async function trackingClients(port: number): Promise<number> {
  const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  try {
    await probe.connect();
    return String(await probe.client('LIST')).split('\n').filter((l) => / flags=\S*B/.test(l)).length;
  } finally {
    probe.disconnect();
  }
}

/** `promise`, or a failure naming the step it is stuck at (the test's own timeout names nothing). */
function step<T>(name: string, promise: Promise<T>, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`stuck at ${name} for ${ms} ms`)), ms)));
  return Promise.race([promise, stuck]).finally(() => clearTimeout(timer));
}

function scaleOut(name: string, startTopology: () => Promise<Topology>) {
  describe.skipIf(!redisServerAvailable)(`svc on ${name}`, () => {
    let topology: Topology;
    let a: TestApp;
    let b: TestApp;
    /** The HTTP server each instance's socket.io attaches to (listening only where a test connects). */
    const http = new Map<TestApp, Server>();
    const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;
    // Started when this suite runs (the other topology is stopped by then): never at collection.
    beforeAll(async () => {
      topology = await startTopology();
      // auth.session.localCache on: every test below also holds with it (on a Cluster svc keeps it off).
      const config = { auth: { store: { keyPrefix }, session: { localCache: true }, apiKeys: { rateLimit: 10 } } };
      // Two instances of one app: same store, same prefix; each its own process state.
      [a, b] = [await createTestApp({ redisUrl: topology.url, config }), await createTestApp({ redisUrl: topology.url, config })];
      for (const t of [a, b]) http.set(t, createServer());
    }, 120_000);
    afterAll(async () => {
      await Promise.allSettled([a?.close(), b?.close()]);
      for (const server of http.values()) server.close();
      await stopAll();
    });

    storeContract(name, async () => {
      const store = new RedisStore({ url: topology.url, name: 'cache' });
      await store.connect(topology.url);
      return store;
    });

    async function login(t: TestApp, email: string): Promise<TestClient> {
      const c = t.client();
      expect((await c.login(email, PASSWORD)).status).toBe(200);
      return c;
    }
    const replay = (t: TestApp, c: TestClient) => t.fetch('/auth/session', { headers: { cookie: `sid_app=${c.cookies.get('sid_app')}` } });

    it('login on one instance is valid on the other; logout-all on the other ends every session', async () => {
      const { email } = await a.createUser({ password: PASSWORD });
      const one = await login(a, email);
      const two = await login(a, email);
      expect((await replay(b, one)).status).toBe(200);
      expect((await b.fetch('/auth/logout-all', { method: 'POST', headers: { cookie: `sid_app=${one.cookies.get('sid_app')}` } })).status).toBe(204);
      expect((await replay(a, one)).status).toBe(401);
      expect((await replay(b, two)).status).toBe(401);
      expect((await two.fetch('/auth/session')).status).toBe(401);
    });

    it('the local session cache: on Sentinel both instances track the master and a logout on one is refused on the other at once; on a Cluster it stays off', async () => {
      const { email } = await a.createUser({ password: PASSWORD });
      const c = await login(a, email);
      const master = await topology.masterFor(`${keyPrefix}session:${sha256(c.cookies.get('sid_app')!)}`);
      if (!topology.tracks) {
        expect(await trackingClients(master)).toBe(0);
        return;
      }
      await until('both instances track session keys on the master', async () => (await trackingClients(master)) === 2, 10_000);
      for (let i = 0; i < 5; i++) expect((await replay(b, c)).status).toBe(200);
      expect((await c.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
      await until('the logout on A is refused on B', async () => (await replay(b, c)).status === 401, 1_000);
    });

    it('an OAuth state is good once, even when ten callbacks race for it', async () => {
      const store = a.instance.stores.forRole('oauthState');
      const key = `${keyPrefix}oauth-state:${sha256(randomUUID())}`;
      await store.set(key, '{"providerId":"x"}', { ttl: 600 });
      const taken = await Promise.all(Array.from({ length: 10 }, () => store.getDel(key)));
      expect(taken.filter((v) => v !== null)).toHaveLength(1);
    });

    it('realtime spans the instances: a server-side emit on one reaches the other (socket.io Redis Streams adapter on this topology)', async () => {
      // As a serving process does (the adapter is set up when socket.io attaches to the HTTP server).
      for (const t of [a, b]) await t.instance.realtime.attach(http.get(t)!);
      const got = new Promise<unknown>((resolve) => b.instance.realtime.io.on('scaleOutPing', resolve));
      // The adapter's reader starts with the instance; emit until B has heard one (its first XREAD may still be on its way).
      let heard: unknown;
      void got.then((v) => (heard = v));
      await until('B hears a server-side emit of A', async () => {
        a.instance.realtime.io.serverSideEmit('scaleOutPing', { from: 'a' });
        await new Promise((r) => setTimeout(r, 100));
        return heard !== undefined;
      });
      expect(heard).toEqual({ from: 'a' });
    });

    it('connection state recovery on this topology: a dropped socket reconnects with what was emitted meanwhile, on the other instance', async () => {
      const { email, id } = await a.createUser({ password: PASSWORD });
      const c = await login(a, email);
      const server = http.get(a)!;
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const socket = io(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { path: '/socket.io', reconnection: false, forceNew: true, extraHeaders: { cookie: `sid_app=${c.cookies.get('sid_app')}` } });
      const connected = () => new Promise<void>((resolve, reject) => socket.once('connect', () => resolve()).once('connect_error', reject));
      try {
        await step('the first connection', connected());
        const gone = new Promise((resolve) => socket.once('disconnect', resolve));
        a.instance.realtime.io.sockets.sockets.get(socket.id!)!.conn.close(); // a network blip
        await step('the disconnect', gone);
        const missed = new Promise((resolve) => socket.once('missed', resolve));
        b.instance.realtime.io.to(`user:${id}`).emit('missed', { n: 1 });
        socket.connect();
        await step('the reconnection', connected());
        expect(socket.recovered).toBe(true);
        expect(await step('the missed event', missed)).toEqual({ n: 1 });
      } finally {
        socket.close();
      }
    });

    it('the login rate limit counts across instances: 5 wrong passwords, then 429 on either', async () => {
      const { email } = await a.createUser({ password: PASSWORD });
      for (let i = 0; i < 5; i++) {
        const t = i % 2 ? b : a;
        expect((await t.client().login(email, 'wrong password')).status).toBe(401);
      }
      expect((await b.client().login(email, PASSWORD)).status).toBe(429);
      expect((await a.client().login(email, PASSWORD)).status).toBe(429);
    });

    it('an API key: its record and its per-key count in one script (two keys of one slot), counted across instances: 10, then 429 on either', async () => {
      const { email } = await a.createUser({ password: PASSWORD });
      const c = await login(a, email);
      const res = await c.fetch('/auth/api-keys', { method: 'POST', json: { name: 'cluster', scopes: [] } });
      expect(res.status, await res.clone().text()).toBe(201);
      const { key } = (await res.json()) as { key: string };
      const left = 60_000 - (Date.now() % 60_000); // the limit counts in minutes of the clock: all in one
      if (left < 3000) await new Promise((r) => setTimeout(r, left + 50));
      const answers = await Promise.all(Array.from({ length: 14 }, (_, i) => (i % 2 ? a : b).fetch('/auth/session', { headers: { authorization: `Bearer ${key}` } })));
      const statuses = answers.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      expect(statuses.filter((s) => s === 429)).toHaveLength(4);
    });

    it('the cache list (admin) pages through the keys of every master, with their TTLs', async () => {
      const { email } = await a.createUser({ password: PASSWORD, admin: true });
      const adminClient = await login(a, email);
      const store = a.instance.stores.forRole('sessions');
      // 30 keys spread over the slots (and so over every master of a cluster).
      const keys = Array.from({ length: 30 }, (_, i) => `${keyPrefix}listed:${i}`);
      for (const key of keys) await store.set(key, 'v', { ttl: 600 });
      const seen: string[] = [];
      for (let offset = 0; ; offset += 25) {
        const res = await adminClient.fetch(`/svc__cache/cacheEntries?${new URLSearchParams({ pattern: `${keyPrefix}listed:*`, offset: String(offset), limit: '25' })}`);
        expect(res.status).toBe(200);
        const page = (await res.json()) as { items: { key: string; ttl: number; type: string }[]; hasMore: boolean };
        for (const item of page.items) expect(item).toMatchObject({ type: 'string', ttl: expect.any(Number) });
        seen.push(...page.items.map((i) => i.key));
        if (!page.hasMore) break;
      }
      expect(seen.sort()).toEqual([...keys].sort());
    });

    it('the master holding a session dies after replicating it: a replica takes over and the session still works', async () => {
      const { email } = await a.createUser({ password: PASSWORD });
      const c = await login(a, email);
      const key = `${keyPrefix}session:${sha256(c.cookies.get('sid_app')!)}`;
      const master = await topology.masterFor(key);
      // WAIT covers this connection's writes; replication is ordered, so one write to the same slot
      // acknowledged by a replica means the session record before it is there too.
      const probe = new Redis({ port: master, host: '127.0.0.1' });
      await probe.set(`{${key}}:replicated`, '1');
      expect(Number(await probe.call('WAIT', '1', '5000'))).toBeGreaterThanOrEqual(1);
      probe.disconnect();

      await kill(master);
      // The failover first: with the local session cache (Sentinel) a cached session may answer 200 while
      // the old master is still down and not yet replaced (CI on ccfd472: 200 on both, master unchanged).
      await until('a replica has taken over', async () => (await topology.masterFor(key).catch(() => master)) !== master, 60_000);
      // During the failover 503 is allowed; afterwards the session answers again, on both instances.
      // Each instance finds the new master on its own (its Sentinel client), one maybe a moment later:
      // both are waited for (asserting one right after the other answered 200 failed once in CI: 503).
      await until('the session answers 200 after the failover, on both instances', async () => (await replay(b, c)).status === 200 && (await replay(a, c)).status === 200, 60_000);
      expect((await b.fetch('/health')).status).toBe(200);
      if (topology.tracks) {
        // The local cache follows the new master: tracking is set up there again, and revocations reach it.
        const now = await topology.masterFor(key);
        await until('both instances track session keys on the new master', async () => (await trackingClients(now)) === 2, 30_000);
        expect((await c.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
        await until('the logout is refused on both instances', async () => (await replay(a, c)).status === 401 && (await replay(b, c)).status === 401, 1_000);
      }
    }, 90_000);
  });
}

scaleOut('Redis Cluster (3 masters + 3 replicas)', async () => {
  const cluster: ClusterTopology = await startCluster();
  return { url: cluster.url, masterFor: (key) => cluster.masterOf(key), tracks: false };
});

scaleOut('Redis with Sentinel (primary + replica + 3 Sentinels)', async () => {
  const sentinel: SentinelTopology = await startSentinel();
  return { url: sentinel.url, masterFor: () => sentinel.master(), tracks: true };
});
