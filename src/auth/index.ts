import type { Context, MiddlewareHandler } from 'hono';
import { readCookie } from '../http/cookie.ts';
import type { Config } from '../config/load.ts';
import type { Database } from '../db/index.ts';
import type { AppEnv } from '../http/env.ts';
import { AppError, forbidden } from '../http/errors.ts';
import { isPending, syncAwareLayer, type SyncAwareLayer } from '../http/dispatch.ts';
import { presetHeader } from '../http/response-headers.ts';
import { laneKey, requestHeader } from '../http/request-headers.ts';
import { acceptsApiKeys, apiKeyNotAllowed, checkScopes } from '../http/route.ts';
import { ADMIN_SCOPE, ApiKeyService, bearerApiKey } from './api-keys.ts';
import { DeviceFlow } from './device-flow.ts';
import type { Logger } from '../logger.ts';
import type { Stores } from '../store/index.ts';
import { AssetTokens, type AssetResolver } from './assets.ts';
import { AccountLinks } from './oauth/accounts.ts';
import { OAuthFlow, type OAuthLoginHandler, type ProviderTokenBlob } from './oauth/flow.ts';
import { ProviderService } from './oauth/providers.ts';
import { resealSecretsAtRest } from './reseal.ts';
import { clientIp } from './client-ip.ts';
import { requestOrigin } from './origin.ts';
import { LoginRateLimit } from './rate-limit.ts';
import { WorkSessions } from './work-sessions.ts';
import { publicSessionId, SessionService, type LookedUp, type Session, type SessionOrigin } from './sessions.ts';
import { totpEnabled, TotpService } from './totp.ts';
import { CodeLimit, PendingMfaLogins, type PendingMfa } from './mfa.ts';
import { FlowCookies } from './flow-cookies.ts';
import { SessionCookie } from './session-cookie.ts';
import { WaysIn } from './ways-in.ts';
import { epochOf, isAdmin, UserService, WAYS_IN_IN_DOC, type UserDoc, type UserPatch } from './users.ts';
import { PasskeyService } from './passkeys.ts';
import { Mailer } from '../email/transport.ts';
import { Webhooks } from '../webhooks/index.ts';
import { EmailSelfService } from './self-service.ts';
import { BreachedPasswords } from './breached-passwords.ts';
import { CaptchaOnRisk } from '../defences/captcha.ts';
import { KnownDevices } from '../defences/devices.ts';
import { adminActor, AuditLog } from '../audit/log.ts';
import type { AuditActor, RevokeReason } from '../audit/record.ts';
import { loginMethod } from '../audit/methods.ts';

/** A `can()` resolver: true or false decides, undefined abstains (CONTRACT section 4). */
export type PermissionResolver = (permission: string, c: Context<AppEnv>) => boolean | undefined | Promise<boolean | undefined>;

export interface AuthenticateOptions {
  /** Require the `ADMIN` tag: 403 `forbidden` for others. API keys need the `auth:admin` scope. */
  admin?: boolean;
  /**
   * Take API keys holding these scopes (CONTRACT 15; `[]`: any key); a key without one of them gets
   * 403 `insufficient_scope`. Absent: keys get 403 `api_key_not_allowed`.
   */
  scopes?: string[];
}

/** Why sessions end and who ended them, for their `session.revoked` records (CONTRACT 13). */
export interface RevokeCause {
  reason: RevokeReason;
  /** The request that ended them (IP, device); none for svc's own actions. */
  c?: Context<AppEnv> | null;
  /** Default: the request's user. */
  actor?: AuditActor;
}

/** 403: a password locked by "this wasn't me" until a reset (CONTRACT 14). */
export const passwordResetRequired = () =>
  new AppError(403, 'password_reset_required', 'This password was locked after you reported a login that was not you: choose a new one with the link we mailed you (or "Forgot password")');

/** 401 for a caller without a session; `legacy_token` when it still speaks 0.1.x (Bearer/authToken). */
export function unauthenticatedError(c: Context): AppError {
  if (bearerApiKey(c.req.header('authorization')) !== undefined) return new AppError(401, 'invalid_api_key', 'This API key is unknown, expired or revoked');
  if (/^bearer\s/i.test(c.req.header('authorization') ?? '') || readCookie(c, 'authToken') !== undefined) {
    return new AppError(401, 'legacy_token', 'This client uses the old token login, which no longer works: log in again');
  }
  return new AppError(401, 'unauthenticated', 'You need to log in');
}

