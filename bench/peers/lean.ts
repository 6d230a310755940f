// The lean reference: what a minimal correct session check costs on the same stack as svc (Hono,
// @hono/node-server, ioredis). The cookie holds 32 random bytes (base64url); the store key is their
// SHA-256, as in svc; ONE `GETEX key EX ttl` per request reads the record and slides its TTL.
// With LEAN_PIPELINING=1 (the `lean-pipelined` stack) ioredis runs with `enableAutoPipelining: true`: the
// one option a user of this route would turn on, so the practical limit of "one GETEX a request".
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { Redis } from 'ioredis';
import { createHash, randomBytes } from 'node:crypto';
import { benchUser, HOST, PORT, REDIS_URL, TTL } from './common.ts';

const COOKIE = 'sid';
const ID = /^[A-Za-z0-9_-]{43}$/;
const redis = new Redis(REDIS_URL, { lazyConnect: true, enableAutoPipelining: process.env.LEAN_PIPELINING === '1' });
await redis.connect();

const key = (id: string) => `lean:session:${createHash('sha256').update(id).digest('hex')}`;

const app = new Hono();
app.get('/health', (c) => c.json({ status: 'ok' }));

// Not measured: creates a session for the bench (no password check).
app.post('/login', async (c) => {
  const id = randomBytes(32).toString('base64url');
  const now = Date.now();
  const record = { ...benchUser(), createdAt: now, expiresAt: now + TTL * 1000 };
  await redis.set(key(id), JSON.stringify(record), 'EX', TTL);
  setCookie(c, COOKIE, id, { httpOnly: true, path: '/', sameSite: 'Lax', maxAge: TTL });
  return c.json({ ok: true });
});

// Measured.
app.get('/session', async (c) => {
  const id = getCookie(c, COOKIE);
  if (!id || !ID.test(id)) return c.json({ error: 'unauthenticated' }, 401);
  const raw = await redis.getex(key(id), 'EX', TTL);
  if (raw === null) return c.json({ error: 'unauthenticated' }, 401);
  const record = JSON.parse(raw) as { createdAt: number; expiresAt: number };
  record.expiresAt = Date.now() + TTL * 1000;
  return c.json(record);
});

serve({ fetch: app.fetch, port: PORT, hostname: HOST });
