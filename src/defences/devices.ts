import type { Context } from 'hono';
import { setCookie } from 'hono/cookie';
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/load.ts';
import type { Mailer } from '../email/transport.ts';
import { readCookie } from '../http/cookie.ts';
import type { AppEnv } from '../http/env.ts';
import { AppError } from '../http/errors.ts';
import type { Logger } from '../logger.ts';
import type { Store } from '../store/store.ts';
import { sha256hex } from '../auth/hash.ts';
import { requestOrigin } from '../auth/origin.ts';
import type { UserDoc, UserService } from '../auth/users.ts';
import { publicSessionId, type SessionService } from '../auth/sessions.ts';
import type { AuditLog } from '../audit/log.ts';
import type { EmailSelfService } from '../auth/self-service.ts';

/** How many device ids svc remembers per user (CONTRACT 14): the last ones that logged in. */
export const MAX_KNOWN_DEVICES = 20;
const DEVICE_COOKIE_MAX_AGE = 365 * 24 * 60 * 60;
/** A "this wasn't me" link works once, for 7 days. */
export const NOT_ME_TTL = 7 * 24 * 60 * 60;
const DEVICE_ID = /^[A-Za-z0-9_-]{43}$/;
/**
 * At most 20 new-device notices per user per hour (counted in the store, on every instance together):
 * someone cycling devices with a stolen password cannot bury the owner's mailbox. Past it the login goes
 * on without a mail (warn log `new_device_notice_capped`), and its device is not remembered, so its next
 * login under the cap mails.
 */
export const NOTICE_CAP = { count: 20, windowSeconds: 60 * 60 } as const;

interface NotMeRecord {
  userId: string;
  email: string;
  /** The session the login made: it ends when the link is used. */
  sessionHash: string;
  /** SHA-256 of that login's device id, and the login's time: the device's sessions since then end too. */
  deviceHash?: string;
  since?: number;
  expiresAt: number;
}

/** What the devices module needs of the auth facade (no import cycle). */
export interface DevicesAuth {
  readonly users: Pick<UserService, 'findById' | 'advanceEpoch'>;
  readonly sessions: Pick<SessionService, 'destroyWhere'>;
  readonly audit: Pick<AuditLog, 'record'>;
  readonly email: Pick<EmailSelfService, 'mailResetLink'>;
  revokeApiKeys(userId: string, cause: { reason: 'not_me'; c: Context<AppEnv> }): Promise<void>;
}

/**
 * Known devices and the new-device notice (CONTRACT 14). Every login sets `svc_device` (HttpOnly,
 * 1 year, a random id; `__Host-` with `auth.cookie.hostPrefix`); svc keeps, per user, the SHA-256 of
 * the last 20 device ids that logged in. A login from a device not on a non-empty list mails the user
 * (off the request path) the time, the device, the IP and a "this wasn't me" link; `POST /auth/not-me`
 * with its token ends that login's session and the device's later ones, locks password login until a reset, mails a reset link,
 * moves the credentials epoch and revokes API keys. A cookie from another user's browser is simply not
 * on this user's list: it can never suppress this user's notice.
 */
export class KnownDevices {
  /** The clock token expiry is judged by; tests replace it instead of sleeping. */
  now: () => number = Date.now;
  readonly cookieName: string;
  private readonly notices: boolean;
  /** Each login request's device id, chosen once (`identify`) and set as the cookie after the session's (`afterLogin`). */
  private readonly chosen = new WeakMap<Context, string>();

  constructor(
    private readonly config: Config,
    private readonly store: Store,
    private readonly mailer: Mailer,
    private readonly logger: Logger,
    private readonly auth: DevicesAuth,
  ) {
    this.cookieName = config.auth.cookie.hostPrefix ? '__Host-svc_device' : 'svc_device';
    this.notices = (config.auth.notices.newDevice ?? true) && Boolean(config.env.smtpUrl);
    if (config.auth.notices.newDevice === true && !config.env.smtpUrl) {
      logger.warn({ code: 'new_device_notices_without_mail' }, 'auth.notices.newDevice is true but SVC_SMTP_URL is not set: no new-device notice can be sent until it is');
    }
  }

