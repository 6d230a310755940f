import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';

/** Node's response for this request, when @hono/node-server serves it (`c.env.outgoing`). */
export const nodeResponse = (c: Context) => (c.env as Partial<HttpBindings> | undefined)?.outgoing;

/**
 * Sets a header of the answer before the handler runs (request id, the refreshed session cookie).
 *
 * On Node it goes straight onto Node's response; `writeHead` merges it with the headers of the
 * handler's Response, whose own header of the same name wins. Hono's `c.header` would instead turn the
 * Response's plain header object into a `Headers` (header validation per call, and @hono/node-server's
 * slower conversion back): measured on `GET /auth/session`, about 8% of its CPU. Elsewhere (an
 * in-process `app.request`, another runtime) it goes through Hono.
 */
export function presetHeader(c: Context, name: string, value: string): void {
  const outgoing = nodeResponse(c);
  if (outgoing) outgoing.setHeader(name, value);
  else c.header(name, value, name.toLowerCase() === 'set-cookie' ? { append: true } : undefined);
}
