// The ceiling: bare Hono on @hono/node-server, no cookie, no store. A static JSON object of the same
// shape as the session answers of the other stacks.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { benchUser, HOST, PORT } from './common.ts';

const body = { ...benchUser(), createdAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 86_400_000).toISOString() };

const app = new Hono();
app.get('/health', (c) => c.json({ status: 'ok' }));
app.get('/session', (c) => c.json(body));

serve({ fetch: app.fetch, port: PORT, hostname: HOST });
