// The webhook delivery queue on a real Redis (src/webhooks/redis-queue.ts), two instances side by side as
// two svc processes would run it: every job runs once however many instances read and however often it
// was queued, a retry put off by one instance is made by the other when the first is gone, and an
// instance that closes leaves the group without losing what it had read.

import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { RedisStore } from '../../src/store/redis.ts';
import type { AttemptOutcome, DeliveryJob } from '../../src/webhooks/queue.ts';
import { RedisDeliveryQueue } from '../../src/webhooks/redis-queue.ts';

const redisUrl = inject('redisUrl');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const job = (eventId: string): DeliveryJob => ({
  webhookIds: ['wh_a', 'wh_b'],
  eventId,
  done: 0,
  event: { id: eventId, type: 'user.updated', at: new Date().toISOString(), data: { userId: 'u1' } } as unknown as DeliveryJob['event'],
});

describe.skipIf(!redisUrl)('the webhook queue on Redis, two instances', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  const prefixes: string[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    // The queue's keys go with the test (the stream and its group stay in Redis otherwise).
    const redis = new Redis(redisUrl!);
    for (const prefix of prefixes.splice(0)) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
    }
    redis.disconnect();
  });
  const newPrefix = () => {
    const prefix = `svctest:${randomUUID().slice(0, 8)}:`;
    prefixes.push(prefix);
    return prefix;
  };

  async function instance(keyPrefix: string, run: (job: DeliveryJob, attempt: number) => Promise<AttemptOutcome>) {
    const store = new RedisStore({ url: redisUrl!, name: 'cache' });
    const queue = await RedisDeliveryQueue.open({ store, keyPrefix, totalAttempts: 3, retryDelayMs: () => 300, run, logger: createLogger('silent') });
    let closed = false;
    const close = async () => {
      if (closed) return;
      closed = true;
      await queue.close();
      await store.close();
    };
    cleanups.push(close);
    return { queue, close };
  }

  it('400 jobs added from both at once, each also added twice: each runs exactly once, on either', async () => {
    const prefix = newPrefix();
    const runs = new Map<string, number>();
    const by = { one: 0, two: 0 };
    const runner = (name: 'one' | 'two') => async (j: DeliveryJob) => {
      by[name]++;
      runs.set(j.eventId, (runs.get(j.eventId) ?? 0) + 1);
      await sleep(Math.random() * 5);
      return 'delivered' as const;
    };
    const [one, two] = [await instance(prefix, runner('one')), await instance(prefix, runner('two'))];
    const ids = Array.from({ length: 400 }, (_, i) => `evt_${i}`);
    // Every id from both instances, concurrently: a job queued twice is one job.
    await Promise.all(ids.flatMap((id) => [one.queue.add(job(id), 0), two.queue.add(job(id), 0)]));
    await expect.poll(() => runs.size, { timeout: 20_000 }).toBe(400);
    await sleep(500); // room for a second run to show up
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(by.one + by.two).toBe(400);
    expect(by.one).toBeGreaterThan(0);
    expect(by.two).toBeGreaterThan(0);
    // Nothing is left in Redis but the ids remembered for a day.
    const redis = new Redis(redisUrl!);
    try {
      expect(await redis.xlen(`${prefix}{svc-webhooks}:queue:jobs`)).toBe(0);
      expect(await redis.zcard(`${prefix}{svc-webhooks}:queue:later`)).toBe(0);
      const ttl = await redis.ttl(`${prefix}{svc-webhooks}:queue:seen:evt_0`);
      expect(ttl).toBeGreaterThan(86_000);
    } finally {
      redis.disconnect();
    }
  });

  it('a retry put off by an instance that is gone is made by the other, with its attempt number', async () => {
    const prefix = newPrefix();
    const attempts: [string, number][] = [];
    const one = await instance(prefix, async (_j, attempt) => {
      attempts.push(['one', attempt]);
      return 'retry';
    });
    await one.queue.add(job('evt_retry'), 0);
    await expect.poll(() => attempts.length).toBe(1);
    await one.close(); // its timer for the retry goes with it; the retry waits in `later`
    const two = await instance(prefix, async (_j, attempt) => {
      attempts.push(['two', attempt]);
      return 'delivered';
    });
    // The other instance moves it at its first tick (at once on open), or within one tick (5 s).
    await expect.poll(() => attempts.length, { timeout: 10_000 }).toBe(2);
    expect(attempts).toEqual([
      ['one', 1],
      ['two', 2],
    ]);
    expect((await two.queue.waiting(10)).length).toBe(0);
  });

  it('waiting lists a job under way and a job put off, each with when it is due; both instances see them', async () => {
    const prefix = newPrefix();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const one = await instance(prefix, async () => {
      await held;
      return 'delivered';
    });
    const two = await instance(prefix, async () => {
      await held;
      return 'delivered';
    });
    const before = Date.now();
    await one.queue.add(job('evt_now'), 0);
    await two.queue.add(job('evt_later'), 60_000);
    for (const q of [one.queue, two.queue]) {
      const listed = await q.waiting(10);
      expect(listed.map((w) => w.job.eventId).sort()).toEqual(['evt_later', 'evt_now']);
      const later = listed.find((w) => w.job.eventId === 'evt_later')!;
      expect(later.dueAt).toBeGreaterThanOrEqual(before + 60_000);
      expect(listed.find((w) => w.job.eventId === 'evt_now')!.dueAt).toBeLessThanOrEqual(Date.now());
    }
    release();
    await expect.poll(async () => (await one.queue.waiting(10)).map((w) => w.job.eventId)).toEqual(['evt_later']);
  });

  it('an instance closed while a job is under way lets it finish, then leaves the group', async () => {
    const prefix = newPrefix();
    const redis = new Redis(redisUrl!);
    cleanups.push(async () => redis.disconnect());
    const stream = `${prefix}{svc-webhooks}:queue:jobs`;
    const consumers = async () => ((await redis.xinfo('CONSUMERS', stream, 'deliver')) as unknown[]).length;
    let finished = false;
    const one = await instance(prefix, async () => {
      await sleep(300);
      finished = true;
      return 'delivered';
    });
    await one.queue.add(job('evt_closing'), 0);
    await expect.poll(consumers).toBe(1);
    await sleep(50);
    await one.close();
    expect(finished).toBe(true);
    expect(await consumers()).toBe(0);
    expect(await redis.xlen(stream)).toBe(0);
  });
});