/**
 * The auth API of the server instance: sessions, users, the middleware that core routes and plugins
 * use, and the cookie. Created once per instance.
 */
export class Auth {
  readonly loginLimit: LoginRateLimit;
  private readonly resolvers: PermissionResolver[] = [];

  /** Work sessions: guest access (CONTRACT sections 4 and 6). */
  readonly workSessions: WorkSessions;
  /** Asset download tokens and the resolvers plugins register (CONTRACT section 6). */
  readonly assets: AssetTokens;
  /** Provider documents (admin API). */
  readonly providers: ProviderService;
  /** The OAuth flow, pending links and provider token blobs. */
  readonly oauth: OAuthFlow;
  /** TOTP second factor (CONTRACT section 10). */
  readonly totp: TotpService;
  /** Logins waiting for their second factor. */
  readonly mfa: PendingMfaLogins;
  /** TOTP and recovery codes checked per user, on every route that checks one. */
  readonly codeLimit: CodeLimit;
  /** The cookies of half-finished flows (`__Host-` with `auth.cookie.hostPrefix`). */
  readonly flowCookies: FlowCookies;
  /** Which OAuth identities belong to which user. */
  readonly accounts: AccountLinks;
  /** WebAuthn credentials (CONTRACT section 11). */
  readonly passkeys: PasskeyService;
  /** Mail through SMTP (`SVC_SMTP_URL`), sent off the request path. */
  readonly mailer: Mailer;
  /** Sign-up, verification, password reset, magic links and security notices (CONTRACT 12). */
  readonly email: EmailSelfService;
  /** The audit log (CONTRACT 13): every way in and every admin action writes here. */
  readonly audit: AuditLog;
  /** Signed webhooks (CONTRACT 13): endpoints, the delivery queue and its records. */
  readonly webhooks: Webhooks;
  /** API keys (CONTRACT 15): made, listed, revoked, and resolved by the session hook. */
  readonly apiKeys: ApiKeyService;
  /** Device login (CONTRACT 15, RFC 8628): command-line tools get an API key the user approved. */
  readonly device: DeviceFlow;
  /** Breached passwords by k-anonymity (CONTRACT 14): every password being set, but the bootstrap admin's. */
  readonly breachedPasswords: BreachedPasswords;
  /** Captcha on risk (CONTRACT 14): asked of callers with failed logins behind them. */
  readonly captcha: CaptchaOnRisk;
  /** Known devices, new-device notices and `POST /auth/not-me` (CONTRACT 14). */
  readonly devices: KnownDevices;
  private readonly logger: Logger;
  /** Removing and adding ways in (identities, passkeys) that must never leave a user locked out. */
  readonly waysIn: WaysIn;

  private constructor(
    readonly config: Config,
    readonly sessions: SessionService,
    readonly users: UserService,
    parts: { stores: Stores; providers: ProviderService; accounts: AccountLinks; workSessions: WorkSessions; passkeys: PasskeyService; logger: Logger; mailer: Mailer; audit: AuditLog; webhooks: Webhooks; apiKeys: ApiKeyService },
  ) {
    this.apiKeys = parts.apiKeys;
    this.device = new DeviceFlow(parts.stores.forRole('sessions'), config);
    this.workSessions = parts.workSessions;
    this.audit = parts.audit;
    this.webhooks = parts.webhooks;
    this.logger = parts.logger;
    this.breachedPasswords = new BreachedPasswords(config.auth.passwords.breachCheck, parts.logger);
    this.captcha = new CaptchaOnRisk(config, parts.logger, (email, ip) => this.loginLimit.failures(email, ip));
    this.passkeys = parts.passkeys;
    this.loginLimit = new LoginRateLimit(parts.stores.forRole('sessions'), config.auth.store.keyPrefix, this.captcha.enabled);
    this.providers = parts.providers;
    this.accounts = parts.accounts;
    this.oauth = new OAuthFlow(config, parts.stores, parts.providers, parts.accounts, this, parts.logger);
    this.onSessionEnd((sid) => this.oauth.deleteBlobsOfSession(sid));
    this.totp = new TotpService(users, parts.providers.secrets, config.app.name ?? 'svc');
    this.flowCookies = new FlowCookies(config);
    this.mfa = new PendingMfaLogins(parts.stores.forRole('sessions'), config, this.flowCookies);
    this.codeLimit = new CodeLimit(parts.stores.forRole('sessions'), config.auth.store.keyPrefix);
    this.waysIn = new WaysIn(config, parts.stores.forRole('sessions'), this.users, this.passkeys, this.accounts);
    this.assets = new AssetTokens(parts.stores.forRole('sessions'), config.auth.store.keyPrefix, sessions);
    // Best effort: a session token also checks at every download that its session lives.
    this.onSessionEnd((sid) => this.assets.endSession(sid).catch(() => {}));
    this.mailer = parts.mailer;
    this.email = new EmailSelfService(this, config, parts.stores.forRole('sessions'), parts.mailer, this.flowCookies);
    this.devices = new KnownDevices(config, parts.stores.forRole('sessions'), parts.mailer, parts.logger, this);
    this.sessionCookie = new SessionCookie(config);
    this.cookieName = this.sessionCookie.name;
  }

