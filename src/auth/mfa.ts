import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { deleteCookie, setCookie } from 'hono/cookie';
import { readCookie } from '../http/cookie.ts';
import type { Config } from '../config/load.ts';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';
import { sha256hex } from './hash.ts';

/** The HttpOnly cookie of a login waiting for its second factor (CONTRACT section 10). */
export const MFA_COOKIE = 'svc_mfa';
const MFA_TTL = 300;
/** Wrong codes that end a pending login. */
const MAX_WRONG = 5;
/** Wrong codes per user in WINDOW, across pending logins (a password thief cannot restart for more). */
const MAX_WRONG_PER_USER = 10;
const WINDOW = 15 * 60;

/** What the store keeps under `mfa-pending:<sha256hex(cookie value)>`. */
export interface PendingMfa {
  userId: string;
  /** The password hash the first step checked: a password changed meanwhile ends the login. */
  passwordHash: string | null;
  provider: string;
  /** OAuth logins: the stored post-login path, given back by `POST /auth/login/totp`. */
  returnTo?: string;
}


/**
 * Two-step logins: the first step (right password) leaves a pending record bound to the browser by a
 * random HttpOnly cookie, single use, 5 minutes; the second step (a TOTP or recovery code) consumes
 * it. Five wrong codes end it. The cookie value is a bearer secret: only its hash is a store key.
 */
export class PendingMfaLogins {
  constructor(
    private readonly store: Store,
    private readonly config: Config,
  ) {}

  private key(id: string) {
    return `${this.config.auth.store.keyPrefix}mfa-pending:${sha256hex(id)}`;
  }

  private wrongKey(id: string) {
    return `${this.config.auth.store.keyPrefix}mfa-wrong:${sha256hex(id)}`;
  }

  private userKey(userId: string) {
    return `${this.config.auth.store.keyPrefix}mfa-wrong-user:${userId}`;
  }

  /** 429 `too_many_attempts` while the user has had too many wrong codes recently. */
  async checkUser(userId: string): Promise<void> {
    const key = this.userKey(userId);
    if (Number(await this.store.get(key)) >= MAX_WRONG_PER_USER) {
      const retryAfter = Math.max(1, await this.store.ttl(key));
      throw new AppError(429, 'too_many_attempts', 'Too many wrong codes; try again later', undefined, { 'Retry-After': String(retryAfter) });
    }
  }

  async start(c: Context, pending: PendingMfa): Promise<void> {
    const id = randomBytes(32).toString('base64url');
    await this.store.set(this.key(id), JSON.stringify(pending), { ttl: MFA_TTL });
    setCookie(c, MFA_COOKIE, id, { httpOnly: true, path: '/', secure: this.config.auth.cookie.secure, sameSite: 'Strict', maxAge: MFA_TTL });
  }

  /** The pending login of this browser; 401 `mfa_expired` when there is none (missing, used, expired). */
  async current(c: Context): Promise<PendingMfa> {
    const id = readCookie(c, MFA_COOKIE);
    const raw = id ? await this.store.get(this.key(id)) : null;
    if (!raw) throw expired();
    return JSON.parse(raw) as PendingMfa;
  }

  /** A wrong code: 401 `invalid_code`; the fifth ends the pending login. */
  async wrong(c: Context, userId: string): Promise<never> {
    const id = readCookie(c, MFA_COOKIE)!;
    await this.store.incr(this.userKey(userId), WINDOW);
    if ((await this.store.incr(this.wrongKey(id), MFA_TTL)) >= MAX_WRONG) {
      await this.store.del(this.key(id));
      deleteCookie(c, MFA_COOKIE, { path: '/', secure: this.config.auth.cookie.secure, httpOnly: true });
    }
    throw new AppError(401, 'invalid_code', 'The code is wrong or was already used');
  }

  /** Consumes the pending login (single use: of two concurrent completions, one wins). */
  async finish(c: Context): Promise<PendingMfa> {
    const id = readCookie(c, MFA_COOKIE);
    const raw = id ? await this.store.getDel(this.key(id)) : null;
    deleteCookie(c, MFA_COOKIE, { path: '/', secure: this.config.auth.cookie.secure, httpOnly: true });
    if (!raw) throw expired();
    await this.store.del(this.wrongKey(id!));
    return JSON.parse(raw) as PendingMfa;
  }
}

const expired = () => new AppError(401, 'mfa_expired', 'The login waiting for a code has expired or was used: log in again');
