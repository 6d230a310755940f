import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';

/**
 * The caller's address: the socket's, or with `server.trustProxy: N` the address N hops back in
 * `X-Forwarded-For` (what the outermost trusted proxy saw). Never trust the header without a proxy.
 */
export function clientIp(c: Context, trustProxy: number): string {
  if (trustProxy > 0) {
    const hops = (c.req.header('x-forwarded-for') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    const ip = hops[hops.length - trustProxy];
    if (ip) return ip;
  }
  try {
    return getConnInfo(c).remote.address ?? 'unknown';
  } catch {
    return 'unknown'; // not served by @hono/node-server (in-process tests)
  }
}