  static async create(config: Config, stores: Stores, db: Database, logger: Logger): Promise<Auth> {
    // First: a bad mail template stops start-up before anything is opened.
    const mailer = new Mailer(config, logger);
    const sessions = new SessionService(stores.forRole('sessions'), config, logger);
    const apiKeys = await ApiKeyService.open(db, stores.forRole('sessions'), config, logger);
    await sessions.startLocalCache([apiKeys.tracked()].filter((t) => t !== null));
    const users = await UserService.open(db);
    const providers = await ProviderService.open(db, config);
    if (!providers.secrets.encrypts) {
      logger.warn('SVC_SECRET_ENCRYPTION_KEY is not set: OAuth client secrets and TOTP secrets (database) and provider token blobs (store) are kept unencrypted');
    }
    await resealSecretsAtRest(providers, users, logger);
    const accounts = await AccountLinks.open(db, users);
    const workSessions = await WorkSessions.open(db);
    const passkeys = await PasskeyService.open(db, stores.forRole('sessions'), config, new FlowCookies(config));
    const audit = await AuditLog.open(db, config, logger);
    const webhooks = await Webhooks.open({ config, db, store: stores.forRole('sessions'), logger, audit, secrets: providers.secrets });
    return new Auth(config, sessions, users, { stores, providers, accounts, workSessions, passkeys, logger, mailer, audit, webhooks, apiKeys });
  }

  // SPEC.md "Login handlers" and provider token blobs, for plugins.

  /** Runs `handler` after each successful OAuth login with `providerId` (before the response). */
  registerOAuthLoginHandler(providerId: string, handler: OAuthLoginHandler): void {
    this.oauth.registerLoginHandler(providerId, handler);
  }

  /** The blob `{namespace}:oauth_tokens:{sid}`; `sid` is `c.get('session').hash`. */
  getProviderTokenBlob(namespace: string, sid: string, storeInstance?: string): Promise<ProviderTokenBlob | null> {
    return this.oauth.getTokenBlob(namespace, sid, storeInstance);
  }

  setProviderTokenBlob(namespace: string, sid: string, blob: ProviderTokenBlob, storeInstance?: string): Promise<void> {
    return this.oauth.setTokenBlob(namespace, sid, blob, storeInstance);
  }

  deleteProviderTokenBlob(namespace: string, sid: string, storeInstance?: string): Promise<void> {
    return this.oauth.deleteTokenBlob(namespace, sid, storeInstance);
  }

  /**
   * Lets `POST /auth/asset-token` mint download tokens for asset ids starting with `prefix`; `resolver`
   * answers whether the user may have the asset (null: 404) and, at download, its body (streamed).
   */
  registerAssetResolver(prefix: string, resolver: AssetResolver): void {
    this.assets.register(prefix, resolver);
  }

  /** The session cookie: set at a login, cleared at a logout (`sessionCookie.clear(c)`), renewed by the hook. */
  readonly sessionCookie: SessionCookie;
  /** The session cookie's name: `auth.cookie.name`, with `__Host-` when `auth.cookie.hostPrefix` is on. */
  readonly cookieName: string;

  /**
   * A first step that proved who they are (password, magic link, passkey without user verification,
   * OAuth) for a user with TOTP on: the login waits for the code from this browser. As every login,
   * it ends the session the request carried (CONTRACT section 3: "destroyed first"), here at once,
   * not when the code arrives: the browser is between two users' sessions no longer.
   */
  async startSecondStep(c: Context, pending: PendingMfa): Promise<void> {
    if (await this.endCarriedSession(c)) this.sessionCookie.clear(c);
    await this.mfa.start(c, pending);
  }

