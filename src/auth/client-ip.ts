import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import { isIP, isIPv4, isIPv6 } from 'node:net';
import type { RuntimeBindings } from '../http/env.ts';

/**
 * The caller's address: the socket's, or with `server.trustProxy: N` the address N hops back in
 * `X-Forwarded-For` (what the outermost trusted proxy saw). Never trust the header without a proxy.
 */
export function clientIp(c: Context, trustProxy: number): string {
  if (trustProxy > 0) {
    const hops = (c.req.header('x-forwarded-for') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    const ip = hops[hops.length - trustProxy];
    if (ip) return plainAddress(ip);
  }
  const given = (c.env as RuntimeBindings | undefined)?.clientAddress;
  if (given !== undefined) return given;
  try {
    return getConnInfo(c).remote.address ?? 'unknown';
  } catch {
    return 'unknown'; // served by no door (in-process tests)
  }
}

/**
 * A forwarded hop as the bare address: some proxies write a port (`192.0.2.1:51234`, `[2001:db8::1]:443`),
 * which would otherwise make every connection of one client a counter of its own. Anything else that
 * is not an address stays as written (a limit still counts it; nothing here invents an address).
 */
function plainAddress(hop: string): string {
  if (isIP(hop)) return hop;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(hop)?.[1];
  if (bracketed !== undefined && isIPv6(bracketed)) return bracketed;
  const withPort = /^([\d.]+):\d{1,5}$/.exec(hop)?.[1];
  if (withPort !== undefined && isIPv4(withPort)) return withPort;
  return hop;
}
