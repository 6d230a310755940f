import { randomBytes } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import type { Config } from '../config/load.ts';
import type { MailKind } from '../email/templates.ts';
import type { Mailer } from '../email/transport.ts';
import type { AppEnv } from '../http/env.ts';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';
import type { AuditLog } from '../audit/log.ts';
import { clientIp } from './client-ip.ts';
import { EmailTokens, TOKEN_TTL, type TokenPurpose, type TokenRecord } from './email-tokens.ts';
import type { FlowCookies } from './flow-cookies.ts';
import { sha256hex } from './hash.ts';
import { hashPassword } from './passwords.ts';
import type { BreachedPasswords } from './breached-passwords.ts';
import { rateLimitSubject, tooMany } from './rate-limit.ts';
import { atEpoch, epochOf, ownsEmail, type UserDoc, type UserService } from './users.ts';

/** The HttpOnly cookie that binds a magic-link request to the browser that made it (CONTRACT 12). */
export const MAGIC_COOKIE = 'svc_magic';
/** The HttpOnly cookie of the browser that signed up: a verification from it keeps the sign-up's password (CONTRACT 12). */
export const SIGNUP_COOKIE = 'svc_signup';
const WINDOW = 15 * 60;
/** Mails per address per WINDOW (asking for more still answers 202). */
const MAILS_PER_ADDRESS = 3;
/** Requests per IP per WINDOW to the public routes of CONTRACT 12 together. */
const REQUESTS_PER_IP = 100;
const VALID_FOR: Record<TokenPurpose, string> = { reset: '30 minutes', verify: '24 hours', magicLink: '10 minutes' };
const BINDING = /^[A-Za-z0-9_-]{43}$/;

export const invalidToken = () => new AppError(400, 'invalid_token', 'The link is invalid, was already used or has expired: ask for a new one');

/**
 * What the mail routes use of `Auth`, which creates them and passes itself: declared here, not
 * imported, so that auth/index.ts and this module do not import each other.
 */
export interface SelfServiceAuth {
  readonly users: UserService;
  claim(user: UserDoc, c?: Context<AppEnv> | null): Promise<void>;
  readonly audit: AuditLog;
  readonly breachedPasswords: Pick<BreachedPasswords, 'check'>;
  checkPassword(c: Context, email: string, password: string): Promise<UserDoc | null>;
  readonly passkeys: { list(userId: string): Promise<{ name: string }[]> };
  readonly accounts: { listFor(userId: string): Promise<{ provider: string }[]> };
  endAllSessions(userId: string, cause: { reason: 'password_reset'; c: Context<AppEnv> }): Promise<void>;
  revokeApiKeys(userId: string, cause: { reason: 'password_reset'; c: Context<AppEnv> }): Promise<void>;
}

/**
 * Sign-up, verification, password reset and magic links (CONTRACT 12), between the routes and the
 * parts they use: users, tokens, mail, limits.
 *
 * Enumeration safety: on the public routes a known and an unknown address take the same path until
 * the answer (the two counters, a job queued); who the address belongs to is looked up by the job,
 * after the answer. Sign-up is the one route that writes on the request path: it hashes the password
 * and tries the insert either way (a known address fails at the insert).
 */
export class EmailSelfService {
  readonly tokens: EmailTokens;

  constructor(
    private readonly auth: SelfServiceAuth,
    private readonly config: Config,
    private readonly store: Store,
    private readonly mailer: Mailer,
    private readonly cookies: FlowCookies,
  ) {
    this.tokens = new EmailTokens(store, config.auth.store.keyPrefix);
  }

  get configured(): boolean {
    return this.mailer.configured;
  }

  /**
   * Route hook of every public route of CONTRACT 12: 501 `email_not_configured` without SMTP, 403
   * when `feature` is off, then the per-IP limit, counted before anything else is done (429
   * `too_many_attempts` with `Retry-After`).
   */
  guard(feature?: 'signup' | 'magicLink'): MiddlewareHandler<AppEnv> {
    return async (c, next) => {
      if (!this.mailer.configured) throw new AppError(501, 'email_not_configured', 'This service sends no mail (SVC_SMTP_URL is not set)');
      if (feature === 'signup' && !this.config.auth.signup.enabled) throw new AppError(403, 'signup_disabled', 'Sign-up is turned off');
      if (feature === 'magicLink' && !this.config.auth.magicLink.enabled) throw new AppError(403, 'magic_link_disabled', 'Login by mailed link is turned off');
      const key = `${this.config.auth.store.keyPrefix}email-ip:${rateLimitSubject(clientIp(c, this.config.server.trustProxy))}`;
      if ((await this.store.incr(key, WINDOW)) > REQUESTS_PER_IP) await tooMany(this.store, key, 'Too many requests; try again later');
      await next();
    };
  }