  /** Ends the session the request's cookie names, if any; says whether there was one. */
  private async endCarriedSession(c: Context): Promise<boolean> {
    const carried = readCookie(c, this.cookieName);
    if (!carried) return false;
    await this.endSession(carried);
    return true;
  }

  /**
   * Starts a session for a user who just proved who they are, ending the one the request carried.
   *
   * A login reads the user, checks the credential, then writes the session; an admin may change the
   * password, the admin tag or delete the user in between (finding 3 of the security review). Admin
   * changes write the database first and then end or rewrite the user's sessions through the index,
   * so after writing the session we read the user again: either this read sees the change (the
   * session is undone and the login retried from the fresh user, or refused), or the change comes
   * later and finds the session in the index. `stillValid` says whether the credential that was
   * checked still holds for a fresh copy of the user (the same password hash, the identity still
   * linked). Returns null when it no longer does. `proven: false`: the login does not count as a
   * proof for step-up (`Sessions.markUnproven`).
   */
  async login(c: Context<AppEnv>, user: UserDoc, provider: string, stillValid: (fresh: UserDoc) => boolean, { proven = true, mfa }: { proven?: boolean; mfa?: 'totp' | 'recovery_code' } = {}): Promise<{ session: Session; user: UserDoc } | null> {
    await this.endCarriedSession(c);
    // Any lifecycle event since the credential was checked (a claim, a reset, a factor removed, a
    // deletion) ends this login too: the credential may be one that event took away.
    const epoch = epochOf(user);
    // The browser's device (its svc_device cookie set here): the session's origin keeps it, for "this wasn't me".
    const deviceHash = this.devices.identify(c);
    let current: UserDoc | null = user;
    for (let attempt = 0; attempt < 3; attempt++) {
      if (!current || epochOf(current) !== epoch || !stillValid(current)) return null;
      const { id, session } = await this.sessions.create({ userId: current._id, isAdmin: isAdmin(current), provider, totp: totpEnabled(current) }, { ...this.origin(c), deviceHash });
      let fresh: UserDoc | null;
      try {
        fresh = await this.users.findById(current._id);
      } catch (err) {
        await this.sessions.destroy(id).catch(() => {});
        throw err;
      }
      if (fresh && epochOf(fresh) === epoch && fresh.passwordHash === current.passwordHash && isAdmin(fresh) === session.isAdmin && totpEnabled(fresh) === (session.totp === true) && stillValid(fresh)) {
        // Every way in (password, TOTP or recovery code, passkey, OAuth, magic link) ends here: the one
        // place that records a login, and only a finished one (not a first step waiting for a code).
        const lastLoginAt = new Date().toISOString();
        try {
          if (!proven) await this.sessions.markUnproven(session.hash);
          await this.users.users.updateOne({ _id: fresh._id }, { $set: { lastLoginAt } });
        } catch (err) {
          await this.sessions.destroy(id).catch(() => {});
          throw err;
        }
        this.sessionCookie.set(c, id);
        await this.devices.afterLogin(c, fresh, session, deviceHash);
        await this.audit.record(c, {
          type: 'login.succeeded',
          actor: { type: 'user', id: fresh._id },
          subject: { userId: fresh._id, email: fresh.email },
          sessionId: publicSessionId(session.hash),
          details: { method: loginMethod(provider), ...(mfa ? { mfa } : {}) },
        });
        return { session, user: { ...fresh, lastLoginAt } };
      }
      await this.sessions.destroy(id);
      current = fresh;
    }
    throw new AppError(503, 'unavailable', 'The account changed during the login; try again');
  }