  private listKey(userId: string) {
    return `${this.config.auth.store.keyPrefix}known-devices:${userId}`;
  }

  private noticeCountKey(userId: string) {
    return `${this.config.auth.store.keyPrefix}new-device-notices:${userId}`;
  }

  private tokenKey(token: string) {
    return `${this.config.auth.store.keyPrefix}not-me:${sha256hex(token)}`;
  }

  /**
   * For a login, before its session is made: the SHA-256 of the browser's device id (a new id when it has
   * none, or a malformed one). The session's origin keeps the hash, so "this wasn't me" can end every
   * session of that device. The cookie is set by `afterLogin`, after the session cookie: clients that
   * read the first Set-Cookie of a login (many do) find the session there.
   */
  identify(c: Context): string {
    return sha256hex(this.deviceId(c));
  }

  /** The id this request's login uses: the browser's own when well-formed, else a new one (the same for the whole request). */
  private deviceId(c: Context): string {
    let id = this.chosen.get(c);
    if (id === undefined) {
      const held = readCookie(c, this.cookieName);
      id = held && DEVICE_ID.test(held) ? held : randomBytes(32).toString('base64url');
      this.chosen.set(c, id);
    }
    return id;
  }

  /** (Re)sets the device cookie, a year from now. */
  private setDeviceCookie(c: Context): void {
    setCookie(c, this.cookieName, this.deviceId(c), {
      httpOnly: true,
      path: '/',
      // Lax at least: an OAuth login ends in a navigation from the provider's site, where a Strict cookie
      // is not sent, and every such login would look like a new device. The cookie is no credential.
      sameSite: this.config.auth.cookie.sameSite === 'none' ? 'None' : 'Lax',
      secure: this.config.auth.cookie.secure || this.config.auth.cookie.hostPrefix,
      maxAge: DEVICE_COOKIE_MAX_AGE,
      // A cross-site frontend's (CHIPS): kept for svc within that site only, as the session cookie is.
      ...(this.config.auth.cookie.partitioned ? { partitioned: true } : {}),
    });
  }

  /**
   * After a login of any method made `session` from the device `id` (`identify`): remembers the device,
   * and for a device new to a user who has logged in before, queues the notice. Never fails the login
   * (a store error is logged).
   */
  async afterLogin(c: Context<AppEnv>, user: UserDoc, session: { hash: string; createdAt: number }, id: string): Promise<void> {
    this.setDeviceCookie(c);
    try {
      const key = this.listKey(user._id);
      const known = JSON.parse((await this.store.get(key)) ?? '[]') as string[];
      const isNew = !known.includes(id);
      const notify = isNew && known.length > 0 && this.notices;
      if (notify && (await this.store.incr(this.noticeCountKey(user._id), NOTICE_CAP.windowSeconds)) > NOTICE_CAP.count) {
        this.logger.warn(
          { code: 'new_device_notice_capped', userId: user._id, cap: NOTICE_CAP.count, windowSeconds: NOTICE_CAP.windowSeconds },
          'new_device_notice_capped: a login from a new device sent no notice (the user got the most notices an hour allows); the device is not remembered',
        );
        return;
      }
      const next = [id, ...known.filter((k) => k !== id)].slice(0, MAX_KNOWN_DEVICES);
      await this.store.set(key, JSON.stringify(next), { ttl: DEVICE_COOKIE_MAX_AGE });
      if (notify) this.notify(c, user, session, id);
    } catch (err) {
      this.logger.error({ err, userId: user._id }, 'known devices: could not read or write the list of the user; no new-device notice for this login');
    }
  }

