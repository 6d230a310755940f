// Fastify 5 + @fastify/cookie + @fastify/session with the connect-redis store (node-redis client),
// rolling sessions (the plugin's default): each request reads the session (GET), checks the cookie
// signature, and saves it again with a fresh TTL (SET ... EX) while re-sending the cookie.
import fastifyCookie from '@fastify/cookie';
import fastifySession from '@fastify/session';
import { RedisStore } from 'connect-redis';
import Fastify from 'fastify';
import { createClient } from 'redis';
import { benchUser, HOST, PORT, REDIS_URL, SECRET, TTL } from './common.ts';

declare module 'fastify' {
  interface Session {
    user?: ReturnType<typeof benchUser>;
  }
}

const client = createClient({ url: REDIS_URL });
client.on('error', (err: Error) => process.stderr.write(`redis: ${err.message}\n`));
await client.connect();

const app = Fastify({ logger: false });
app.get('/health', async () => ({ status: 'ok' }));
await app.register(fastifyCookie);
await app.register(fastifySession, {
  // connect-redis implements express-session's Store (callbacks optional), which @fastify/session accepts.
  store: new RedisStore({ client, prefix: 'sess:', ttl: TTL }) as unknown as fastifySession.SessionStore,
  secret: SECRET,
  cookieName: 'sid',
  saveUninitialized: false,
  rolling: true,
  cookie: { httpOnly: true, secure: false, sameSite: 'lax', maxAge: TTL * 1000, path: '/' },
});

// Not measured: creates a session for the bench.
app.post('/login', async (request) => {
  request.session.set('user', benchUser());
  return { ok: true };
});

// Measured.
app.get('/session', async (request, reply) => {
  const user = request.session.get('user');
  if (!user) return reply.code(401).send({ error: 'unauthenticated' });
  return { ...user, expiresAt: request.session.cookie.expires };
});

await app.listen({ port: PORT, host: HOST });
