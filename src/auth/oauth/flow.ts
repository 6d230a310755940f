import type { OAuth2Tokens } from 'arctic';
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { Config } from '../../config/load.ts';
import { DuplicateKeyError } from '../../db/index.ts';
import type { AuditLog } from '../../audit/log.ts';
import type { AppEnv } from '../../http/env.ts';
import type { Logger } from '../../logger.ts';
import type { Stores } from '../../store/index.ts';
import type { FlowCookies } from '../flow-cookies.ts';
import type { PendingMfa } from '../mfa.ts';
import type { Session, SessionService } from '../sessions.ts';
import { totpEnabled } from '../totp.ts';
import { epochOf, isAdmin, ownsEmail, type UserDoc, type UserService } from '../users.ts';
import type { AccountLinks } from './accounts.ts';
import { arctic } from './arctic.ts';
import { OAuthFlowError, providerClient } from './client.ts';
import { cleanProfile, MAX_ACCOUNT_ID_LENGTH, personName, type Profile } from './profile.ts';
import { emailVerifiedBy, type ProviderDoc, type ProviderService } from './providers.ts';
import { safeReturnPath } from './return-to.ts';
import { sealedRecord } from './secrets.ts';
import { sha256hex } from '../hash.ts';

export const STATE_COOKIE = 'svc_oauth_state';
export const RETURN_TO_COOKIE = 'svc_oauth_return_to';
export const RETURN_TO_CSRF_COOKIE = 'svc_oauth_rt_csrf';
/** Where an OAuth login of a user with TOTP on goes for its code (the frontend's login page). */
export const MFA_RETURN_PATH = '/login?mfa=totp';
/** Binds a pending link to the browser that ran its OAuth flow (security review, finding 2). */
export const PENDING_LINK_COOKIE = 'svc_pending_link';
const STATE_TTL = 600;
const PENDING_LINK_TTL = 900;
/** A form_post callback's fields wait this long for the browser's GET that follows the 303. */
const FORM_POST_TTL = 120;

/** The fields a `response_mode=form_post` callback carries (Apple: `code`, `state`, `user`, or `error`). */
export interface FormPostFields {
  state: string;
  code?: string;
  error?: string;
  user?: string;
  iss?: string;
}

/** What the store keeps per started login, under `oauth-state:<sha256hex(state)>`. */
interface StateRecord {
  providerId: string;
  codeVerifier: string | null;
  /** OpenID providers: the nonce the id_token must carry (records of older versions lack it). */
  nonce?: string | null;
  returnTo: string;
  /** Connecting an identity to this signed-in user (CONTRACT 10) rather than logging in. */
  linkUserId?: string;
  /** That user's credentials epoch when the link flow started: a lifecycle event since ends it. */
  linkEpoch?: number;
}

/**
 * What the store keeps under `pending-link:<sha256hex(cookie value)>`: one record per OAuth flow, so
 * one flow cannot overwrite another's, readable only with the cookie of the browser that ran it.
 */
export interface PendingLink {
  /** The existing user the identity claims to be; only this user's session may settle it. */
  userId: string;
  /** That user's credentials epoch when the link was stored: a lifecycle event since ends it. */
  epoch: number;
  provider: string;
  providerAccountId: string;
  email: string;
  /** The provider's display name of the identity, so the person can recognise it (or not). */
  name: string | null;
  expiresAt: string;
}

/** SPEC.md "Login handlers": what a plugin's handler receives after a successful callback. */
export interface OAuthLoginContext {
  providerId: string;
  userId: string;
  accessToken: string;
  refreshToken: string | null;
  expiresAt: string | null;
  profile: Profile;
  userInfo?: Record<string, unknown>;
  sid?: string;
  providerTokenNamespace?: string;
}
export type OAuthLoginHandler = (ctx: OAuthLoginContext) => void | Promise<void>;