  /** Counts a mail to `email` before deciding to send it: false past 3 in 15 minutes (one INCR, every instance together). */
  private async mayMail(email: string): Promise<boolean> {
    const key = `${this.config.auth.store.keyPrefix}email-cap:${sha256hex(email)}`;
    if ((await this.store.incr(key, WINDOW)) <= MAILS_PER_ADDRESS) return true;
    this.mailer.capped(email, MAILS_PER_ADDRESS, WINDOW / 60);
    return false;
  }

  private link(purpose: TokenPurpose, token: string): string {
    const { linkBaseUrl, paths } = this.config.auth.email;
    const path = purpose === 'reset' ? paths.reset : purpose === 'verify' ? paths.verify : paths.magicLink;
    return `${linkBaseUrl}${path}?token=${token}`;
  }

  /** A mail with a fresh token for `user`, sent after the answer. */
  private async mailToken(user: UserDoc, purpose: TokenPurpose, kind: MailKind, binding?: string): Promise<void> {
    const token = await this.tokens.issue(purpose, { userId: user._id, email: user.email, epoch: epochOf(user), ...(binding ? { binding } : {}) });
    await this.mailer.send(user.email, kind, { email: user.email, link: this.link(purpose, token), validFor: VALID_FOR[purpose] });
  }

  /** After the answer: the user of `email`, if `wanted` says so, gets a mail with a token. */
  private later(email: string, purpose: TokenPurpose, kind: MailKind, wanted: (user: UserDoc) => boolean, binding?: string): void {
    this.mailer.later(kind, async () => {
      const user = await this.auth.users.findByEmail(email);
      if (user && wanted(user)) await this.mailToken(user, purpose, kind, binding);
    });
  }

  /** `POST /auth/password/forgot`. */
  async forgot(email: string): Promise<void> {
    if (await this.mayMail(email)) this.later(email, 'reset', 'reset', () => true);
  }

  /**
   * A reset link for `email` after "this wasn't me" (CONTRACT 14: a reset link is mailed), outside the
   * per-address cap: three `POST /auth/password/forgot` must not keep it from the owner. The single-use
   * not-me token bounds how often this runs.
   */
  mailResetLink(email: string): void {
    this.later(email, 'reset', 'reset', () => true);
  }

  /** `POST /auth/email/verify/request`: a mail only to an existing user whose email is not verified. */
  async requestVerification(email: string): Promise<void> {
    if (await this.mayMail(email)) this.later(email, 'verify', 'verify', (user) => !user.email_verified);
  }

  /**
   * The random value of this browser's `cookie` (set, or kept when it holds one, so that the links of
   * two requests from one browser both work there), renewed for `maxAge` seconds; returns its SHA-256.
   */
  private bindBrowser(c: Context, cookie: string, maxAge: number): string {
    const held = this.cookies.read(c, cookie);
    const binding = held && BINDING.test(held) ? held : randomBytes(32).toString('base64url');
    this.cookies.set(c, cookie, binding, maxAge, 'Strict');
    return sha256hex(binding);
  }

  /** Whether the request carries the cookie whose SHA-256 is `bound`. */
  private heldBy(c: Context, cookie: string, bound: string | undefined): boolean {
    const held = this.cookies.read(c, cookie);
    return bound !== undefined && held !== undefined && sha256hex(held) === bound;
  }

  /**
   * `POST /auth/signup`: a new unverified user and a verification mail; a known address: nothing
   * changes, its owner is told. Either way this browser gets `svc_signup` (the same answer for both):
   * it is what later tells the maker's verification from the mailbox owner's (`verify`).
   */
  async signup(c: Context<AppEnv>, body: { email: string; password: string; firstname?: string; lastname?: string }): Promise<void> {
    await this.auth.breachedPasswords.check(body.password); // the same answer for a new and a known address
    const signupBinding = this.bindBrowser(c, SIGNUP_COOKIE, TOKEN_TTL.verify);
    const mail = await this.mayMail(body.email);
    let kind: MailKind = 'verify';
    try {
      // Never an admin: `create` tags only on `isAdmin`, which a sign-up never passes.
      const user = await this.auth.users.create({ ...body, email_verified: false, createdVia: 'signup', signupBinding });
      await this.auth.audit.record(c, { type: 'user.created', actor: { type: 'anonymous' }, subject: { userId: user._id, email: user.email }, details: { via: 'signup' } });
    } catch (err) {
      if ((err as AppError).code !== 'user_exists') throw err;
      kind = 'signupExisting';
    }
    if (mail) this.later(body.email, kind === 'verify' ? 'verify' : 'reset', kind, () => true);
  }