  /**
   * Checks an email and password under the login limits (CONTRACT section 3): 429 past them; a
   * failure stays counted, a success clears it, an attempt that could not be judged (database down,
   * server busy) does not count. Returns the user, or null for a wrong email or password. `captcha`
   * (`POST /auth/login`): the attempt needs a captcha when failed logins came before it (CONTRACT 14).
   *
   * Only failures count toward that (captcha on risk), never a good login still being checked beside
   * this one; yet parallel guesses must not all slip past. So: no attempts ahead (the lockout's count,
   * taken before the check): nothing to ask. Failures ahead already risky: asked before the password is
   * checked. Attempts ahead still in flight: the password is checked, and the answer waits on the
   * failures as they stand then. A wrong one counts its failure (atomic INCR) and learns how many came
   * before it, so of N parallel guesses only the first 3 to fail are told 401 (the rest
   * `captcha_required`); a right one reads the failures again and is asked if they reached the risk.
   */
  async checkPassword(c: Context, email: string, password: string, captcha?: { token: string | undefined }): Promise<UserDoc | null> {
    const ip = clientIp(c, this.config.server.trustProxy);
    const before = await this.loginLimit.check(email, ip);
    const judged = captcha && this.captcha.enabled && this.captcha.risky(before);
    let solved = false;
    let user: UserDoc | null;
    try {
      if (judged) {
        const failures = await this.loginLimit.failures(email, ip);
        if (this.captcha.risky(failures)) {
          await this.captcha.require(c, failures, captcha.token);
          solved = true;
        }
      }
      user = await this.users.checkPassword(email, password);
    } catch (err) {
      await this.loginLimit.release(email, ip).catch(() => {});
      throw err;
    }
    if (!user) {
      const failedBefore = await this.loginLimit.fail(email, ip);
      // Checked, and counted: a refusal here says nothing of the password.
      if (captcha && !solved) await this.captcha.require(c, failedBefore, captcha.token);
      return null;
    }
    if (judged && !solved) {
      try {
        await this.captcha.require(c, await this.loginLimit.failures(email, ip), captcha.token);
      } catch (err) {
        await this.loginLimit.release(email, ip).catch(() => {}); // a right password is no failure
        throw err;
      }
    }
    await this.loginLimit.succeed(email, ip);
    // "This wasn't me" (CONTRACT 14) locks the password itself: every route that checks one refuses it.
    if (user?.passwordResetRequired) throw passwordResetRequired();
    return user;
  }

  /** Where a new session comes from, for its owner's list of sessions (`GET /auth/sessions`). */
  private origin(c: Context): SessionOrigin {
    return requestOrigin(c, this.config.server.trustProxy);
  }

  /** Runs when sessions end (logout, logout-all, hard cap, found expired), e.g. to delete token blobs; gets each `sid`. */
  onSessionEnd(listener: (sid: string) => Promise<void>): void {
    this.sessions.onEnd(async (hashes) => {
      for (const sid of hashes) await listener(sid);
    });
  }

  /** Runs when live sessions change (admin status), e.g. to refresh what sockets know; gets each `sid`. */
  onSessionChange(listener: (sid: string) => Promise<void>): void {
    this.sessions.onChange(async (hashes) => {
      for (const sid of hashes) await listener(sid);
    });
  }

  /** Logout: ends the session behind a cookie value, if it exists. */
  async endSession(id: string): Promise<void> {
    await this.sessions.destroy(id);
  }

  /** Ends every session of a user, except `keep` (a session hash); each one ended is a `session.revoked` record. */
  async endAllSessions(userId: string, cause: RevokeCause, keep?: string): Promise<void> {
    const ended = await this.sessions.destroyAll(userId, keep);
    for (const hash of ended) {
      await this.audit.record(cause.c ?? null, { type: 'session.revoked', ...(cause.actor ? { actor: cause.actor } : {}), subject: { userId }, sessionId: publicSessionId(hash), details: { reason: cause.reason } });
    }
  }

  /** `POST /auth/logout-all`: a lifecycle event (pending second steps, links, challenges die), then every session ends. */
  async logoutEverywhere(userId: string, c: Context<AppEnv> | null = null): Promise<void> {
    try {
      await this.users.advanceEpoch(userId);
    } catch (err) {
      // A user removed from the database behind svc's back: nothing pending to kill, sessions still end.
      if ((err as AppError).code !== 'not_found') throw err;
    }
    await this.endAllSessions(userId, { reason: 'logout_all', c });
  }

  /**
   * Ends the ways in kept outside the user document (identities, passkeys) and every session. A claim
   * and a deletion call it after their own database write; a way in added later belongs here (or in
   * `WAYS_IN_IN_DOC`), so neither can forget it.
   */
  private async endWaysInOutsideDoc(userId: string, cause: RevokeCause): Promise<void> {
    await this.accounts.unlinkAll(userId);
    await this.passkeys.removeAll(userId);
    await this.revokeApiKeys(userId, cause);
    await this.endAllSessions(userId, cause);
  }