/** The provider token blob (SPEC.md): core writes these; plugins may add fields. */
export interface ProviderTokenBlob {
  access: string;
  refresh: string | null;
  expiresAt: string | null;
  [field: string]: unknown;
}

const optional = <T>(read: () => T): T | null => {
  try {
    return read();
  } catch {
    return null;
  }
};

/**
 * The server-side OAuth flow (SPEC.md "Server-side OAuth flow", CONTRACT section 5): state and PKCE
 * verifier in the store (single use, 600 s, bound to the browser by a cookie), the code exchange and
 * the user-info call on the server, the four-step account resolution, and the session.
 */
/**
 * What the flow uses of `Auth`, which creates it and passes itself: declared here, not imported, so
 * that auth/index.ts and this module do not import each other.
 */
export interface FlowAuth {
  readonly flowCookies: FlowCookies;
  readonly users: UserService;
  readonly sessions: SessionService;
  startSecondStep(c: Context, pending: PendingMfa): Promise<void>;
  login(c: Context<AppEnv>, user: UserDoc, provider: string, stillValid: (fresh: UserDoc) => boolean): Promise<{ session: Session; user: UserDoc } | null>;
  claim(user: UserDoc, c?: Context<AppEnv> | null): Promise<void>;
  readonly audit: AuditLog;
}

export class OAuthFlow {
  private readonly handlers = new Map<string, OAuthLoginHandler[]>();

  constructor(
    private readonly config: Config,
    private readonly stores: Stores,
    private readonly providers: ProviderService,
    private readonly accounts: AccountLinks,
    private readonly auth: FlowAuth,
    private readonly logger: Logger,
  ) {}

  private get prefix() {
    return this.config.auth.store.keyPrefix;
  }

  private get stateStore() {
    return this.stores.forRole('oauthState');
  }

  private cookie(c: Context, name: string, value: string, maxAge: number, sameSite: 'Strict' | 'Lax') {
    this.auth.flowCookies.set(c, name, value, maxAge, sameSite);
  }

  private clearCookie(c: Context, name: string) {
    this.auth.flowCookies.clear(c, name);
  }

  private readCookie(c: Context, name: string) {
    return this.auth.flowCookies.read(c, name);
  }

  registerLoginHandler(providerId: string, handler: OAuthLoginHandler): void {
    this.handlers.set(providerId, [...(this.handlers.get(providerId) ?? []), handler]);
  }

  /** `GET /auth/oauth/return-to/csrf`: a token in JSON and in a cookie (double submit). */
  issueReturnToCsrf(c: Context): string {
    const token = randomBytes(24).toString('base64url');
    this.cookie(c, RETURN_TO_CSRF_COOKIE, token, STATE_TTL, 'Strict');
    return token;
  }

  /** `POST /auth/oauth/return-to`: remembers where to go after login (sanitized) for 10 minutes. */
  storeReturnTo(c: Context, returnTo: string): void {
    this.cookie(c, RETURN_TO_COOKIE, safeReturnPath(returnTo), STATE_TTL, 'Lax');
  }

  /**
   * `GET /auth/oauth/:provider`: the authorize URL to redirect to. With `linkUserId`
   * (`POST /auth/oauth/:provider/link`) the callback connects the identity to that user instead of
   * logging in; the state stays bound to this browser (cookie) and to that user (state record).
   */
  async start(c: Context, providerId: string, link?: UserDoc): Promise<string> {
    const doc = await this.providers.find(providerId);
    if (!doc?.enabled) throw new OAuthFlowError('provider_not_found', `provider "${providerId}" is not configured or not enabled`);
    const client = await providerClient(doc, this.providers.clientSecret(doc), this.providers.issuers);
    const { generateState, generateCodeVerifier } = arctic();
    const state = generateState();
    const codeVerifier = client.pkce ? generateCodeVerifier() : null;
    // Same generator as the state: 32 random bytes, base64url.
    const nonce = client.nonce ? generateState() : null;
    // Built before anything is stored: an OpenID provider whose discovery fails leaves no record behind.
    let url: URL;
    try {
      url = await client.authorizationUrl(state, codeVerifier, nonce);
    } catch (err) {
      throw new OAuthFlowError('server_error', `the provider's authorize URL cannot be built: ${(err as Error).message}`, { cause: err });
    }
    const returnTo = safeReturnPath(this.readCookie(c, RETURN_TO_COOKIE));
    const record: StateRecord = { providerId, codeVerifier, nonce, returnTo, ...(link ? { linkUserId: link._id, linkEpoch: epochOf(link) } : {}) };
    await this.stateStore.set(`${this.prefix}oauth-state:${sha256hex(state)}`, JSON.stringify(record), { ttl: STATE_TTL });
    // Lax: the callback is a top-level navigation coming back from the provider's site.
    this.cookie(c, STATE_COOKIE, state, STATE_TTL, 'Lax');
    this.clearCookie(c, RETURN_TO_COOKIE);
    return url.toString();
  }

