// The bare Hono app both bare stacks serve (hono-bare.ts on Node, hono-bare-web.ts on Bun and Deno): no
// cookie, no store, a static JSON object of the same shape as the session answers of the other stacks.
import { Hono } from 'hono';
import { benchUser } from './common.ts';

export function bareApp(): Hono {
  const body = { ...benchUser(), createdAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 86_400_000).toISOString() };
  const app = new Hono();
  app.get('/health', (c) => c.json({ status: 'ok' }));
  app.get('/session', (c) => c.json(body));
  return app;
}
