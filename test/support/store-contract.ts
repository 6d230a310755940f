// The Store contract: ONE suite for the Store interface, run against the embedded store, a real Redis
// (test/contract/store.contract.test.ts), a Redis Cluster and Sentinel (test/cluster/).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.ts';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits for a condition, generously (a busy machine delivers late, not never). */
export async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}
/**
 * ONE suite for the Store interface, run against the embedded store and a real Redis. Each run uses
 * its own key prefix so it can share a Redis with other suites.
 */
export function storeContract(name: string, open: () => Promise<Store>) {
  describe(`Store contract: ${name}`, () => {
    let store: Store;
    const p = `svctest:${randomUUID()}:`;
    let ready: Promise<Store> = new Promise(() => {});
    // Opened when the suite runs, not when it is collected: a suite may start its server in a beforeAll.
    beforeAll(() => {
      ready = open().then((s) => (store = s));
      return ready.then(() => undefined);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('get/set round-trips strings; missing keys are null', async () => {
      await ready;
      expect(await store.get(`${p}missing`)).toBeNull();
      expect(await store.set(`${p}a`, 'value')).toBe(true);
      expect(await store.get(`${p}a`)).toBe('value');
      expect(await store.ttl(`${p}a`)).toBe(-1);
      await store.del(`${p}a`); // leave nothing without a TTL behind in a shared Redis
      expect(await store.ttl(`${p}missing`)).toBe(-2);
    });

    it('set NX writes only when the key is missing', async () => {
      await ready;
      expect(await store.set(`${p}nx`, 'first', { nx: true, ttl: 60 })).toBe(true);
      expect(await store.set(`${p}nx`, 'second', { nx: true, ttl: 60 })).toBe(false);
      expect(await store.get(`${p}nx`)).toBe('first');
    });

    it('set XX writes only an existing key; keepTtl keeps its expiry', async () => {
      await ready;
      expect(await store.set(`${p}xx`, 'v', { xx: true, keepTtl: true })).toBe(false);
      expect(await store.get(`${p}xx`)).toBeNull(); // a missing key is not resurrected
      await store.set(`${p}xx`, 'v1', { ttl: 100 });
      expect(await store.set(`${p}xx`, 'v2', { xx: true, keepTtl: true })).toBe(true);
      expect(await store.get(`${p}xx`)).toBe('v2');
      expect(await store.ttl(`${p}xx`)).toBeGreaterThan(98);
      await store.set(`${p}xx`, 'v3');
      expect(await store.ttl(`${p}xx`)).toBe(-1); // a plain set clears the TTL, as in Redis
      await store.del(`${p}xx`); // leave nothing without a TTL behind in a shared Redis
    });

    it('a key with a TTL disappears once it expires', async () => {
      await ready;
      await store.set(`${p}short`, 'x', { ttl: 1 });
      const ttl = await store.ttl(`${p}short`);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1);
      await sleep(1200);
      expect(await store.get(`${p}short`)).toBeNull();
      expect(await store.ttl(`${p}short`)).toBe(-2);
    });

    it('getEx reads and resets the TTL in one call (sliding expiry)', async () => {
      await ready;
      await store.set(`${p}slide`, 'v', { ttl: 2 });
      await sleep(1100);
      expect(await store.getEx(`${p}slide`, 2)).toBe('v');
      await sleep(1100); // 2.2 s after the write: alive only because getEx slid it
      expect(await store.get(`${p}slide`)).toBe('v');
      expect(await store.getEx(`${p}gone`, 10)).toBeNull();
      expect(await store.ttl(`${p}gone`)).toBe(-2);
    });

    it('getDel hands the value to exactly one of many concurrent callers', async () => {
      await ready;
      await store.set(`${p}once`, 'state', { ttl: 60 });
      const results = await Promise.all(Array.from({ length: 10 }, () => store.getDel(`${p}once`)));
      expect(results.filter((r) => r === 'state')).toHaveLength(1);
      expect(await store.get(`${p}once`)).toBeNull();
    });

    it('del and expire report whether the key existed', async () => {
      await ready;
      await store.set(`${p}d`, '1');
      expect(await store.expire(`${p}d`, 100)).toBe(true);
      expect(await store.ttl(`${p}d`)).toBeGreaterThan(98);
      expect(await store.del(`${p}d`)).toBe(true);
      expect(await store.del(`${p}d`)).toBe(false);
      expect(await store.expire(`${p}d`, 100)).toBe(false);
    });

    it('incr counts in a window that starts with the first increment and does not slide', async () => {
      await ready;
      expect(await store.incr(`${p}n`, 1)).toBe(1);
      expect(await store.incr(`${p}n`, 100)).toBe(2); // a later ttl does not extend the window
      expect(await store.ttl(`${p}n`)).toBeLessThanOrEqual(1);
      await sleep(1200);
      expect(await store.incr(`${p}n`, 1)).toBe(1);
    });

    it('delIfValue deletes a key only while it holds the value (a lock let go by its owner only)', async () => {
      await ready;
      expect(await store.delIfValue(`${p}lock`, 'mine')).toBe(false);
      await store.set(`${p}lock`, 'theirs', { ttl: 100 });
      expect(await store.delIfValue(`${p}lock`, 'mine')).toBe(false);
      expect(await store.get(`${p}lock`)).toBe('theirs');
      expect(await store.delIfValue(`${p}lock`, 'theirs')).toBe(true);
      expect(await store.get(`${p}lock`)).toBeNull();
    });

    it('incrWindow counts; a new counter expires after its ttl', async () => {
      await ready;
      expect(await store.incrWindow(`${p}w:1`, 1)).toBe(1);
      expect(await store.incrWindow(`${p}w:1`, 100)).toBe(2);
      for (let i = 0; i < 50 && (await store.ttl(`${p}w:1`)) < 0; i++) await sleep(10); // Redis: its EXPIRE follows the first INCR
      expect(await store.ttl(`${p}w:1`)).toBeLessThanOrEqual(1);
      await sleep(1200);
      expect(await store.get(`${p}w:1`)).toBeNull();
    });

    it('getAndIncrWindow reads a key and counts in another of its hash slot, in one step; a missing key counts nothing', async () => {
      await ready;
      const record = `${p}rec:{${p}tag}`;
      const counter = `${p}count:{${p}tag}:1`;
      expect(await store.getAndIncrWindow(record, counter, 100)).toEqual([null, 0]);
      expect(await store.get(counter)).toBeNull(); // no counter made for a key that is not there
      await store.set(record, 'the record', { ttl: 100 });
      expect(await store.getAndIncrWindow(record, counter, 100)).toEqual(['the record', 1]);
      expect(await store.getAndIncrWindow(record, counter, 100)).toEqual(['the record', 2]);
      expect(await store.ttl(counter)).toBeGreaterThan(98);
      expect(await store.ttl(record)).toBeGreaterThan(98); // the read leaves the record as it was
      // Parallel callers each get their own count.
      const counts = await Promise.all(Array.from({ length: 20 }, () => store.getAndIncrWindow(record, counter, 100)));
      expect(counts.map(([, n]) => n).sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 3));
      expect(counts.every(([v]) => v === 'the record')).toBe(true);
    });

    it('decr takes back an increment, keeps the TTL, and never creates a key', async () => {
      await ready;
      expect(await store.decr(`${p}absent`)).toBe(0);
      expect(await store.get(`${p}absent`)).toBeNull();
      await store.incr(`${p}c`, 100);
      await store.incr(`${p}c`, 100);
      expect(await store.decr(`${p}c`)).toBe(1);
      expect(await store.ttl(`${p}c`)).toBeGreaterThan(98);
      // Back at 0 it is gone in the same step (a DEL sent after could take another instance's increment).
      expect(await store.decr(`${p}c`)).toBe(0);
      expect(await store.get(`${p}c`)).toBeNull();
    });

    it('sets: add, remove, list; an emptied set is gone; the TTL applies to the set', async () => {
      await ready;
      await store.sAdd(`${p}s`, ['a', 'b', 'c']);
      await store.sAdd(`${p}s`, ['a']);
      expect((await store.sMembers(`${p}s`)).sort()).toEqual(['a', 'b', 'c']);
      await store.sRem(`${p}s`, ['a', 'b', 'c']);
      expect(await store.sMembers(`${p}s`)).toEqual([]);
      expect(await store.ttl(`${p}s`)).toBe(-2);
      await store.sAdd(`${p}t`, ['x'], 1);
      await sleep(1200);
      expect(await store.sMembers(`${p}t`)).toEqual([]);
    });

    it('publish reaches every subscriber of the channel, and nobody after unsubscribe', async () => {
      await ready;
      const got: string[][] = [[], [], []];
      const [a, b, other] = await Promise.all([
        store.subscribe(`${p}chan`, (m) => got[0]!.push(m)),
        store.subscribe(`${p}chan`, (m) => got[1]!.push(m)),
        store.subscribe(`${p}other`, (m) => got[2]!.push(m)),
      ]);
      await store.publish(`${p}chan`, 'one');
      await store.publish(`${p}nobody-listens`, 'lost'); // not an error
      await until(() => got[0]!.length === 1 && got[1]!.length === 1);
      await a.unsubscribe();
      await store.publish(`${p}chan`, 'two');
      await until(() => got[1]!.length === 2);
      await sleep(50);
      expect(got).toEqual([['one'], ['one', 'two'], []]);
      await b.unsubscribe();
      await other.unsubscribe();
    });

    it('ping answers', async () => {
      await ready;
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
}