  /**
   * `POST /auth/oauth/:provider/callback` (`response_mode=form_post`, Sign in with Apple): the
   * provider's page posts the result cross-site, so the browser leaves out the SameSite=Lax state
   * cookie and the POST alone cannot tell whose login this is. It changes nothing: it keeps the fields
   * for 120 s under the hash of their state (only for a state svc issued) and answers the redirect to
   * the same callback as a GET with only `?state=`. That GET is a top-level navigation, which carries
   * the Lax cookie, and completes the login exactly like a query-mode callback. The code and the
   * user's name never appear in a URL, and the state cookie never needs `SameSite=None`.
   */
  async formPost(fields: FormPostFields): Promise<string> {
    const key = sha256hex(fields.state);
    if (await this.stateStore.get(`${this.prefix}oauth-state:${key}`)) {
      await this.stateStore.set(`${this.prefix}oauth-form-post:${key}`, JSON.stringify(fields), { ttl: FORM_POST_TTL });
    }
    // Query-only relative reference: the same path, whatever prefix a proxy put in front (`/api`).
    return `?${new URLSearchParams({ state: fields.state })}`;
  }

  /** The callback's parameters: its query, or the fields a form_post callback left for this state. */
  private async callbackParams(c: Context<AppEnv>): Promise<URLSearchParams> {
    const params = new URL(c.req.url).searchParams;
    const state = params.get('state');
    if (!state || params.has('code') || params.has('error')) return params;
    const posted = await this.stateStore.getDel(`${this.prefix}oauth-form-post:${sha256hex(state)}`);
    return posted ? new URLSearchParams(JSON.parse(posted) as Record<string, string>) : params;
  }

