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
    expect(err.message).toMatch(/cannot reach store "cache" at redis:\/\/:\*\*\*@127\.0\.0\.1:1/);
    expect(err.message).not.toContain('hunter2');
    expect(Date.now() - started).toBeLessThan(3000);
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

  it('a command on a store that went away fails with UnavailableError within 2 s', async () => {
    const store = new RedisStore({ url: redisUrl, name: 'cache' });
    await store.connect(redisUrl);
    store.client.disconnect(true); // drop the connection; ioredis starts reconnecting
    const started = Date.now();
    const err = await store.get('svctest:x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(Date.now() - started).toBeLessThan(2000);
    await store.close();
  });
});