  /**
   * Revokes a user's API keys, every one or those holding `scope` (a demotion: `auth:admin`), with one
   * `api_key.revoked` record each. A reset, a claim, `not_me` and a deletion revoke all (CONTRACT 15).
   */
  async revokeApiKeys(userId: string, cause: RevokeCause, scope?: string): Promise<void> {
    for (const keyId of await this.apiKeys.revokeAll(userId, scope)) {
      await this.audit.record(cause.c ?? null, { type: 'api_key.revoked', ...(cause.actor ? { actor: cause.actor } : {}), subject: { userId }, details: { keyId, reason: cause.reason } });
    }
  }

  /**
   * A claim (CONTRACT 5): the verified owner of an email takes over a user made from an unverified
   * claim of it. Afterwards the account has exactly one way in, the claiming identity (linked by the
   * caller): the password, TOTP and its recovery codes, every other identity and every passkey go,
   * every session ends, and the epoch moves, so second steps, pending links and flows started before
   * the claim are dead. The database first, then the rest (see `login`).
   */
  async claim(user: UserDoc, c: Context<AppEnv> | null = null): Promise<void> {
    this.logger.warn({ userId: user._id, unlinked: user.oauthAccounts.map((a) => a.provider) }, 'a verified email claimed a user made from an unverified one: every other way in is removed and its sessions end');
    await this.users.advanceEpoch(user._id, { $set: { email_verified: true, oauthAccounts: [] }, $unset: WAYS_IN_IN_DOC });
    await this.endWaysInOutsideDoc(user._id, { reason: 'claim', c, actor: { type: 'system' } });
  }

  /**
   * Applies a user patch and its session effects: a new password ends other sessions, admin changes
   * apply at once. The database changes first, the sessions after (see `login`). `own`: the session
   * to keep (a change of one's own), and the epoch a credential was checked at (write only then).
   */
  async updateUser(id: string, patch: UserPatch, own?: { keepSessionHash?: string; epoch?: number }, c: Context<AppEnv> | null = null): Promise<UserDoc> {
    const before = await this.users.get(id);
    if (patch.password !== undefined) await this.breachedPasswords.check(patch.password);
    const { isAdmin: admin, ...rest } = patch;
    if (admin === false && isAdmin(before)) await this.users.demote(id);
    // Whenever the tag is off, not only when this request removed it: a demotion cut short is finished by its retry.
    if (admin === false) await this.revokeApiKeys(id, { reason: 'admin', c, actor: adminActor(c) }, ADMIN_SCOPE);
    const user = await this.users.update(id, admin === true ? patch : rest, own?.epoch);
    if (patch.password !== undefined) {
      // Another's password: an admin's doing (the admin API), with its own revoke reason.
      const byAdmin = c?.get('authUser')?.userId !== id;
      const by = byAdmin ? { actor: adminActor(c) } : {};
      await this.audit.record(c, { type: 'password.changed', ...by, subject: { userId: id, email: user.email } });
      await this.endAllSessions(id, { reason: byAdmin ? 'admin' : 'password_changed', c, ...by }, own?.keepSessionHash);
      this.email.notify(user, 'passwordChanged');
    }
    if (isAdmin(before) !== isAdmin(user)) await this.refreshSessions(id);
    return user;
  }

  /**
   * Writes what the user's sessions carry of the user (admin status, TOTP on) as the database says
   * now, after a change to either. Two changes at once (a demotion and a TOTP confirm) each rewrite
   * every session from what they read: the one that read first could write last, and a demoted
   * admin's sessions kept admin rights (3 of 60 rounds on two instances). So after writing, the user
   * is read again, and a change that came meanwhile is written too: the last rewrite is never stale.
   */
  async refreshSessions(userId: string): Promise<void> {
    for (let round = 0; round < 3; round++) {
      const user = await this.users.findById(userId);
      if (!user) return;
      const carried = { isAdmin: isAdmin(user), totp: totpEnabled(user) };
      await this.sessions.rewrite(userId, carried);
      const now = await this.users.findById(userId);
      if (!now || (isAdmin(now) === carried.isAdmin && totpEnabled(now) === carried.totp)) return;
    }
  }