  /** `GET /auth/oauth/:provider/callback`: returns the path to redirect to; throws OAuthFlowError. */
  async callback(c: Context<AppEnv>, providerId: string): Promise<string> {
    const params = await this.callbackParams(c);
    const [state, code, error] = ['state', 'code', 'error'].map((name) => params.get(name) ?? undefined);
    const bound = this.readCookie(c, STATE_COOKIE);
    this.clearCookie(c, STATE_COOKIE);
    // Consume the state first, whatever happens next: a state is good for one callback only.
    const raw = state ? await this.stateStore.getDel(`${this.prefix}oauth-state:${sha256hex(state)}`) : null;
    // An unknown or disabled provider says so first, as its start does (whatever state came along).
    const doc = await this.providers.find(providerId);
    if (!doc?.enabled) throw new OAuthFlowError('provider_not_found', `provider "${providerId}" is not configured or not enabled`);
    if (error) throw new OAuthFlowError('access_denied', `the provider answered error=${error.slice(0, 100)}`);
    if (!raw || !state) throw new OAuthFlowError('invalid_state', 'state is missing, unknown, expired or already used');
    if (bound !== state) throw new OAuthFlowError('invalid_state', 'state is not bound to this browser');
    const record = JSON.parse(raw) as StateRecord;
    if (record.providerId !== providerId) throw new OAuthFlowError('invalid_state', 'state belongs to another provider');

    const client = await providerClient(doc, this.providers.clientSecret(doc), this.providers.issuers);
    if (!code) throw new OAuthFlowError('token_exchange_failed', 'the callback has no code');
    let tokens: OAuth2Tokens;
    try {
      // OpenID providers verify the id_token here (signature, iss, aud, exp, nonce): a failure is a failed exchange.
      tokens = await client.exchange(code, record.codeVerifier, { nonce: record.nonce ?? null, params });
    } catch (err) {
      throw new OAuthFlowError('token_exchange_failed', `code exchange failed: ${(err as Error).message}`, { cause: err });
    }
    let info: { raw: Record<string, unknown>; profile: Profile };
    try {
      info = await client.userInfo(tokens);
    } catch (err) {
      throw new OAuthFlowError('userinfo_failed', `user info failed: ${(err as Error).message}`, { cause: err });
    }
    const profile = cleanProfile(info.profile);
    if (!profile) throw new OAuthFlowError('userinfo_failed', `the provider's account id is longer than ${MAX_ACCOUNT_ID_LENGTH} characters`);
    if (record.linkUserId) return this.connect(c, record.linkUserId, record.linkEpoch ?? -1, providerId, profile, record.returnTo);
    const accountId = profile.id ?? profile.email?.toLowerCase();
    if (!accountId) throw new OAuthFlowError('no_email', 'the provider gave no email');
    const identity = { ...profile, emailVerified: emailVerifiedBy(doc, profile) };

    // A login that raced an account change (the identity unlinked, the user deleted or demoted)
    // resolves again from the fresh state (Auth.login).
    let started = null;
    for (let attempt = 0; attempt < 2 && !started; attempt++) {
      const user = await this.resolveUser(c, doc, identity, accountId);
      if (totpEnabled(user) && this.config.auth.totp.oauth) {
        // The provider proved one factor; the login page asks for the code (POST /auth/login/totp),
        // which then answers the stored return path. No session, token blob or handler before that.
        await this.auth.startSecondStep(c, { userId: user._id, epoch: epochOf(user), provider: providerId, returnTo: safeReturnPath(record.returnTo) });
        return MFA_RETURN_PATH;
      }
      started = await this.auth.login(c, user, providerId, (fresh) => fresh.oauthAccounts.some((a) => a.provider === providerId && a.providerAccountId === accountId));
    }
    if (!started) throw new OAuthFlowError('server_error', 'the account changed during the login');
    const { session, user } = started;

    const access = tokens.accessToken();
    const refresh = tokens.hasRefreshToken() ? optional(() => tokens.refreshToken()) : null;
    const expiresAt = optional(() => tokens.accessTokenExpiresAt().toISOString());
    const persist = doc.config.persistProviderTokens === true && doc.config.providerTokenNamespace;
    if (persist) {
      await this.setTokenBlob(doc.config.providerTokenNamespace!, session.hash, { access, refresh, expiresAt }, doc.config.providerTokenStoreInstance);
    }
    for (const handler of this.handlers.get(providerId) ?? []) {
      try {
        await handler({
          providerId,
          userId: user._id,
          accessToken: access,
          refreshToken: refresh,
          expiresAt,
          profile,
          userInfo: info.raw,
          ...(persist ? { sid: session.hash, providerTokenNamespace: doc.config.providerTokenNamespace } : {}),
        });
      } catch (err) {
        // A plugin's failure does not undo a valid login; it is logged for the plugin's author.
        this.logger.error({ providerId, err: (err as Error).message }, 'OAuth login handler failed');
      }
    }
    return safeReturnPath(record.returnTo);
  }

