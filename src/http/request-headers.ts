import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';
import type { RuntimeBindings } from './env.ts';

/** Node's request, when @hono/node-server serves this one (`c.env.incoming`). */
export const nodeRequest = (c: Context) => (c.env as Partial<HttpBindings> | undefined)?.incoming;

/**
 * What `GET /auth/session`'s lane (routes/auth/session.ts) keys a lookup it made by, for the app to find:
 * Node's request, or the Web-standard door's `Request` (src/server-bun.ts, src/server-deno.ts).
 */
export const laneKey = (c: Context): object | undefined => nodeRequest(c) ?? ((c.env as Partial<RuntimeBindings> | undefined)?.webDoor ? c.req.raw : undefined);

/**
 * A request header by its lower-case name, as `c.req.header(name)` reads it. Served by
 * @hono/node-server (`c.env.incoming`), the header is read from the object Node parsed the head into
 * (duplicates joined or dropped by Node's rules, which is where `c.req.header` looks first too): one
 * property read, where `c.req.header` validates and lower-cases the name and tests the value with
 * two regular expressions. The hooks read five headers on every request (2% of `GET /auth/session`'s
 * CPU in a profile). Elsewhere (an in-process `app.request`, another runtime) it is `c.req.header`.
 */
export function requestHeader(c: Context, lowerName: string): string | undefined {
  const incoming = nodeRequest(c);
  if (!incoming) return c.req.header(lowerName);
  const value = incoming.headers[lowerName];
  return typeof value === 'string' ? value : undefined;
}