  /**
   * Deletes a user: never the last admin; sessions end before (a store outage stops here, before the
   * user is gone) and again after (logins that raced the deletion).
   */
  async deleteUser(id: string, c: Context<AppEnv> | null = null): Promise<void> {
    const user = await this.users.get(id);
    if (isAdmin(user)) await this.users.demote(id);
    await this.users.advanceEpoch(id);
    const cause: RevokeCause = { reason: 'user_deleted', c, actor: adminActor(c) };
    await this.endAllSessions(id, cause);
    await this.revokeApiKeys(id, cause);
    await this.users.delete(id);
    await this.endWaysInOutsideDoc(id, cause);
  }

  /**
   * Route hook for what adds a lasting way in (CONTRACT 10, step-up): the session must have proved
   * who it is within `auth.session.freshAge` seconds (a login, or `POST /auth/reauthenticate`), so a
   * stolen cookie alone cannot add a passkey, TOTP or an identity. Else 403 `reauthentication_required`.
   * Usage: `onRequest: [auth.authenticate(), auth.requireFresh()]`.
   */
  requireFresh(): MiddlewareHandler<AppEnv> {
    return async (c, next) => {
      await this.assertFresh(c);
      await next();
    };
  }

  /** `requireFresh` inside a handler, for a route that needs step-up only for some bodies (an admin granting admin). */
  async assertFresh(c: Context<AppEnv>): Promise<void> {
    if (c.get('apiKey')) throw apiKeyNotAllowed('This needs a session that proved who it is recently (step-up): an API key cannot');
    const session = c.get('session');
    if (!session) throw unauthenticatedError(c);
    if (Date.now() - (await this.sessions.authenticatedAt(session)) > this.config.auth.session.freshAge * 1000) {
      throw new AppError(403, 'reauthentication_required', 'Confirm it is you first: POST /auth/reauthenticate with your password, a TOTP code or a passkey');
    }
  }

  /**
   * Global hook: reads the session cookie and sets `authUser` (one store round trip, or none from
   * the local cache, when this hook and what follows it answer synchronously), and `can`. Never
   * rejects a request by itself; `authenticate` does.
   */
  readonly sessionHook: SyncAwareLayer<AppEnv> = syncAwareLayer((c: Context<AppEnv>, next: () => unknown) => {
    c.set('can', (permission) => this.can(c, permission));
    const key = bearerApiKey(requestHeader(c, 'authorization'));
    if (key !== undefined) return this.useApiKey(c, key, next); // the key wins: cookies sent along are ignored
    const id = readCookie(c, this.cookieName);
    if (!id) return next();
    const looked = laneKey(c);
    const lookedUp = looked && this.lookedUp.get(looked);
    if (lookedUp) {
      if (lookedUp.failed) throw lookedUp.error; // the store's failure, answered (503) without waiting for it twice
      return next();
    }
    let found: ReturnType<typeof this.sessions.lookup>;
    try {
      found = this.sessions.lookup(id);
    } catch (err) {
      return this.lookupFailed(c, err, next);
    }
    if (isPending(found)) {
      return found.then(
        (session) => {
          this.useSession(c, id, session);
          return next();
        },
        (err: unknown) => this.lookupFailed(c, err, next),
      );
    }
    this.useSession(c, id, found);
    return next();
  });

  /**
   * The store failed to look the session up: 503 (the error handler's answer), except for `GET /health`,
   * which reports the store itself (`"store":"down"`, CONTRACT section 1) also to a probe that carries a
   * cookie (a browser, a proxy that forwards one); it needs no caller.
   */
  private lookupFailed(c: Context<AppEnv>, err: unknown, next: () => unknown): unknown {
    if (c.req.path === '/health') return next();
    throw err;
  }

  /** A request with an API key (CONTRACT 15): the same `authUser`, with `provider: "api_key"` and the key's scopes. */
  private useApiKey(c: Context<AppEnv>, key: string, next: () => unknown): Promise<unknown> {
    return this.apiKeys.authenticate(key, () => clientIp(c, this.config.server.trustProxy)).then((entry) => {
      c.set('authUser', entry.user);
      c.set('apiKey', entry.caller);
      return next();
    });
  }

  /** What a request learns from its session: the caller, the session, and the refreshed cookie. */
  private useSession(c: Context<AppEnv>, id: string, found: LookedUp | null): void {
    if (!found) return;
    const { session } = found;
    c.set('authUser', { userId: session.userId, isAdmin: session.isAdmin, provider: session.provider });
    c.set('session', session);
    const refreshed = this.refreshedCookie(id, found);
    if (refreshed !== null) {
      presetHeader(c, 'Set-Cookie', refreshed);
      c.set('cookieRefreshed', true);
    }
  }

