// bare Hono on the runtime's own Web-standard server (`--only bare-bun,bare-deno`): `Bun.serve` on Bun,
// `Deno.serve` on Deno, the ceiling of a Hono app there, to tell the runtime's HTTP path from svc's work
// on it (svc on Bun or Deno against svc on Node). The same app as bench/peers/hono-bare.ts (bare-app.ts).
// Run by the runtime itself, which reads TypeScript.
import { bareApp } from './bare-app.ts';
import { HOST, PORT } from './common.ts';

type Handler = (request: Request) => Response | Promise<Response>;
declare const Bun: { serve(options: { hostname: string; port: number; fetch: Handler }): unknown } | undefined;
declare const Deno: { serve(options: { hostname: string; port: number; onListen(): void }, handler: Handler): unknown } | undefined;

const app = bareApp();

if (typeof Bun !== 'undefined') Bun.serve({ hostname: HOST, port: PORT, fetch: app.fetch });
else if (typeof Deno !== 'undefined') Deno.serve({ hostname: HOST, port: PORT, onListen: () => {} }, app.fetch);
else throw new Error('bench/peers/hono-bare-web.ts runs on Bun or Deno');
