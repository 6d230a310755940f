import type { Context } from 'hono';
import { deleteCookie, setCookie } from 'hono/cookie';
import { serialize, type CookieOptions } from 'hono/utils/cookie';
import type { Config } from '../config/load.ts';
import { dropPresetHeader } from '../http/response-headers.ts';

/**
 * The session cookie (CONTRACT section 3): its name and attributes from `auth.cookie`, set at a login,
 * cleared at a logout, and renewed by the session hook for sliding sessions (the hot path: its
 * attributes are serialized once per Max-Age, not per request).
 */
export class SessionCookie {
  /** `auth.cookie.name`, with `__Host-` when `auth.cookie.hostPrefix` is on. */
  readonly name: string;
  private refreshAttributes: { maxAge: number; attributes: string } | undefined;

  constructor(private readonly config: Config) {
    this.name = config.auth.cookie.hostPrefix ? `__Host-${config.auth.cookie.name}` : config.auth.cookie.name;
  }

  /** Sets the cookie; Max-Age defaults to the session TTL. */
  set(c: Context, id: string, maxAge = this.config.auth.session.ttl): void {
    this.dropRefreshed(c);
    setCookie(c, this.name, id, this.options(maxAge));
  }

  /** Clears the cookie, with the attributes it was set with. */
  clear(c: Context): void {
    this.dropRefreshed(c);
    deleteCookie(c, this.name, this.options(0));
  }

  /**
   * The `Set-Cookie` value that renews the cookie with `maxAge`. Its attributes depend on Max-Age alone,
   * nearly always the TTL: serialized once per value (Hono's `serialize` per request was 2% of the
   * default path's CPU), the id (43 URL-safe characters, which `serialize` leaves as they are) in front.
   */
  refreshed(id: string, maxAge: number): string {
    if (this.refreshAttributes?.maxAge !== maxAge) {
      const attributes = serialize(this.name, '', this.options(maxAge)).slice(this.name.length + 1);
      this.refreshAttributes = { maxAge, attributes };
    }
    return `${this.name}=${id}${this.refreshAttributes.attributes}`;
  }

  private options(maxAge: number): CookieOptions {
    const { secure, sameSite, domain, partitioned } = this.config.auth.cookie;
    return {
      httpOnly: true,
      path: '/',
      secure,
      sameSite: sameSite === 'strict' ? 'Strict' : sameSite === 'lax' ? 'Lax' : 'None',
      maxAge,
      ...(domain ? { domain } : {}),
      ...(partitioned ? { partitioned } : {}),
    };
  }

  /**
   * A handler that sets or clears the cookie replaces the refresh the session hook wrote for this
   * request, so the response carries one session Set-Cookie. Rare path (login, logout).
   */
  private dropRefreshed(c: Context): void {
    if (!c.get('cookieRefreshed')) return;
    c.set('cookieRefreshed', false);
    if (dropPresetHeader(c, 'Set-Cookie')) return;
    const headers = c.res.headers;
    const others = headers.getSetCookie().filter((line) => !line.startsWith(`${this.name}=`));
    headers.delete('set-cookie');
    for (const line of others) headers.append('set-cookie', line);
  }
}
