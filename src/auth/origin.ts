import Bowser from 'bowser';
import type { Context } from 'hono';
import { clientIp } from './client-ip.ts';

/** Where a request comes from, for a person to read: `GET /auth/sessions` and audit records. */
export interface RequestOrigin {
  ip: string;
  device: string;
}

/** The client IP (`server.trustProxy`) and a device label read from the User-Agent. */
export function requestOrigin(c: Context, trustProxy: number): RequestOrigin {
  const ua = c.req.header('user-agent')?.slice(0, 512) ?? '';
  let device = 'Unknown device';
  if (ua) {
    // bowser reads the User-Agent (no home-made parsing); the label is for a person, not for logic.
    const { browser, os } = Bowser.parse(ua);
    device = [browser.name && `${browser.name}${browser.version ? ` ${browser.version.split('.')[0]}` : ''}`, os.name && `on ${os.name}`].filter(Boolean).join(' ') || ua.slice(0, 60);
  }
  return { ip: clientIp(c, trustProxy), device };
}
