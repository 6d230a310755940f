// The ceiling: bare Hono on @hono/node-server, no cookie, no store (bare-app.ts).
import { serve } from '@hono/node-server';
import { bareApp } from './bare-app.ts';
import { HOST, PORT } from './common.ts';

serve({ fetch: bareApp().fetch, port: PORT, hostname: HOST });
