// The session lookup's GETEX on svc's own RESP connection (src/store/getex-connection.ts), against a
// real Redis: values and TTLs as Redis holds them, replies split anywhere by TCP, a password and a
// database, and outages (a frozen Redis, a killed one) that fail what is in flight and heal by themselves.

import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { UnavailableError } from '../../src/http/errors.ts';
import { GetExConnection, type GetExConnectionOptions } from '../../src/store/getex-connection.ts';
import { RedisStore } from '../../src/store/redis.ts';
import { redisServerAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis.ts';
import { freePort } from '../support/spawn.ts';

const redisUrl = inject('redisUrl');
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

function opened(options: Partial<GetExConnectionOptions> & { port: number }): GetExConnection {
  const conn = new GetExConnection({ host: '127.0.0.1', timeoutMs: 1500, ...options });
  cleanups.push(() => conn.close());
  conn.open();
  return conn;
}

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A RedisStore, connected, and its own GETEX connection (maybe still connecting). */
async function connectedStore(url: string): Promise<{ store: RedisStore; own: GetExConnection }> {
  const store = new RedisStore({ url, name: 'cache' });
  cleanups.push(() => store.close());
  await store.connect(url);
  return { store, own: (store as unknown as { getExConnection: GetExConnection }).getExConnection };
}

async function privateRedis(): Promise<PrivateRedis> {
  const redis = await startPrivateRedis(await freePort());
  cleanups.push(() => redis.kill());
  return redis;
}

describe.skipIf(!redisUrl)('GETEX on its own connection (shared Redis)', () => {
  const port = Number(new URL(redisUrl ?? 'redis://x:6379').port || 6379);
  const prefix = `svctest:${randomUUID().slice(0, 8)}:getex:`;
  const redis = new Redis(redisUrl!);
  cleanups.push(() => redis.disconnect());

  it('reads the value as Redis holds it, pushes its TTL, and answers null for a missing key', async () => {
    const conn = opened({ port });
    await until(() => conn.ready, 'ready');
    const text = `{"userId":"ü€😀","n":${'9'.repeat(10)}}`;
    const large = 'x'.repeat(300_000) + 'é';
    await redis.set(`${prefix}a`, text, 'EX', 10);
    await redis.set(`${prefix}é-key`, large, 'EX', 10);
    expect(await conn.getEx(`${prefix}a`, 600)).toBe(text);
    expect(await redis.ttl(`${prefix}a`)).toBeGreaterThan(590);
    expect(await conn.getEx(`${prefix}é-key`, 600)).toBe(large);
    expect(await conn.getEx(`${prefix}missing`, 600)).toBeNull();
    expect(await redis.exists(`${prefix}missing`)).toBe(0);
  });

  it('many reads in one turn: each gets its own value', async () => {
    const conn = opened({ port });
    await until(() => conn.ready, 'ready');
    const keys = Array.from({ length: 2000 }, (_, i) => `${prefix}many:${i}`);
    await redis.mset(...keys.flatMap((k, i) => [k, i % 7 === 0 ? '' : `value ${i}`]));
    for (const k of keys) await redis.expire(k, 30);
    const values = await Promise.all(keys.map((k) => conn.getEx(k, 60)));
    expect(values).toEqual(keys.map((_, i) => (i % 7 === 0 ? '' : `value ${i}`)));
  });

  it('keys and TTLs that change from one read to the next, in one turn: each command as asked', async () => {
    const conn = opened({ port });
    await until(() => conn.ready, 'ready');
    // The same length in characters, not in bytes: the command's key length is counted in bytes.
    const keys = [`${prefix}ax`, `${prefix}éx`, `${prefix}ax`, `${prefix}€€`, `${prefix}a`];
    for (const k of new Set(keys)) await redis.set(k, `v:${k}`, 'EX', 5);
    const ttls = [60, 600, 600, 60, 7]; // the last read of a key sets its TTL
    expect(await Promise.all(keys.map((k, i) => conn.getEx(k, ttls[i]!)))).toEqual(keys.map((k) => `v:${k}`));
    expect(await Promise.all([...new Set(keys)].map((k) => redis.ttl(k)))).toEqual([600, 600, 60, 7].map((ttl) => expect.closeTo(ttl, -1)));
  });

  it('a Redis error reply fails that read alone (a bug, not an outage)', async () => {
    const conn = opened({ port });
    await until(() => conn.ready, 'ready');
    await redis.sadd(`${prefix}set`, 'member');
    await redis.expire(`${prefix}set`, 10);
    await redis.set(`${prefix}b`, 'still read', 'EX', 10);
    const [wrong, right] = await Promise.allSettled([conn.getEx(`${prefix}set`, 60), conn.getEx(`${prefix}b`, 60)]);
    expect(wrong.status === 'rejected' && (wrong.reason as Error).message).toMatch(/^WRONGTYPE/);
    expect(right).toEqual({ status: 'fulfilled', value: 'still read' });
    expect(conn.ready).toBe(true);
  });

  it('a close lets the reads in flight have their replies, then ends the connection', async () => {
    const conn = opened({ port });
    await until(() => conn.ready, 'ready');
    await redis.set(`${prefix}e`, 'answered', 'EX', 10);
    const reads = [conn.getEx(`${prefix}e`, 60), conn.getEx(`${prefix}e`, 60)];
    conn.close();
    expect(conn.ready).toBe(false);
    expect(await Promise.all(reads)).toEqual(['answered', 'answered']);
  });

  it('RedisStore.getEx reads through it once it is ready, and through ioredis before', async () => {
    await redis.set(`${prefix}c`, 'via store', 'EX', 10);
    const { store, own } = await connectedStore(redisUrl!);
    expect(own.ready).toBe(false); // still connecting: ioredis reads
    expect(await store.getEx(`${prefix}c`, 60)).toBe('via store');
    await until(() => own.ready, 'ready');
    (store.client as Redis).disconnect(); // ioredis gone: the read is the own connection's
    expect(await store.getEx(`${prefix}c`, 60)).toBe('via store');
  });

  it('RedisStore.getEx falls back to ioredis while its own connection is down', async () => {
    await redis.set(`${prefix}d`, 'via ioredis', 'EX', 10);
    const { store, own } = await connectedStore(redisUrl!);
    await until(() => own.ready, 'ready');
    own.close();
    expect(await store.getEx(`${prefix}d`, 60)).toBe('via ioredis');
  });
});

describe('GETEX on its own connection: replies as TCP brings them', () => {
  it('parses replies that arrive a byte at a time', async () => {
    const replies = ['$5\r\nhello\r\n', '$-1\r\n', '$0\r\n\r\n', `$${Buffer.byteLength('żółw')}\r\nżółw\r\n`];
    const server = net.createServer((socket) => {
      let pending = 0;
      socket.on('data', (d: Buffer) => {
        pending += d.toString().split('GETEX').length - 1;
        const bytes = Buffer.from(replies.slice(0, pending).join(''));
        pending = 0;
        let i = 0;
        const next = () => {
          if (i >= bytes.length) return;
          socket.write(bytes.subarray(i, ++i));
          setTimeout(next, 1);
        };
        next();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => server.close());
    const conn = opened({ port: (server.address() as net.AddressInfo).port });
    await until(() => conn.ready, 'ready');
    expect(await Promise.all(['a', 'b', 'c', 'd'].map((k) => conn.getEx(k, 1)))).toEqual(['hello', null, '', 'żółw']);
  });

  it.each([
    ['an array', '*0\r\n'],
    ['a bulk length of letters', '$1x\r\nok\r\n'],
    ['no bulk length', '$\r\n'],
    ['a negative bulk length other than -1', '$-2\r\n'],
  ])('a reply it cannot have asked for (%s) fails what is in flight, and the connection is made again', async (_, wrong) => {
    let connections = 0;
    const server = net.createServer((socket) => {
      connections++;
      socket.on('data', () => socket.write(connections === 1 ? wrong : '$2\r\nok\r\n'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => server.close());
    const conn = opened({ port: (server.address() as net.AddressInfo).port });
    await until(() => conn.ready, 'ready');
    expect(await conn.getEx('a', 1).then(String, (err: Error) => err)).toEqual(new Error('the store connection was lost'));
    await until(() => conn.ready, 'ready again');
    expect(await conn.getEx('a', 1)).toBe('ok');
    expect(connections).toBe(2);
  });
});

describe.skipIf(!redisServerAvailable)('GETEX on its own connection: set-up and outages (a Redis of its own)', () => {
  it('sends AUTH and SELECT from the URL; a refused set-up leaves it off, with the reason and no password', async () => {
    const redis = await privateRedis();
    expect(await redis.command(['CONFIG', 'SET', 'requirepass', 's3cret-pw'])).toBe('+OK');
    const writer = new Redis(`redis://:s3cret-pw@127.0.0.1:${redis.port}/3`);
    cleanups.push(() => writer.disconnect());
    await writer.set('k', 'in db 3');
    const conn = opened({ port: redis.port, password: 's3cret-pw', db: 3 });
    await until(() => conn.ready, 'ready');
    expect(await conn.getEx('k', 60)).toBe('in db 3');

    const refusals: string[] = [];
    const wrong = opened({ port: redis.port, password: 'not-it', onRefused: (m) => refusals.push(m) });
    await until(() => refusals.length > 0, 'refused');
    expect(refusals[0]).toMatch(/WRONGPASS|invalid password/);
    expect(refusals[0]).not.toContain('not-it');
    expect(wrong.ready).toBe(false);
  });

  it('a Redis that stops answering: reads in flight fail after the timeout; it is used again once Redis answers', async () => {
    const redis = await privateRedis();
    const conn = opened({ port: redis.port, timeoutMs: 300 });
    await until(() => conn.ready, 'ready');
    redis.freeze();
    const started = Date.now();
    const read = conn.getEx('k', 60);
    await expect(read).rejects.toThrow();
    // The cause, not a clock: failed by the overdue check (300 ms, checked every 30 ms), not by TCP.
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(conn.ready).toBe(false);
    redis.thaw();
    await until(() => conn.ready, 'ready again');
    expect(await conn.getEx('k', 60)).toBeNull();
  });

  it('a Redis killed: reads in flight fail at once; it connects again when Redis is back on its port', async () => {
    const redis = await privateRedis();
    const conn = opened({ port: redis.port });
    await until(() => conn.ready, 'ready');
    redis.freeze();
    const read = conn.getEx('k', 60).then(String, (err: Error) => err); // settled before the kill returns
    await redis.kill();
    expect(await read).toEqual(new Error('the store connection was lost'));
    expect(conn.ready).toBe(false);
    const again = await startPrivateRedis(redis.port);
    cleanups.push(() => again.kill());
    await until(() => conn.ready, 'ready again');
    expect(await again.command(['SET', 'k', 'back'])).toBe('+OK');
    expect(await conn.getEx('k', 60)).toBe('back');
  });

  it('through RedisStore, an outage is an UnavailableError (answered 503)', async () => {
    const redis = await privateRedis();
    const { store, own } = await connectedStore(redis.url);
    await until(() => own.ready, 'ready');
    redis.freeze();
    const read = store.getEx('k', 60).then(String, (err: Error) => err);
    await redis.kill();
    expect(await read).toBeInstanceOf(UnavailableError);
  });
});
