import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { redisServerAvailable, startPrivateRedis } from './private-redis.ts';
import { freePort } from './spawn.ts';

/** The Redis the suites use, and how to let go of it at the end of the run. */
export interface TestRedis {
  url: string;
  /** Where it came from, for the run's log. */
  how: string;
  /** Stops the Redis the run started itself; leaves one it found alone. */
  stop(): Promise<void>;
}

/**
 * Why the Redis at `url` cannot serve the suites (no answer, not Redis, a password, read-only, older
 * than 7), or null when it can. One write of a key of our own, with a TTL, tells a read-only replica.
 */
export async function unusable(url: string): Promise<string | null> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 1000, commandTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  // ioredis rejects with "Connection is closed."; the error event says why (ECONNREFUSED, NOAUTH...).
  let cause: Error | undefined;
  client.on('error', (err: Error) => (cause ??= err));
  const check = async () => {
    await client.connect();
    const version = /redis_version:(\d+)/.exec(await client.info('server'))?.[1];
    if (!version || Number(version) < 7) return `Redis ${version ?? '?'} is older than 7 (GETEX, EXPIRE NX)`;
    await client.set(`svctest:probe:${randomUUID()}`, '1', 'EX', 10);
    return null;
  };
  try {
    // A server that accepts the connection and never answers is not waited for.
    return await Promise.race([check(), new Promise<string>((r) => setTimeout(() => r('no answer within 3 s'), 3000).unref())]);
  } catch (err) {
    return (cause ?? (err as Error)).message;
  } finally {
    client.disconnect();
  }
}

/**
 * A real Redis for the suites:
 * - `REDIS_TEST_URL` when set, as is;
 * - else the Redis at 127.0.0.1:`port` (6379) when it is one the suites can use: they write only keys
 *   under prefixes of their own (most with a TTL) and never flush a Redis they did not start;
 * - else (nothing there, something that is not Redis, a Redis with a password, a read-only replica...)
 *   a `redis-server` of the run's own on a free port, never on 6379, so no other run finds it there and
 *   loses it when this run stops it at its end.
 * Returns null (with the reason on stderr) when none can be had.
 */
export async function ensureRedis(port = 6379): Promise<TestRedis | null> {
  const keep = async () => {};
  if (process.env.REDIS_TEST_URL) return { url: process.env.REDIS_TEST_URL, how: 'REDIS_TEST_URL', stop: keep };
  const shared = `redis://127.0.0.1:${port}`;
  const why = await unusable(shared);
  if (!why) return { url: shared, how: `the Redis already at 127.0.0.1:${port}`, stop: keep };
  if (!redisServerAvailable) {
    process.stderr.write(`no usable Redis at 127.0.0.1:${port} (${why}) and redis-server is not installed: set REDIS_TEST_URL\n`);
    return null;
  }
  try {
    const own = await startPrivateRedis(await freePort());
    return { url: own.url, how: `a redis-server of this run's own (127.0.0.1:${port}: ${why})`, stop: () => own.kill('SIGTERM') };
  } catch (err) {
    process.stderr.write(`cannot start redis-server: ${(err as Error).message}\n`);
    return null;
  }
}

/**
 * Deletes every key under `prefix` (SCAN, then DEL): for suites that run svc as a process of its own
 * under a key prefix of theirs (`svctest:<id>:`, the deployment's `deploy-<run>:`), which the test app's
 * cleanup (app.ts) does not reach. Some of svc's keys have no TTL (the webhook queue's stream), and a
 * suite run must leave nothing that stays.
 */
export async function dropPrefix(url: string, prefix: string): Promise<void> {
  // A run's own prefix (it holds a random id of 8 or more hex digits), never a shared one such as svc's
  // default `auth:` on a Redis that others may use.
  if (!/(?:^|[:-])[0-9a-f]{8,}:/.test(prefix)) throw new Error(`dropPrefix: "${prefix}" is not a test run's own key prefix`);
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}
