import type Bowser from 'bowser';
import type { Context } from 'hono';
import { createRequire } from 'node:module';
import { clientIp } from './client-ip.ts';

/** Where a request comes from, for a person to read: `GET /auth/sessions` and audit records. */
export interface RequestOrigin {
  ip: string;
  device: string;
}

/**
 * Device labels by User-Agent, the oldest first to go when full. A parse costs about 30 µs
 * and every audit record, new session and device check asks for one, while a service sees the same few
 * hundred User-Agents again and again. Bounded: a client sending a new User-Agent each time only costs
 * the parse, as without the cache (and evicts the oldest label).
 */
const labels = new Map<string, string>();
const LABELS_KEPT = 500;

/** bowser, loaded by the first label asked for (a login, an audit record): not at start-up (0.3 MB of heap). */
let parser: typeof Bowser | undefined;
const bowser = (): typeof Bowser => (parser ??= createRequire(import.meta.url)('bowser') as typeof Bowser);

/** The label of a User-Agent (at most 512 characters): browser, major version and OS. */
export function deviceLabel(ua: string): string {
  if (!ua) return 'Unknown device';
  let device = labels.get(ua);
  if (device !== undefined) return device;
  // bowser reads the User-Agent (no home-made parsing); the label is for a person, not for logic.
  const { browser, os } = bowser().parse(ua);
  device = [browser.name && `${browser.name}${browser.version ? ` ${browser.version.split('.')[0]}` : ''}`, os.name && `on ${os.name}`].filter(Boolean).join(' ') || ua.slice(0, 60);
  if (labels.size >= LABELS_KEPT) labels.delete(labels.keys().next().value!);
  labels.set(ua, device);
  return device;
}

/** The client IP (`server.trustProxy`) and a device label read from the User-Agent. */
export function requestOrigin(c: Context, trustProxy: number): RequestOrigin {
  return { ip: clientIp(c, trustProxy), device: deviceLabel(c.req.header('user-agent')?.slice(0, 512) ?? '') };
}