  /** `POST /auth/login/link`: binds the request to this browser (`svc_magic`), then a mail to an existing user. */
  async startMagicLink(c: Context, email: string): Promise<void> {
    const binding = this.bindBrowser(c, MAGIC_COOKIE, TOKEN_TTL.magicLink);
    if (await this.mayMail(email)) this.later(email, 'magicLink', 'magicLink', () => true, binding);
  }

  /**
   * The user a used token proves the mailbox of, still as it was when the mail went out (same address;
   * for `sameEpoch`, no lifecycle event since). Otherwise 400 `invalid_token`.
   */
  private async holder(record: TokenRecord | null, sameEpoch: boolean): Promise<UserDoc> {
    const user = record && (await this.auth.users.findById(record.userId));
    if (!user || user.email !== record.email || (sameEpoch && epochOf(user) !== record.epoch)) throw invalidToken();
    return user;
  }

  /**
   * The mailbox of `user` is proven. A user that did not own its email (made from an unverified OAuth
   * email, or signed up by anyone without verifying) is claimed first (`Auth.claim`): whatever ways in
   * its maker added go, so proving the mailbox never hands the owner an account someone else can enter.
   */
  private async mailboxProven(c: Context<AppEnv>, user: UserDoc, { claim = !ownsEmail(user), logsIn = false } = {}): Promise<UserDoc> {
    let epoch = epochOf(user);
    if (claim) {
      await this.auth.claim(user, c);
      epoch++;
    }
    const update = { $set: { email_verified: true, updatedAt: new Date().toISOString() }, $unset: { signupBinding: true as const } };
    // A token that logs in: only while no lifecycle event (a logout-all, a reset) came between its
    // check and now. The user handed to the login carries the token's epoch, so a later one ends it too.
    const done = logsIn ? await this.auth.users.users.updateOne(atEpoch(user._id, epoch), update) : ((await this.auth.users.users.updateOne({ _id: user._id }, update)) ?? user);
    if (!done) throw invalidToken();
    if (!user.email_verified) await this.emailVerified(c, done);
    return done;
  }

  private emailVerified(c: Context<AppEnv>, user: UserDoc): Promise<void> {
    return this.auth.audit.record(c, { type: 'email.verified', actor: { type: 'user', id: user._id }, subject: { userId: user._id, email: user.email } });
  }

  /**
   * `POST /auth/password/reset`: sets the password, the email counts as verified, and every session and
   * API key of the user ends. The write happens only while the epoch is the token's: a token dies when the
   * password changed another way, or when another reset won.
   */
  async reset(c: Context<AppEnv>, token: string, newPassword: string): Promise<void> {
    // A dead token is invalid_token whatever the password; a live one stays usable when the password is refused.
    if (!(await this.tokens.peek('reset', token))) throw invalidToken();
    await this.auth.breachedPasswords.check(newPassword);
    const passwordHash = await hashPassword(newPassword);
    const user = await this.holder(await this.tokens.consume('reset', token), true);
    let epoch = epochOf(user);
    if (!ownsEmail(user)) {
      await this.auth.claim(user, c);
      epoch++;
    }
    const done = await this.auth.users.users.updateOne(atEpoch(user._id, epoch), {
      $set: { passwordHash, email_verified: true, updatedAt: new Date().toISOString() },
      $unset: { passwordResetRequired: true as const },
      $inc: { epoch: 1 },
    });
    if (!done) throw invalidToken();
    const subject = { userId: done._id, email: done.email };
    await this.auth.audit.record(c, { type: 'password.reset', actor: { type: 'user', id: done._id }, subject });
    if (!user.email_verified) await this.emailVerified(c, done);
    await this.auth.endAllSessions(user._id, { reason: 'password_reset', c });
    await this.auth.revokeApiKeys(user._id, { reason: 'password_reset', c }); // a reset revokes keys too (CONTRACT 15); a change does not
    this.notify(done, 'passwordChanged');
  }