  /** The `Set-Cookie` value that renews the session cookie after this lookup (sliding sessions), or null. */
  refreshedCookie(id: string, found: LookedUp): string | null {
    const maxAge = this.sessions.cookieRefresh(found);
    return maxAge === null ? null : this.sessionCookie.refreshed(id, maxAge);
  }

  /**
   * Node requests whose session cookie `GET /auth/session`'s lane (routes/auth/session.ts) already
   * looked up before it handed the request to the app: when it started (for the access log), and
   * either no session or the store's failure. The session hook does not ask the store a second time
   * (with a hung store, that was a second command timeout before the 503).
   */
  readonly lookedUp = new WeakMap<object, { started: number; failed: boolean; error?: unknown }>();

  /**
   * Route hook: 401 `unauthenticated` without a session, 403 `forbidden` for a non-admin when
   * `{ admin: true }`. API keys (CONTRACT 15) pass only with `scopes` (`[]`: any key) or `admin` (the
   * key needs `auth:admin`): 403 `insufficient_scope` for a key lacking one, `api_key_not_allowed` where
   * the route takes no keys. Usage: `onRequest: instance.auth.authenticate({ admin: true })`,
   * `instance.auth.authenticate({ scopes: ['svc__todo:read'] })`.
   */
  authenticate(opts: AuthenticateOptions = {}): MiddlewareHandler<AppEnv> {
    // The scopes a key needs here: the route's own, and `auth:admin` for admin routes (CONTRACT 15).
    const scopes = opts.scopes || opts.admin ? [...new Set([...(opts.scopes ?? []), ...(opts.admin ? [ADMIN_SCOPE] : [])])] : undefined;
    if (opts.scopes) this.apiKeys.declare(opts.scopes);
    // Not async: nothing to wait for before `next`, whose answer it passes on as it comes.
    const authenticate: SyncAwareLayer<AppEnv> = (c, next) => {
      const user = c.get('authUser');
      if (!user) throw unauthenticatedError(c);
      if (user.apiKey) {
        if (scopes) checkScopes(c, scopes);
        else if (!c.get('apiKeyAccepted')) throw apiKeyNotAllowed();
      }
      if (opts.admin && !user.isAdmin) throw forbidden('This needs an administrator');
      return next();
    };
    const layer = syncAwareLayer(authenticate);
    return (scopes ? acceptsApiKeys(layer, scopes) : layer) as MiddlewareHandler<AppEnv>;
  }

  /**
   * Route hook: a session, or a work-session guest (`x-work-session-id`) whose work session grants
   * `pluginKey`; guests may only read. Usage: `onRequest: instance.auth.authenticatedOrWorksession('svc__todo')`.
   */
  authenticatedOrWorksession(pluginKey: string): MiddlewareHandler<AppEnv> {
    return this.workSessions.authenticatedOrWorksession(pluginKey, unauthenticatedError);
  }

  /**
   * Writes `settings.<integration>` of a user: the one user field plugins own (core never writes it).
   * `integration` is the plugin's key; `undefined` removes the entry.
   */
  async setUserSettings(userId: string, integration: string, value: unknown): Promise<void> {
    if (!/^[a-z0-9_]+$/.test(integration)) throw new Error(`settings key "${integration}" must be a plugin key`);
    const field = `settings.${integration}`;
    const update = value === undefined ? { $unset: { [field]: true as const } } : { $set: { [field]: value } };
    if (!(await this.users.users.updateOne({ _id: userId }, update))) throw new AppError(404, 'not_found', 'No user with this id');
  }

  /** Adds a resolver to the `can()` chain; resolvers run in registration order. */
  registerPermissionResolver(resolver: PermissionResolver): void {
    this.resolvers.push(resolver);
  }

  private async can(c: Context<AppEnv>, permission: string): Promise<boolean> {
    for (const resolve of this.resolvers) {
      const answer = await resolve(permission, c);
      if (answer !== undefined) return answer;
    }
    return c.get('authUser')?.isAdmin ?? false;
  }

  async close(): Promise<void> {
    await this.webhooks.close();
    this.audit.close();
    await this.mailer.close();
    await this.sessions.close();
  }
}
