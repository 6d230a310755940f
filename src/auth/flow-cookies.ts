import type { Context } from 'hono';
import { deleteCookie, setCookie } from 'hono/cookie';
import type { Config } from '../config/load.ts';
import { readCookie } from '../http/cookie.ts';

/**
 * The short-lived HttpOnly cookies of half-finished flows (`svc_mfa`, `svc_passkey`,
 * `svc_oauth_state`, `svc_pending_link`, the return path and its CSRF token). With
 * `auth.cookie.hostPrefix` each is named `__Host-<name>` like the session cookie, so a sibling
 * subdomain cannot plant one in the browser (a planted `svc_mfa` or `svc_pending_link` would bind
 * the victim's browser to the attacker's flow). One place names, sets, reads and clears them.
 */
export class FlowCookies {
  constructor(private readonly config: Config) {}

  /** The cookie's name in responses and requests: `base`, or `__Host-<base>`. */
  name(base: string): string {
    return this.config.auth.cookie.hostPrefix ? `__Host-${base}` : base;
  }

  /**
   * `sameSite` is what the flow needs on a same-site deployment; with `auth.cookie.sameSite: "none"` (a
   * frontend on another site: its fetches are cross-site, docs/deployment-topologies.md) every flow cookie
   * is `None` like the session cookie, and `Partitioned` with it, or the second step and the passkey
   * login of that frontend would never get theirs back.
   */
  set(c: Context, base: string, value: string, maxAge: number, sameSite: 'Strict' | 'Lax'): void {
    const { secure, sameSite: configured, partitioned } = this.config.auth.cookie;
    const crossSite = configured === 'none';
    setCookie(c, this.name(base), value, { httpOnly: true, path: '/', secure, sameSite: crossSite ? 'None' : sameSite, maxAge, ...(crossSite && partitioned ? { partitioned } : {}) });
  }

  read(c: Context, base: string): string | undefined {
    return readCookie(c, this.name(base));
  }

  clear(c: Context, base: string): void {
    // SameSite as every cookie of svc's (a clear works with any value; attribute checks expect one).
    const { secure, sameSite, partitioned } = this.config.auth.cookie;
    const crossSite = sameSite === 'none';
    deleteCookie(c, this.name(base), { path: '/', secure, httpOnly: true, sameSite: crossSite ? 'None' : 'Lax', ...(crossSite && partitioned ? { partitioned } : {}) });
  }
}
