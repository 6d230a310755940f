import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { Config } from '../config/load.ts';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';
import type { FlowCookies } from './flow-cookies.ts';
import { sha256hex } from './hash.ts';
import { giveBack, tooMany } from './rate-limit.ts';

/** The HttpOnly cookie of a login waiting for its second factor (CONTRACT section 10). */
export const MFA_COOKIE = 'svc_mfa';
const MFA_TTL = 300;
/** Codes checked per pending login: the fifth wrong one ends it. */
const MAX_TRIES = 5;
/** Codes checked per user in WINDOW, across pending logins and routes (a password thief cannot restart for more). */
const MAX_TRIES_PER_USER = 10;
const WINDOW = 15 * 60;

/** What the store keeps under `mfa-pending:<sha256hex(cookie value)>`. */
export interface PendingMfa {
  userId: string;
  /** The user's credentials epoch when the first step passed: any lifecycle event since ends the login. */
  epoch: number;
  provider: string;
  /** OAuth logins: the stored post-login path, given back by `POST /auth/login/totp`. */
  returnTo?: string;
  /** When it ends (ms): a record put back after a wrong code keeps its end. */
  expiresAt?: number;
}

/** One code attempt, counted before the code is checked; `succeeded` gives it back. */
export interface CodeTry {
  succeeded(): Promise<void>;
}

/**
 * TOTP and recovery codes checked per user: at most 10 in 15 minutes, on every instance together
 * (CONTRACT section 10), whatever route checks them (the second login step, `DELETE /auth/totp`,
 * `POST /auth/reauthenticate`). The try is counted with one atomic INCR BEFORE the code is checked,
 * so parallel requests cannot all pass a check made before any of them was counted; a right code
 * gives its try back.
 */
export class CodeLimit {
  constructor(
    private readonly store: Store,
    private readonly prefix: string,
  ) {}

  /** Counts one try of `userId`; 429 `too_many_attempts` past the limit (nothing is checked then). */
  async take(userId: string): Promise<CodeTry> {
    const key = `${this.prefix}mfa-wrong-user:${userId}`;
    if ((await this.store.incr(key, WINDOW)) > MAX_TRIES_PER_USER) await tooMany(this.store, key, 'Too many wrong codes; try again later');
    return { succeeded: () => giveBack(this.store, key) };
  }
}

/**
 * Two-step logins: the first step (right password, an OAuth identity, a passkey without user
 * verification) leaves a pending record bound to the browser by a random HttpOnly cookie, single
 * use, 5 minutes; the second step (a TOTP or recovery code) consumes it. The cookie value is a bearer
 * secret: only its hash is a store key. Five codes checked end it; each is counted before it is checked.
 */
export class PendingMfaLogins {
  constructor(
    private readonly store: Store,
    private readonly config: Config,
    private readonly cookies: FlowCookies,
  ) {}

  private key(id: string) {
    return `${this.config.auth.store.keyPrefix}mfa-pending:${sha256hex(id)}`;
  }

  private triesKey(id: string) {
    return `${this.config.auth.store.keyPrefix}mfa-wrong:${sha256hex(id)}`;
  }

  async start(c: Context, pending: PendingMfa): Promise<void> {
    const id = randomBytes(32).toString('base64url');
    await this.store.set(this.key(id), JSON.stringify({ ...pending, expiresAt: Date.now() + MFA_TTL * 1000 }), { ttl: MFA_TTL });
    this.cookies.set(c, MFA_COOKIE, id, MFA_TTL, 'Strict');
  }

  /** The pending login of this browser; 401 `mfa_expired` when there is none (missing, used, expired). */
  async current(c: Context): Promise<PendingMfa> {
    const id = this.cookies.read(c, MFA_COOKIE);
    const raw = id ? await this.store.get(this.key(id)) : null;
    if (!raw) throw expired();
    return JSON.parse(raw) as PendingMfa;
  }

  /**
   * Counts one code for this pending login before it is checked. Past the limit the login ends
   * unchecked (401 `mfa_expired`). Returns whether this is the last try (a wrong code then ends it).
   */
  async countTry(c: Context): Promise<{ last: boolean }> {
    const id = this.cookies.read(c, MFA_COOKIE)!;
    const tries = await this.store.incr(this.triesKey(id), MFA_TTL);
    if (tries > MAX_TRIES) {
      await this.end(c, id);
      throw expired();
    }
    return { last: tries === MAX_TRIES };
  }

  /**
   * Takes the pending login out of the store while its code is checked (of two concurrent requests,
   * one holds it; the other gets 401 `mfa_expired` before its code is looked at). So a code, and a
   * recovery code above all, is spent only by a request that then gets the session: checked first,
   * a parallel request could end the login in between and leave the code used up for nothing.
   */
  async hold(c: Context): Promise<PendingMfa> {
    const id = this.cookies.read(c, MFA_COOKIE);
    const raw = id ? await this.store.getDel(this.key(id)) : null;
    if (!raw) throw expired();
    return JSON.parse(raw) as PendingMfa;
  }

  /** A wrong code for a held login: 401 `invalid_code`; it goes back to the store unless this was the last try. */
  async wrong(c: Context, held: PendingMfa, { last }: { last: boolean }): Promise<never> {
    const id = this.cookies.read(c, MFA_COOKIE)!;
    const ttl = Math.ceil(((held.expiresAt ?? Date.now() + MFA_TTL * 1000) - Date.now()) / 1000);
    if (last || ttl <= 0) await this.end(c, id);
    else await this.store.set(this.key(id), JSON.stringify(held), { ttl });
    throw new AppError(401, 'invalid_code', 'The code is wrong or was already used');
  }

  /**
   * Ends the pending login of this browser: the record and the cookie. Its count of tries stays until
   * it expires with it: a request holding the record may put it back, and must find the count as it was.
   */
  async end(c: Context, id = this.cookies.read(c, MFA_COOKIE)): Promise<void> {
    if (id) await this.store.del(this.key(id));
    this.cookies.clear(c, MFA_COOKIE);
  }
}

export const expired = () => new AppError(401, 'mfa_expired', 'The login waiting for a code has expired or was used: log in again');