  /**
   * SPEC.md's account resolution order, safe against concurrent first logins, with CONTRACT
   * section 5's linking rule: a verified identity is linked only to a user who owns the email
   * (verified, or made by an admin, the CLI or the bootstrap). A user made from an UNVERIFIED
   * provider email is claimed by the verified owner instead: its other identities are unlinked and
   * its sessions end, so an unverified claim never shares an account with its owner (finding 1).
   */
  private async resolveUser(c: Context<AppEnv>, doc: ProviderDoc, profile: Profile, accountId: string, retry = true): Promise<UserDoc> {
    const provider = doc.providerId;
    const linked = await this.accounts.findUser(provider, accountId);
    if (linked) return linked; // step 1 (also identities connected without an email)
    if (!profile.email) throw new OAuthFlowError('no_email', 'the provider gave no email');
    const existing = await this.auth.users.findByEmail(profile.email);
    try {
      if (existing && profile.emailVerified && isAdmin(existing)) {
        // Never into an administrator by email alone: admins connect identities themselves
        // (`POST /auth/oauth/:provider/link`), so a provider's word is never an admin's password.
        throw new OAuthFlowError('account_exists', 'the email belongs to an administrator, who links identities explicitly');
      }
      if (existing && profile.emailVerified) {
        // step 2: a verified email proves ownership of the existing account
        if (!ownsEmail(existing)) await this.auth.claim(existing, c);
        if (!(await this.accounts.linkIfFree(existing._id, provider, accountId, profile.email))) throw new DuplicateKeyError('svc__core-oauthaccount');
        await this.linked(c, existing, provider);
        return (await this.auth.users.findById(existing._id)) ?? existing;
      }
      if (existing) {
        // step 3: an unverified email must not take over an account; its owner may confirm later,
        // in this browser, while logged in as that user
        await this.storePendingLink(c, { userId: existing._id, epoch: epochOf(existing), provider, providerAccountId: accountId, email: profile.email, name: profile.name ?? null });
        throw new OAuthFlowError('account_exists', 'the email belongs to an existing account and is not verified');
      }
      // step 4: a new user; with an unverified email it can never become a takeover target (step 2)
      const user = await this.auth.users.create({ email: profile.email, ...personName(profile), email_verified: profile.emailVerified, createdVia: 'oauth' });
      await this.accounts.link(user._id, provider, accountId, profile.email);
      await this.auth.audit.record(c, { type: 'user.created', actor: { type: 'anonymous' }, subject: { userId: user._id, email: user.email }, details: { via: 'oauth', providerId: provider } });
      await this.linked(c, user, provider);
      return (await this.auth.users.findById(user._id)) ?? user;
    } catch (err) {
      // Two first logins raced (same email or same account): the other one won; resolve again.
      if (retry && (err instanceof DuplicateKeyError || (err as { code?: string }).code === 'user_exists')) {
        return this.resolveUser(c, doc, profile, accountId, false);
      }
      throw err;
    }
  }

  /**
   * Connects an identity to the user who started the flow, whatever its email says (none needed):
   * `identity_in_use` when another user holds it. A lifecycle event of that user since the flow
   * started (a claim, logout-all, a reset) ends the flow; one that races the write undoes it.
   */
  private async connect(c: Context<AppEnv>, userId: string, epoch: number, providerId: string, profile: Profile, returnTo: string): Promise<string> {
    const accountId = profile.id ?? profile.email?.toLowerCase();
    if (!accountId) throw new OAuthFlowError('userinfo_failed', 'the provider gave no account id');
    const user = await this.auth.users.findById(userId);
    if (!user || epochOf(user) !== epoch) throw new OAuthFlowError('invalid_state', 'the account that started this link changed or is gone');
    await this.linkAtEpoch(c, user, providerId, accountId, profile.email ?? null, new OAuthFlowError('identity_in_use', 'this identity belongs to another user'));
    return safeReturnPath(returnTo);
  }

