// `npm test` on a machine whose 6379 is not a Redis the suites can use (issue 37, trap 2): the run
// starts a redis-server of its own on a free port, and stops it at its end; a usable Redis found there
// is used and left alone. `ensureRedis(port)` is what the suites' global setup calls (with 6379).

import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { redisServerAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis.ts';
import { ensureRedis, unusable, type TestRedis } from '../support/redis.ts';
import { freePort } from '../support/spawn.ts';

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

/** PONG, or why not. */
const ping = async (url: string): Promise<string> => (await unusable(url)) ?? 'PONG';

/** ensureRedis with REDIS_TEST_URL unset, as on a machine without it. */
async function found(port: number): Promise<TestRedis> {
  const saved = process.env.REDIS_TEST_URL;
  delete process.env.REDIS_TEST_URL;
  try {
    const redis = await ensureRedis(port);
    expect(redis).not.toBeNull();
    cleanups.push(() => redis!.stop());
    return redis!;
  } finally {
    if (saved !== undefined) process.env.REDIS_TEST_URL = saved;
  }
}

/** A Redis of the test's own on a free port, `configure`d (e.g. a password). */
async function otherRedis(...configure: string[][]): Promise<PrivateRedis> {
  const redis = await startPrivateRedis(await freePort());
  cleanups.push(() => redis.kill());
  for (const args of configure) expect(await redis.command(args)).toBe('+OK');
  return redis;
}

/** The run's own Redis answers, is not on `taken`, and is gone once stopped. */
async function expectOwnRedis(redis: TestRedis, taken: number) {
  expect(new URL(redis.url).port).not.toBe(String(taken));
  expect(redis.how).toContain("this run's own");
  expect(await ping(redis.url)).toBe('PONG');
  await redis.stop();
  expect(await ping(redis.url)).toMatch(/ECONNREFUSED/);
}

describe.skipIf(!redisServerAvailable)('the Redis of npm test', () => {
  it('something that is not Redis on the port: a redis-server of the run\'s own on a free port, stopped at the end', async () => {
    const squatter = net.createServer((socket) => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    cleanups.push(async () => squatter.close());
    const port = (squatter.address() as net.AddressInfo).port;
    await expectOwnRedis(await found(port), port);
  });

  it("someone else's Redis with a password on the port: not touched, a redis-server of the run's own instead", async () => {
    const theirs = await otherRedis(['CONFIG', 'SET', 'requirepass', 'not-ours']);
    const redis = await found(theirs.port);
    expect(redis.how).toContain('NOAUTH');
    await expectOwnRedis(redis, theirs.port);
    expect(await theirs.command(['AUTH', 'not-ours'])).toBe('+OK'); // still there
  });

  it('a read-only replica on the port: a redis-server of the run\'s own', async () => {
    const replica = await otherRedis(['CONFIG', 'SET', 'replica-read-only', 'yes'], ['REPLICAOF', '127.0.0.1', String(await freePort())]);
    await expectOwnRedis(await found(replica.port), replica.port);
  });

  it('a usable Redis on the port: used as is, and left running at the end', async () => {
    const usable = await otherRedis();
    const redis = await found(usable.port);
    expect(redis.url).toBe(`redis://127.0.0.1:${usable.port}`);
    await redis.stop();
    expect(await ping(usable.url)).toBe('PONG');
  });

  it('REDIS_TEST_URL wins, as is', async () => {
    const saved = process.env.REDIS_TEST_URL;
    process.env.REDIS_TEST_URL = 'redis://127.0.0.1:1/5';
    try {
      expect((await ensureRedis(await freePort()))?.url).toBe('redis://127.0.0.1:1/5');
    } finally {
      if (saved === undefined) delete process.env.REDIS_TEST_URL;
      else process.env.REDIS_TEST_URL = saved;
    }
  });
});
