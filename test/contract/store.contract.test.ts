import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { UnavailableError } from '../../src/http/errors.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { RedisStore } from '../../src/store/redis.ts';
import { sleep, storeContract, until } from '../support/store-contract.ts';

const redisUrl = inject('redisUrl');

storeContract('embedded MemoryStore', async () => new MemoryStore());

describe.skipIf(!redisUrl)('Redis', () => {
  storeContract('Redis (ioredis)', async () => {
    const store = new RedisStore({ url: redisUrl, name: 'cache' });
    await store.connect(redisUrl);
    return store;
  });

  it('an unreachable Redis fails fast at connect with a clear message and hides the password', async () => {
    const url = 'redis://:hunter2@127.0.0.1:1/';
    const store = new RedisStore({ url, name: 'cache' });
    const started = Date.now();
    const err = (await store.connect(url).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/cannot reach store "cache" at redis:\/\/:\*\*\*@127\.0\.0\.1:1\/ \(connect timeout 2 s, start-up deadline 10 s\): .*ECONNREFUSED/);
    expect(err.message).not.toContain('hunter2');
    expect(Date.now() - started).toBeLessThan(3000); // refused at once (quiet: ~50 ms)
  });

  it('messages cross processes sharing one Redis (two stores), and a subscriber that reconnects is told to catch up', async () => {
    const [one, two] = [new RedisStore({ url: redisUrl, name: 'cache' }), new RedisStore({ url: redisUrl, name: 'cache' })];
    await Promise.all([one.connect(redisUrl), two.connect(redisUrl)]);
    const channel = `svctest:${randomUUID()}:chan`;
    const got: string[] = [];
    let resumed = 0;
    await two.subscribe(channel, (m) => got.push(m), () => resumed++);
    await one.publish(channel, 'hello');
    await until(() => got.length === 1);
    // Drop the subscriber's socket (only ours: other suites share this Redis): ioredis reconnects and re-subscribes.
    const sub = await (two as unknown as { subscriber: Promise<import('ioredis').Redis> }).subscriber;
    sub.stream.destroy();
    await until(() => resumed > 0, 10_000);
    // Resubscribed: a new message arrives (publish until it does: the SUBSCRIBE may trail 'ready').
    const deadline = Date.now() + 10_000;
    while (got.length < 2 && Date.now() < deadline) {
      await one.publish(channel, 'again');
      await sleep(50);
    }
    expect(got[1]).toBe('again');
    await Promise.all([one.close(), two.close()]);
  });

  it('getAndIncrWindow works on a server that has not seen its script (SCRIPT FLUSH, a restarted Redis)', async () => {
    const store = new RedisStore({ url: redisUrl, name: 'cache' });
    await store.connect(redisUrl);
    const tag = `{svctest:${randomUUID()}}`;
    await store.set(`${tag}:rec`, 'a record with spaces', { ttl: 100 });
    await (store.client as import('ioredis').Redis).script('FLUSH');
    expect(await store.getAndIncrWindow(`${tag}:rec`, `${tag}:count`, 100)).toEqual(['a record with spaces', 1]);
    await (store.client as import('ioredis').Redis).script('FLUSH');
    expect(await store.getAndIncrWindow(`${tag}:none`, `${tag}:count`, 100)).toEqual([null, 0]);
    expect(await store.getAndIncrWindow(`${tag}:rec`, `${tag}:count`, 100)).toEqual(['a record with spaces', 2]);
    await store.close();
  });

  it('commands issued in one turn of the event loop go to Redis in one write, in order', async () => {
    const store = new RedisStore({ url: redisUrl, name: 'cache' });
    await store.connect(redisUrl);
    const key = `svctest:${randomUUID()}:batch`;
    // Count what the connection hands to the system: one write (or writev) per batch.
    const stream = (store.client as import('ioredis').Redis).stream as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
    let writes = 0;
    for (const method of ['_write', '_writev'] as const) {
      const original = stream[method].bind(stream);
      stream[method] = (...args: unknown[]) => {
        writes++;
        original(...args);
      };
    }
    const sets = Array.from({ length: 50 }, (_, i) => store.set(`${key}:${i}`, String(i), { ttl: 60 }));
    const reads = Array.from({ length: 50 }, (_, i) => store.getEx(`${key}:${i}`, 60));
    await Promise.all(sets);
    expect(await Promise.all(reads)).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
    expect(writes).toBe(1);
    // The next turn's commands go in their own write.
    expect(await store.get(`${key}:7`)).toBe('7');
    expect(writes).toBe(2);
    for (let i = 0; i < 50; i++) await store.del(`${key}:${i}`);
    await store.close();
  });

  it('a command on a store that went away fails with UnavailableError within 2 s', async () => {
    const store = new RedisStore({ url: redisUrl, name: 'cache' });
    await store.connect(redisUrl);
    store.client.disconnect(true); // drop the connection; ioredis starts reconnecting
    const started = Date.now();
    const err = await store.get('svctest:x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(Date.now() - started).toBeLessThan(2000); // no offline queue: at once (quiet: ~1 ms)
    await store.close();
  });
});