  /**
   * Links an identity to `user` while its epoch is the one read: the user is read again after the
   * write, and a lifecycle event in between (whose own removal of identities may have run before
   * this write) has the link undone. `taken` is thrown when another user holds the identity.
   */
  private async linkAtEpoch(c: Context<AppEnv>, user: UserDoc, provider: string, providerAccountId: string, email: string | null, taken: Error): Promise<void> {
    if (!(await this.accounts.linkIfFree(user._id, provider, providerAccountId, email))) throw taken;
    const fresh = await this.auth.users.findById(user._id);
    if (!fresh || epochOf(fresh) !== epochOf(user)) {
      await this.accounts.unlink(user._id, provider, providerAccountId);
      throw new OAuthFlowError('invalid_state', 'the account changed while the identity was linked');
    }
    await this.linked(c, user, provider);
  }

  /** The `oauth.linked` record: the user (actor and subject, whoever's flow it was) and the provider. */
  private linked(c: Context<AppEnv>, user: UserDoc, providerId: string): Promise<void> {
    return this.auth.audit.record(c, { type: 'oauth.linked', actor: { type: 'user', id: user._id }, subject: { userId: user._id, email: user.email }, details: { providerId } });
  }

  private pendingKey(bindingId: string) {
    return `${this.prefix}pending-link:${sha256hex(bindingId)}`;
  }

  private async storePendingLink(c: Context, link: Omit<PendingLink, 'expiresAt'>): Promise<void> {
    const bindingId = randomBytes(32).toString('base64url');
    const pending: PendingLink = { ...link, expiresAt: new Date(Date.now() + PENDING_LINK_TTL * 1000).toISOString() };
    await this.stores.forRole('sessions').set(this.pendingKey(bindingId), JSON.stringify(pending), { ttl: PENDING_LINK_TTL });
    // Lax: set on the callback, a top-level navigation back from the provider's site.
    this.cookie(c, PENDING_LINK_COOKIE, bindingId, PENDING_LINK_TTL, 'Lax');
  }

  /**
   * The pending link of this browser, when it is for the logged-in user and no lifecycle event of
   * that user came since it was stored; null otherwise.
   */
  async pendingLink(c: Context, userId: string): Promise<PendingLink | null> {
    const bindingId = this.readCookie(c, PENDING_LINK_COOKIE);
    if (!bindingId) return null;
    const raw = await this.stores.forRole('sessions').get(this.pendingKey(bindingId));
    const pending = raw ? (JSON.parse(raw) as PendingLink) : null;
    if (pending?.userId !== userId) return null;
    const user = await this.auth.users.findById(userId);
    return user && epochOf(user) === pending.epoch ? pending : null;
  }

  /** Confirms this browser's pending link of the logged-in owner; null when there is none. */
  async confirmLink(c: Context<AppEnv>, userId: string): Promise<PendingLink | null> {
    if (!(await this.pendingLink(c, userId))) return null;
    const raw = await this.stores.forRole('sessions').getDel(this.pendingKey(this.readCookie(c, PENDING_LINK_COOKIE)!));
    this.clearCookie(c, PENDING_LINK_COOKIE);
    if (!raw) return null; // settled by a concurrent request
    const pending = JSON.parse(raw) as PendingLink;
    const user = await this.auth.users.findById(userId);
    if (!user || epochOf(user) !== pending.epoch) return null;
    await this.linkAtEpoch(c, user, pending.provider, pending.providerAccountId, pending.email, new OAuthFlowError('account_exists', 'this OAuth account is already linked to another user'));
    return pending;
  }

  /** Declines (forgets) this browser's pending link of the logged-in owner. */
  async declineLink(c: Context, userId: string): Promise<void> {
    if (await this.pendingLink(c, userId)) await this.stores.forRole('sessions').del(this.pendingKey(this.readCookie(c, PENDING_LINK_COOKIE)!));
    this.clearCookie(c, PENDING_LINK_COOKIE);
  }

  // Provider token blobs: `{namespace}:oauth_tokens:{sid}` in the configured store instance.

  private tokenStore(instance?: string) {
    return instance ? this.stores.instance(instance) : this.stores.forRole('providerTokens');
  }