  /** Takes a device off the user's list (its next login is a new device's). */
  private async forget(userId: string, deviceHash: string): Promise<void> {
    const key = this.listKey(userId);
    const known = JSON.parse((await this.store.get(key)) ?? '[]') as string[];
    if (known.includes(deviceHash)) await this.store.set(key, JSON.stringify(known.filter((k) => k !== deviceHash)), { ttl: DEVICE_COOKIE_MAX_AGE });
  }

  private notify(c: Context, user: UserDoc, session: { hash: string; createdAt: number }, deviceHash: string): void {
    const { ip, device } = requestOrigin(c, this.config.server.trustProxy);
    const time = new Date(this.now()).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
    this.mailer.later('newDevice', async () => {
      const token = randomBytes(32).toString('base64url');
      const record: NotMeRecord = { userId: user._id, email: user.email, sessionHash: session.hash, deviceHash, since: session.createdAt, expiresAt: this.now() + NOT_ME_TTL * 1000 };
      await this.store.set(this.tokenKey(token), JSON.stringify(record), { ttl: NOT_ME_TTL });
      const { linkBaseUrl, paths } = this.config.auth.email;
      await this.mailer.send(user.email, 'newDevice', { email: user.email, time, device, ip: ip || 'unknown', link: `${linkBaseUrl}${paths.notMe}?token=${token}`, validFor: '7 days' });
    });
  }

  /**
   * `POST /auth/not-me`: the token of a notice, once. Ends the session of that login and every session
   * its device (the same `svc_device` id) made since, locks password login until a reset
   * (`passwordResetRequired`, with the epoch moved in the same write: pending second steps and link
   * flows die), takes that device off the user's list, revokes the user's API keys and mails a reset link.
   */
  async notMe(c: Context<AppEnv>, token: string): Promise<void> {
    const raw = await this.store.getDel(this.tokenKey(token));
    const record = raw ? (JSON.parse(raw) as NotMeRecord) : null;
    const user = record && record.expiresAt > this.now() ? await this.auth.users.findById(record.userId) : null;
    if (!record || !user || user.email !== record.email) throw new AppError(400, 'invalid_token', 'This link is unknown, used or expired');
    this.logger.warn({ userId: user._id }, 'a user said a new-device login was not them: its session ends, password login is locked until a reset');
    try {
      await this.auth.users.advanceEpoch(user._id, { $set: { passwordResetRequired: true } });
      // The device the owner disowned is known no more: a thief who gets the new password too (the same
      // phishing page, the same malware) is announced again when that browser logs in.
      if (record.deviceHash !== undefined) await this.forget(user._id, record.deviceHash);
      // That login's session, and what the same device made since (the attacker logging in again from
      // the same browser: a known device by then, so no notice of its own).
      const sameDevice = (s: { hash: string; createdAt: number; deviceHash?: string }) =>
        s.hash === record.sessionHash || (record.deviceHash !== undefined && s.deviceHash === record.deviceHash && s.createdAt >= (record.since ?? Infinity));
      for (const ended of await this.auth.sessions.destroyWhere(user._id, sameDevice)) {
        await this.auth.audit.record(c, { type: 'session.revoked', actor: { type: 'user', id: user._id }, subject: { userId: user._id, email: user.email }, sessionId: publicSessionId(ended.hash), details: { reason: 'not_me' } });
      }
      await this.auth.revokeApiKeys(user._id, { reason: 'not_me', c });
    } catch (err) {
      // Cut short (the database or the store failing): the link works again, and each step above is
      // safe to repeat, so the owner's retry finishes what this one started.
      const ttl = Math.ceil((record.expiresAt - this.now()) / 1000);
      if (ttl > 0) await this.store.set(this.tokenKey(token), raw!, { ttl }).catch(() => {});
      throw err;
    }
    this.auth.email.mailResetLink(user.email); // after the answer, never held back by the per-address cap
  }
}