  /**
   * `POST /auth/password/reset/check`: passes when `reset` would take the token now (known, unused, not
   * expired, no lifecycle event since the mail), else 400 `invalid_token`. A look, never a use: the
   * frontend's reset page asks on load, before anyone types a password, and a dead link gets the form
   * for a new one at once.
   */
  async checkReset(token: string): Promise<void> {
    await this.holder(await this.tokens.peek('reset', token), true);
  }

  /**
   * `POST /auth/email/verify`. A sign-up keeps its password only when whoever made it verifies: from the
   * browser holding that sign-up's `svc_signup`, or with its password in the body (a wrong one: 401,
   * counted like a failed login, the token unused). Any other verification is the mailbox owner's
   * claim (the sign-up may be a stranger's squatting the address): the password and every way in
   * added since go, and the answer carries a reset token so the page asks for a new password.
   */
  async verify(c: Context<AppEnv>, token: string, password?: string): Promise<{ user: UserDoc; passwordResetToken?: string }> {
    let provedAt: number | null = null; // the epoch at which the password was proven
    if (password !== undefined) {
      const peeked = await this.tokens.peek('verify', token);
      const maker = peeked && (await this.auth.users.findById(peeked.userId));
      if (!maker || maker.email !== peeked.email) throw invalidToken();
      if ((await this.auth.checkPassword(c, maker.email, password))?._id !== maker._id) throw new AppError(401, 'invalid_credentials', 'The password is wrong');
      provedAt = epochOf(maker);
    }
    const user = await this.holder(await this.tokens.consume('verify', token), false);
    const byMaker = provedAt === epochOf(user) || this.heldBy(c, SIGNUP_COOKIE, user.signupBinding);
    const claim = !ownsEmail(user) && !(user.createdVia === 'signup' && byMaker);
    const done = await this.mailboxProven(c, user, { claim });
    if (!claim) return { user: done };
    const passwordResetToken = await this.tokens.issue('reset', { userId: done._id, email: done.email, epoch: epochOf(done) });
    return { user: done, passwordResetToken };
  }

  /**
   * `POST /auth/login/link/verify`: only from the browser holding the request's `svc_magic`; a token
   * used from another browser stays usable in the right one. Returns the user to log in.
   */
  async useMagicLink(c: Context<AppEnv>, token: string): Promise<UserDoc> {
    const binding = this.cookies.read(c, MAGIC_COOKIE);
    if (!binding) throw invalidToken();
    const peeked = await this.tokens.peek('magicLink', token);
    if (!peeked || peeked.binding !== sha256hex(binding)) throw invalidToken();
    const user = await this.holder(await this.tokens.consume('magicLink', token), true);
    this.cookies.clear(c, MAGIC_COOKIE);
    return this.mailboxProven(c, user, { logsIn: true }); // the login itself (Auth.login) records lastLoginAt
  }

  /** A self-signed-up user who has not verified the email yet, under `auth.signup.requireVerifiedEmail`. */
  mustVerifyFirst(user: UserDoc): boolean {
    return this.config.auth.signup.requireVerifiedEmail && user.createdVia === 'signup' && !user.email_verified;
  }

  /**
   * A security notice to the user, after the answer; nothing without SMTP. After a password change or
   * reset it lists the ways in that stayed (a reset keeps passkeys, identities and TOTP by design), to be
   * checked on the account page. No link (CONTRACT 12): a notice must not train users to click mailed links.
   */
  notify(user: UserDoc, kind: 'passwordChanged' | 'totpDisabled'): void {
    if (!this.mailer.configured) return;
    this.mailer.later(kind, async () => {
      const waysIn = kind === 'passwordChanged' ? await this.waysInLeft(user) : undefined;
      await this.mailer.send(user.email, kind, { email: user.email, ...(waysIn ? { waysIn } : {}) });
    });
  }

  /** One sentence naming the ways in besides the password, e.g. "These stay: the passkey "Laptop", a Google account, two-factor authentication (TOTP)." */
  private async waysInLeft(user: UserDoc): Promise<string> {
    const [passkeys, accounts] = await Promise.all([this.auth.passkeys.list(user._id), this.auth.accounts.listFor(user._id)]);
    const items = [
      ...passkeys.map((p) => `the passkey "${p.name}"`),
      ...accounts.map((a) => `a connected ${a.provider} account`),
      ...(user.totp?.secret ? ['two-factor authentication (TOTP) and its recovery codes'] : []),
    ];
    return items.length ? `These stay: ${items.join(', ')}.` : 'The account has no other way in.';
  }
}
