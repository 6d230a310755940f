// Express 5 + express-session + connect-redis (node-redis client), rolling sessions: each request
// reads the session (GET), checks the cookie signature, and slides the TTL (connect-redis `touch`:
// EXPIRE) while re-sending the cookie. Defaults otherwise (as an Express user would deploy it).
import { RedisStore } from 'connect-redis';
import express from 'express';
import session from 'express-session';
import { createClient } from 'redis';
import { benchUser, HOST, PORT, REDIS_URL, SECRET, TTL } from './common.ts';

declare module 'express-session' {
  interface SessionData {
    user: ReturnType<typeof benchUser>;
  }
}

const client = createClient({ url: REDIS_URL });
client.on('error', (err: Error) => process.stderr.write(`redis: ${err.message}\n`));
await client.connect();

const app = express();
app.get('/health', (_req, res) => {
  res.json({ status: 'ok' });
});
app.use(
  session({
    store: new RedisStore({ client, prefix: 'sess:', ttl: TTL }),
    secret: SECRET,
    name: 'sid',
    resave: false,
    saveUninitialized: false,
    rolling: true,
    cookie: { httpOnly: true, secure: false, sameSite: 'lax', maxAge: TTL * 1000 },
  }),
);

// Not measured: creates a session for the bench.
app.post('/login', (req, res) => {
  req.session.user = benchUser();
  res.json({ ok: true });
});

// Measured.
app.get('/session', (req, res) => {
  const user = req.session.user;
  if (!user) {
    res.status(401).json({ error: 'unauthenticated' });
    return;
  }
  res.json({ ...user, expiresAt: req.session.cookie.expires });
});

app.listen(PORT, HOST);