  private tokenKey(namespace: string, sid: string) {
    return `${namespace}:oauth_tokens:${sid}`;
  }

  /**
   * The blob of a live session; null when there is none or the session ended (its blob is deleted
   * then: a blob never outlives its session, even one that expired without a logout).
   */
  async getTokenBlob(namespace: string, sid: string, instance?: string): Promise<ProviderTokenBlob | null> {
    const raw = await this.tokenStore(instance).get(this.tokenKey(namespace, sid));
    if (raw === null) return null;
    if (!(await this.auth.sessions.isLive(sid))) {
      await this.deleteBlobsOfSession(sid);
      return null;
    }
    return JSON.parse(this.providers.secrets.open(raw, sealedRecord.tokenBlob(this.tokenKey(namespace, sid)))) as ProviderTokenBlob;
  }

  /**
   * Which blobs a session has (`[namespace, instance]` pairs), so logout finds them even after the
   * provider was deleted or stopped persisting tokens, and blobs that plugins wrote themselves.
   */
  private blobIndexKey(sid: string) {
    return `${this.prefix}oauth-token-blobs:${sid}`;
  }

  private blobIndexMember(namespace: string, instance?: string) {
    return JSON.stringify([namespace, instance ?? null]);
  }

  /**
   * Writes the blob of a live session, sealed with `SVC_SECRET_ENCRYPTION_KEY` (AES-256-GCM) when it
   * is set. It expires with the session's last possible moment (the hard cap when sliding), is
   * deleted when the session ends, and is refused for a session that already ended.
   */
  async setTokenBlob(namespace: string, sid: string, blob: ProviderTokenBlob, instance?: string): Promise<void> {
    const session = await this.auth.sessions.byHash(sid);
    if (!session) throw new Error('setProviderTokenBlob: the session has ended');
    const ttl = Math.ceil((this.auth.sessions.hardEnd(session) - Date.now()) / 1000);
    if (ttl <= 0) return;
    await this.stores.forRole('sessions').sAdd(this.blobIndexKey(sid), [this.blobIndexMember(namespace, instance)], ttl);
    await this.tokenStore(instance).set(this.tokenKey(namespace, sid), this.providers.secrets.seal(JSON.stringify(blob), sealedRecord.tokenBlob(this.tokenKey(namespace, sid))), { ttl });
  }

  async deleteTokenBlob(namespace: string, sid: string, instance?: string): Promise<void> {
    await this.tokenStore(instance).del(this.tokenKey(namespace, sid));
    await this.stores.forRole('sessions').sRem(this.blobIndexKey(sid), [this.blobIndexMember(namespace, instance)]);
  }

  /** Logout: deletes every blob the session has, and those of every provider that persists tokens. */
  async deleteBlobsOfSession(sid: string): Promise<void> {
    const targets = new Map<string, [string, string | undefined]>();
    for (const member of await this.stores.forRole('sessions').sMembers(this.blobIndexKey(sid))) {
      const [namespace, instance] = JSON.parse(member) as [string, string | null];
      targets.set(member, [namespace, instance ?? undefined]);
    }
    for (const doc of await this.providers.list()) {
      if (doc.config.persistProviderTokens && doc.config.providerTokenNamespace) {
        const { providerTokenNamespace: namespace, providerTokenStoreInstance: instance } = doc.config;
        targets.set(this.blobIndexMember(namespace, instance), [namespace, instance]);
      }
    }
    for (const [namespace, instance] of targets.values()) {
      let store;
      try {
        store = this.tokenStore(instance);
      } catch (err) {
        // A store instance that is no longer configured: its blobs are out of reach anyway.
        this.logger.warn({ namespace, instance, err: (err as Error).message }, 'cannot delete a provider token blob');
        continue;
      }
      await store.del(this.tokenKey(namespace, sid));
    }
    await this.stores.forRole('sessions').del(this.blobIndexKey(sid));
  }
}
