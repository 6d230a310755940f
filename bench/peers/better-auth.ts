// better-auth on Hono (@hono/node-server) with Redis (ioredis) as its `secondaryStorage`: sessions
// live in Redis only; users and accounts in better-auth's built-in memory adapter. Measured endpoint:
// `GET /api/auth/get-session` with the signed session cookie from sign-up / sign-in.
//
// Sliding expiry in better-auth is `session.updateAge`: a session is rewritten (new expiry, new
// cookie) once it is older than updateAge. BA_UPDATE_AGE (seconds) sets it: unset = better-auth's
// default (1 day: within a bench run, a plain read); 0 = slide on every request like the others.
import { serve } from '@hono/node-server';
import { betterAuth } from 'better-auth';
import { memoryAdapter } from 'better-auth/adapters/memory';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import { HOST, PORT, REDIS_URL, SECRET, TTL } from './common.ts';

const redis = new Redis(REDIS_URL, { lazyConnect: true });
await redis.connect();

const updateAge = process.env.BA_UPDATE_AGE === undefined || process.env.BA_UPDATE_AGE === '' ? undefined : Number(process.env.BA_UPDATE_AGE);

export const auth = betterAuth({
  baseURL: `http://${HOST}:${PORT}`,
  secret: SECRET,
  database: memoryAdapter({ user: [], session: [], account: [], verification: [] }),
  secondaryStorage: {
    get: (key) => redis.get(key),
    set: async (key, value, ttl) => {
      if (ttl) await redis.set(key, value, 'EX', ttl);
      else await redis.set(key, value);
    },
    delete: async (key) => {
      await redis.del(key);
    },
    getAndDelete: (key) => redis.getdel(key),
    increment: async (key, ttl) => {
      const results = await redis.multi().incr(key).call('EXPIRE', key, ttl, 'NX').exec();
      return Number(results?.[0]?.[1] ?? 0);
    },
  },
  emailAndPassword: { enabled: true },
  session: { expiresIn: TTL, ...(updateAge !== undefined ? { updateAge } : {}) },
  // Off for a like-for-like read path (svc rate-limits logins only); no telemetry, no network.
  rateLimit: { enabled: false },
  telemetry: { enabled: false },
});

const app = new Hono();
app.get('/health', (c) => c.json({ status: 'ok' }));
app.on(['GET', 'POST'], '/api/auth/*', (c) => auth.handler(c.req.raw));

serve({ fetch: app.fetch, port: PORT, hostname: HOST });
