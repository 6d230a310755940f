/**
 * The built-in providers: one entry per provider class of arctic 3 (the OAuth client library).
 *
 * arctic builds authorize URLs and exchanges codes; it knows nothing about users. Each entry adds
 * what svc needs around the class: its constructor order, whether it does PKCE, the provider
 * `config` keys it needs, default scopes that return the user's id and email, and where the user's
 * identity comes from (a userinfo endpoint, the id_token, or a small custom fetch) with its
 * mapping to `Profile`. `emailVerified` is true only when the provider itself asserts it.
 *
 * The flow (client.ts) calls `createAuthorizationURL(state, verifier, scopes)` when `pkce` is not
 * `none`, else `createAuthorizationURL(state, scopes)`, and `validateAuthorizationCode(code[, verifier])`.
 * The few classes whose methods differ from that shape get an adapter on the instance (see `patch`).
 */
import { createPrivateKey } from 'node:crypto';
import type { OAuth2Tokens } from 'arctic';
import * as oauth from 'oauth4webapi';
import { arctic } from './arctic.ts';
import type { ArcticClient, CatalogEntry, ClientOptions, UserInfoSource } from './catalog-types.ts';
import { providerFetch } from './outbound.ts';
import { mapUserInfo, type Profile } from './profile.ts';

type Json = Record<string, unknown>;
type ArcticClass = new (...args: never[]) => ArcticClient;

// ---------------------------------------------------------------------------------------------
// JSON and profile helpers
// ---------------------------------------------------------------------------------------------

const obj = (value: unknown): Json => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {});
const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const str = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : typeof value === 'number' ? String(value) : undefined;
const joinName = (...parts: unknown[]): string | undefined => parts.map(str).filter(Boolean).join(' ') || undefined;

/** A `Profile` from loosely typed fields; no email means not verified. */
function profile(fields: { id?: unknown; email?: unknown; emailVerified?: boolean; name?: unknown; avatarUrl?: unknown }): Profile {
  const email = str(fields.email);
  return { id: str(fields.id), email, emailVerified: email !== undefined && fields.emailVerified === true, name: str(fields.name), avatarUrl: str(fields.avatarUrl) };
}

/** `config[key]` as a string; the admin API already refuses documents without the entry's `configKeys`. */
function need(config: Json, key: string): string {
  const value = config[key];
  if (typeof value !== 'string' || value === '') throw new Error(`provider config.${key} is required`);
  return value;
}

const trimSlash = (url: string): string => url.replace(/\/+$/, '');

const USERINFO_TIMEOUT_MS = 10_000;

interface CallInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

/** One JSON call with the access token, for `custom` sources. */
async function callRaw(http: typeof fetch, url: string, token: string, init: CallInit = {}): Promise<unknown> {
  const res = await http(url, {
    method: init.method ?? 'GET',
    headers: { Accept: 'application/json', Authorization: `Bearer ${token}`, ...init.headers },
    body: init.body,
    signal: AbortSignal.timeout(USERINFO_TIMEOUT_MS),
  });
  if (!res.ok) throw new Error(`${new URL(url).host} answered ${res.status}`);
  return res.json();
}
const call = async (http: typeof fetch, url: string, token: string, init?: CallInit): Promise<Json> => obj(await callRaw(http, url, token, init));

/** A GraphQL query (AniList, Linear, start.gg); throws on GraphQL errors. */
async function graphql(http: typeof fetch, url: string, token: string, query: string): Promise<Json> {
  const json = await call(http, url, token, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ query }) });
  if (list(json.errors).length > 0) throw new Error(`${new URL(url).host} GraphQL error: ${str(obj(list(json.errors)[0]).message) ?? 'unknown'}`);
  return obj(json.data);
}

/** The raw token response (arctic keeps it as `tokens.data`). */
const tokenData = (tokens: OAuth2Tokens): Json => obj(tokens.data);

// ---------------------------------------------------------------------------------------------
// Constructors and adapters
// ---------------------------------------------------------------------------------------------

const construct = (Class: ArcticClass, ...args: unknown[]): ArcticClient => new (Class as unknown as new (...a: unknown[]) => ArcticClient)(...args);

/** `new Class(clientId, clientSecret, redirectURI)`: most providers. */
const basic: CatalogEntry['create'] = (Class, o) => construct(Class, o.clientId, o.clientSecret, o.redirectUri);
/** Same, for classes whose `clientSecret` is `string | null` (public clients): no secret saved means null. */
const publicOk: CatalogEntry['create'] = (Class, o) => construct(Class, o.clientId, o.clientSecret || null, o.redirectUri);
/** `new Class(config[key], clientId, clientSecret | null, redirectURI)`: tenant, realm, domain or base URL first. */
const scoped =
  (key: string, secret: 'required' | 'nullable' = 'nullable'): CatalogEntry['create'] =>
  (Class, o) => {
    // arctic appends paths to URL keys: `https://sso/realms/x/` would become `.../x//protocol/...`.
    const value = need(o.config, key);
    const arg = /^https?:\/\//.test(value) ? trimSlash(value) : value;
    return construct(Class, arg, o.clientId, secret === 'nullable' ? o.clientSecret || null : o.clientSecret, o.redirectUri);
  };

type Method = (...args: unknown[]) => unknown;

/** Replaces one method on this instance only (the result is still an instance of the class). */
function patch(client: ArcticClient, key: keyof ArcticClient, wrap: (original: Method) => Method): ArcticClient {
  const original = (client[key] as unknown as Method).bind(client);
  Object.defineProperty(client, key, { value: wrap(original), configurable: true, writable: true });
  return client;
}

/**
 * App credentials of the tokens an instance returned, for user APIs that want them beside the token
 * (Twitch's and Tiltify's `Client-Id`, Etsy's `x-api-key`). Kept in memory with the tokens only.
 */
const appKeys = new WeakMap<object, string>();
const rememberAppKey = (client: ArcticClient, key: string): ArcticClient =>
  patch(client, 'validateAuthorizationCode', (original) => async (...args) => {
    const tokens = (await original(...args)) as OAuth2Tokens;
    appKeys.set(tokens, key);
    return tokens;
  });

/**
 * A code exchange with PKCE and the client secret in the form body (`client_secret_post`), for
 * providers that document only that (arctic's OAuth2Client sends HTTP Basic). oauth4webapi builds the
 * request and checks the answer.
 */
async function exchangeWithPostedSecret(tokenEndpoint: string, o: ClientOptions, code: string, verifier: string): Promise<OAuth2Tokens> {
  const as: oauth.AuthorizationServer = { issuer: new URL(tokenEndpoint).origin, token_endpoint: tokenEndpoint };
  const client: oauth.Client = { client_id: o.clientId };
  const params = oauth.validateAuthResponse(as, client, new URLSearchParams({ code }), oauth.skipStateCheck);
  const res = await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretPost(o.clientSecret), params, o.redirectUri, verifier, {
    [oauth.customFetch]: providerFetch,
    signal: AbortSignal.timeout(USERINFO_TIMEOUT_MS),
  });
  return new (arctic().OAuth2Tokens)(await oauth.processAuthorizationCodeResponse(as, client, res));
}

/** Apple's .p8 key (PEM or bare base64), kept in the provider document's write-only `clientSecret`. */
const pkcs8 = (key: string): Uint8Array => new Uint8Array(Buffer.from(key.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64'));
/** Apple signs its client-secret JWT with ES256: the .p8 key must be an EC P-256 private key in PKCS#8 (what `pkcs8` reads). */
function appleKeyProblem(secret: string): string | undefined {
  try {
    const key = createPrivateKey({ key: Buffer.from(pkcs8(secret)), format: 'der', type: 'pkcs8' });
    if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return undefined;
  } catch {
    // not PKCS#8 at all: the message below
  }
  return 'must be the contents of the .p8 key file (an EC P-256 private key, PEM) that Apple issued for the Key ID';
}

// ---------------------------------------------------------------------------------------------
// User-info sources
// ---------------------------------------------------------------------------------------------

/** An OpenID Connect userinfo endpoint read with the generic mapping (`sub`, `email`, `email_verified`, `name`, `picture`). */
const oidc = (url: string | ((config: Json) => string)): UserInfoSource => ({ kind: 'userinfo', url });
const userinfo = (url: string | ((config: Json) => string), map: (json: Json) => Profile, headers?: Record<string, string>, scheme?: string): UserInfoSource => ({
  kind: 'userinfo',
  url,
  map,
  ...(headers ? { headers } : {}),
  ...(scheme ? { scheme } : {}),
});
const custom = (fetchProfile: (tokens: OAuth2Tokens, config: Json, http: typeof fetch) => Promise<Json>, map: (raw: Json) => Profile): UserInfoSource => ({
  kind: 'custom',
  fetch: async (tokens, config, http) => {
    const raw = await fetchProfile(tokens, config, http);
    return { raw, profile: map(raw) };
  },
});
/** The identity is in the token response itself: no call. */
const fromTokens = (map: (data: Json) => Profile): UserInfoSource => custom(async (tokens) => tokenData(tokens), map);

const OIDC_SCOPES = ['openid', 'email', 'profile'];
/** Some APIs refuse requests without a descriptive User-Agent. */
const USER_AGENT = { 'User-Agent': 'svc-oauth/1.0' };

// ---------------------------------------------------------------------------------------------
// The catalog, alphabetical by id (arctic's module file name)
// ---------------------------------------------------------------------------------------------

export const catalog: CatalogEntry[] = [
  {
    id: '42',
    className: 'FortyTwo',
    label: '42',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['public'],
    create: basic,
    userInfo: userinfo('https://api.intra.42.fr/v2/me', (j) =>
      profile({ id: j.id, email: j.email, name: j.displayname ?? j.login, avatarUrl: obj(j.image).link }),
    ),
  },
  {
    id: 'amazon-cognito',
    className: 'AmazonCognito',
    label: 'Amazon Cognito',
    pkce: 'required',
    configKeys: ['domain'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('domain'),
    userInfo: oidc((c) => `https://${need(c, 'domain')}/oauth2/userInfo`),
  },
  {
    // No email in AniList's API.
    id: 'anilist',
    className: 'AniList',
    label: 'AniList',
    pkce: 'none',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: custom(
      async (tokens, _c, http) => obj((await graphql(http, 'https://graphql.anilist.co', tokens.accessToken(), '{ Viewer { id name avatar { large } } }')).Viewer),
      (v) => profile({ id: v.id, name: v.name, avatarUrl: obj(v.avatar).large }),
    ),
  },
  {
    // Sign in with Apple (developer.apple.com/documentation/sign_in_with_apple, checked 2026-11-24).
    // No userinfo endpoint: the id_token carries `sub`, `email`, `email_verified`; svc verifies it
    // against Apple's key set with the nonce it sent. The client secret is a JWT arctic signs with the
    // .p8 key (kept in `clientSecret`). Apple requires `response_mode=form_post` when scopes are
    // requested: the callback is then a cross-site POST (see `OAuthFlow.formPost`), and the user's
    // name arrives in its `user` field on the first login only, never again.
    id: 'apple',
    className: 'Apple',
    label: 'Apple',
    pkce: 'none',
    configKeys: ['teamId', 'keyId'],
    defaultScopes: ['name', 'email'],
    clientSecretRequired: 'the contents of the .p8 key file (PEM): svc signs the client-secret JWT with it',
    checkClientSecret: appleKeyProblem,
    create: (Class, o) =>
      patch(construct(Class, o.clientId, need(o.config, 'teamId'), need(o.config, 'keyId'), pkcs8(o.clientSecret), o.redirectUri), 'createAuthorizationURL', (original) => (state, scopes) => {
        const url = original(state, scopes) as URL;
        if (list(scopes).length > 0) url.searchParams.set('response_mode', 'form_post');
        return url;
      }),
    userInfo: {
      kind: 'verifiedIdToken',
      issuer: 'https://appleid.apple.com',
      jwksUri: 'https://appleid.apple.com/auth/keys',
      map: (claims, callback) => {
        let user: Json = {};
        try {
          user = obj(JSON.parse(callback.get('user') ?? '{}'));
        } catch {
          // A malformed `user` field only costs the name; the identity is the verified id_token.
        }
        const name = obj(user.name);
        // Only the name is taken from `user`: it is not signed, the email is the id_token's.
        return profile({ id: claims.sub, email: claims.email, emailVerified: claims.email_verified === true || claims.email_verified === 'true', name: joinName(name.firstName, name.lastName) });
      },
    },
  },
  {
    id: 'atlassian',
    className: 'Atlassian',
    label: 'Atlassian',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['read:me'],
    create: basic,
    userInfo: userinfo('https://api.atlassian.com/me', (j) => profile({ id: j.account_id, email: j.email, name: j.name ?? j.nickname, avatarUrl: j.picture })),
  },
  {
    id: 'auth0',
    className: 'Auth0',
    label: 'Auth0',
    pkce: 'optional',
    configKeys: ['domain'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('domain'),
    userInfo: oidc((c) => `https://${need(c, 'domain')}/userinfo`),
  },
  {
    // authentik before 2025.10 answers `email_verified: true` for every address, checked or not:
    // untrusted by default; admins of 2025.10 or later may set the document's trustEmailVerified.
    id: 'authentik',
    className: 'Authentik',
    label: 'authentik',
    pkce: 'required',
    configKeys: ['baseURL'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('baseURL'),
    userInfo: oidc((c) => `${trimSlash(need(c, 'baseURL'))}/application/o/userinfo/`),
    trustEmailVerified: false,
  },
  {
    // APS's User Profile API documents the OIDC userinfo at api.aps.autodesk.com/userinfo
    // (developer.api.autodesk.com/userinfo: legacy, still supported); api.userprofile.autodesk.com
    // is in neither.
    id: 'autodesk',
    className: 'Autodesk',
    label: 'Autodesk',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['openid', 'user-profile:read'],
    create: publicOk,
    userInfo: oidc('https://api.aps.autodesk.com/userinfo'),
  },
  {
    // Battle.net gives no email to third parties.
    id: 'battlenet',
    className: 'BattleNet',
    label: 'Battle.net',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['openid'],
    create: basic,
    userInfo: userinfo('https://oauth.battle.net/userinfo', (j) => profile({ id: j.sub ?? j.id, name: j.battletag })),
  },
  {
    // Scopes are set on the Bitbucket consumer (it needs `account` and `email`), not in the URL.
    id: 'bitbucket',
    className: 'Bitbucket',
    label: 'Bitbucket',
    pkce: 'none',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: custom(
      async (tokens, _c, http) => {
        const user = await call(http, 'https://api.bitbucket.org/2.0/user', tokens.accessToken());
        const emails = await call(http, 'https://api.bitbucket.org/2.0/user/emails', tokens.accessToken());
        return { ...user, emails: emails.values };
      },
      (j) => {
        const primary = obj(list(j.emails).find((e) => obj(e).is_primary === true));
        return profile({ id: j.uuid, email: primary.email, emailVerified: primary.is_confirmed === true, name: j.display_name, avatarUrl: obj(obj(j.links).avatar).href });
      },
    ),
  },
  {
    id: 'box',
    className: 'Box',
    label: 'Box',
    pkce: 'none',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    // `login` is the account's email address.
    userInfo: userinfo('https://api.box.com/2.0/users/me', (j) => profile({ id: j.id, email: j.login, name: j.name, avatarUrl: j.avatar_url })),
  },
  {
    // Bungie's API wants an app API key on every call and has no email; the token response
    // carries the stable `membership_id`.
    id: 'bungie',
    className: 'Bungie',
    label: 'Bungie',
    pkce: 'none',
    configKeys: [],
    defaultScopes: [],
    create: publicOk,
    userInfo: fromTokens((d) => profile({ id: d.membership_id })),
  },
  {
    // arctic 3.7's class authorizes at www.coinbase.com/oauth/authorize and exchanges codes at
    // www.coinbase.com/oauth/token, Coinbase's previous endpoints, without PKCE. Coinbase documents
    // login.coinbase.com/oauth2/auth and /oauth2/token, recommends PKCE (S256; its default is plain)
    // and sends client_id and client_secret in the token request's body: the adapter does that.
    id: 'coinbase',
    className: 'Coinbase',
    label: 'Coinbase',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['wallet:user:read', 'wallet:user:email'],
    create: (Class, o) => {
      const oauth2 = new (arctic().OAuth2Client)(o.clientId, o.clientSecret, o.redirectUri);
      const client = patch(basic(Class, o), 'createAuthorizationURL', () => (state, verifier, scopes) =>
        oauth2.createAuthorizationURLWithPKCE('https://login.coinbase.com/oauth2/auth', String(state), arctic().CodeChallengeMethod.S256, String(verifier), list(scopes).map(String)),
      );
      return patch(client, 'validateAuthorizationCode', () => (code, verifier) => exchangeWithPostedSecret('https://login.coinbase.com/oauth2/token', o, String(code), String(verifier)));
    },
    userInfo: userinfo('https://api.coinbase.com/v2/user', (j) => {
      const u = obj(j.data);
      return profile({ id: u.id, email: u.email, name: u.name ?? u.username, avatarUrl: u.avatar_url });
    }),
  },
  {
    id: 'discord',
    className: 'Discord',
    label: 'Discord',
    pkce: 'optional',
    configKeys: [],
    defaultScopes: ['identify', 'email'],
    create: publicOk,
    userInfo: userinfo('https://discord.com/api/users/@me', (j) =>
      profile({
        id: j.id,
        email: j.email,
        emailVerified: j.verified === true,
        name: j.global_name ?? j.username,
        avatarUrl: str(j.avatar) && `https://cdn.discordapp.com/avatars/${str(j.id)}/${str(j.avatar)}.png`,
      }),
    ),
  },
  {
    // arctic 3.7's createAuthorizationURL(scopes) takes no state: the adapter adds it.
    id: 'donation-alerts',
    className: 'DonationAlerts',
    label: 'DonationAlerts',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['oauth-user-show'],
    create: (Class, o) =>
      patch(basic(Class, o), 'createAuthorizationURL', (original) => (state, scopes) => {
        const url = original(scopes ?? []) as URL;
        url.searchParams.set('state', String(state));
        return url;
      }),
    userInfo: userinfo('https://www.donationalerts.com/api/v1/user/oauth', (j) => {
      const u = obj(j.data);
      return profile({ id: u.id, email: u.email, name: u.name ?? u.code, avatarUrl: u.avatar });
    }),
  },
  {
    // Dribbble's API has no email.
    id: 'dribbble',
    className: 'Dribbble',
    label: 'Dribbble',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['public'],
    create: basic,
    userInfo: userinfo('https://api.dribbble.com/v2/user', (j) => profile({ id: j.id, name: j.name ?? j.login, avatarUrl: j.avatar_url })),
  },
  {
    id: 'dropbox',
    className: 'Dropbox',
    label: 'Dropbox',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['account_info.read'],
    create: basic,
    // An RPC endpoint: POST without a body.
    userInfo: custom(
      (tokens, _c, http) => call(http, 'https://api.dropboxapi.com/2/users/get_current_account', tokens.accessToken(), { method: 'POST' }),
      (j) => profile({ id: j.account_id, email: j.email, emailVerified: j.email_verified === true, name: obj(j.name).display_name, avatarUrl: j.profile_photo_url }),
    ),
  },
  {
    // Epic Account Services gives no email to third parties.
    id: 'epicgames',
    className: 'EpicGames',
    label: 'Epic Games',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['basic_profile'],
    create: basic,
    userInfo: userinfo('https://api.epicgames.dev/epic/oauth/v2/userInfo', (j) => profile({ id: j.sub, name: j.preferred_username })),
  },
  {
    // The code exchange is a public client's with PKCE (arctic's class sends no secret). Every Open API
    // v3 request wants `x-api-key: <keystring>:<shared secret>` (Etsy's "Request Standards"; requests
    // without the secret are refused since 9 February 2026): the shared secret is the document's
    // clientSecret (write-only, sealed at rest) and goes nowhere else.
    id: 'etsy',
    className: 'Etsy',
    label: 'Etsy',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['email_r', 'shops_r'],
    clientSecretRequired: "Etsy's shared secret: every API request sends it with the keystring (x-api-key)",
    create: (Class, o) => {
      const client = construct(Class, o.clientId, o.redirectUri);
      return o.clientSecret ? rememberAppKey(client, `${o.clientId}:${o.clientSecret}`) : client;
    },
    userInfo: custom(
      async (tokens, _c, http) => {
        const apiKey = appKeys.get(tokens);
        if (!apiKey) throw new Error("Etsy's API needs the shared secret: save it as the provider's clientSecret");
        const me = await call(http, 'https://openapi.etsy.com/v3/application/users/me', tokens.accessToken(), { headers: { 'x-api-key': apiKey } });
        return call(http, `https://openapi.etsy.com/v3/application/users/${encodeURIComponent(str(me.user_id) ?? '')}`, tokens.accessToken(), { headers: { 'x-api-key': apiKey } });
      },
      (j) => profile({ id: j.user_id, email: j.primary_email, name: joinName(j.first_name, j.last_name), avatarUrl: j.image_url_75x75 }),
    ),
  },
  {
    id: 'facebook',
    className: 'Facebook',
    label: 'Facebook',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['email', 'public_profile'],
    create: basic,
    userInfo: userinfo('https://graph.facebook.com/me?fields=id,name,email,picture', (j) =>
      profile({ id: j.id, email: j.email, name: j.name, avatarUrl: obj(obj(j.picture).data).url }),
    ),
  },
  {
    id: 'figma',
    className: 'Figma',
    label: 'Figma',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['current_user:read'],
    create: basic,
    userInfo: userinfo('https://api.figma.com/v1/me', (j) => profile({ id: j.id, email: j.email, name: j.handle, avatarUrl: j.img_url })),
  },
  {
    // Gitea's userinfo has no `email_verified` claim: its emails count as unverified.
    id: 'gitea',
    className: 'Gitea',
    label: 'Gitea',
    pkce: 'required',
    configKeys: ['baseURL'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('baseURL'),
    userInfo: oidc((c) => `${trimSlash(need(c, 'baseURL'))}/login/oauth/userinfo`),
  },
  {
    // The public profile email may be empty or stale: the primary verified address comes from /user/emails.
    id: 'github',
    className: 'GitHub',
    label: 'GitHub',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['user:email'],
    create: basic,
    userInfo: custom(
      async (tokens, _c, http) => {
        const headers = { Accept: 'application/vnd.github+json', ...USER_AGENT };
        const user = await call(http, 'https://api.github.com/user', tokens.accessToken(), { headers });
        // Without the user:email scope this answers 404: the public profile email (unverified) remains.
        const emails = await callRaw(http, 'https://api.github.com/user/emails', tokens.accessToken(), { headers }).catch(() => []);
        return { ...user, emails: list(emails) };
      },
      (j) => {
        const emails = list(j.emails).map(obj);
        const primary = emails.find((e) => e.primary === true && e.verified === true) ?? emails.find((e) => e.verified === true);
        return primary
          ? profile({ id: j.id, email: primary.email, emailVerified: true, name: j.name ?? j.login, avatarUrl: j.avatar_url })
          : profile({ id: j.id, email: j.email, name: j.name ?? j.login, avatarUrl: j.avatar_url });
      },
    ),
  },
  {
    id: 'gitlab',
    className: 'GitLab',
    label: 'GitLab',
    pkce: 'none',
    configKeys: ['baseURL'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('baseURL'),
    userInfo: oidc((c) => `${trimSlash(need(c, 'baseURL'))}/oauth/userinfo`),
  },
  {
    id: 'google',
    className: 'Google',
    label: 'Google',
    pkce: 'required',
    configKeys: [],
    defaultScopes: OIDC_SCOPES,
    create: basic,
    userInfo: oidc('https://openidconnect.googleapis.com/v1/userinfo'),
  },
  {
    // Intuit's userinfo uses camelCase claims (`emailVerified`, `givenName`). Apps in Intuit's sandbox
    // sign in at the same authorize and token endpoints, but their userinfo is another host (Intuit's
    // sandbox discovery document): `config.environment: "sandbox"`; default production.
    id: 'intuit',
    className: 'Intuit',
    label: 'Intuit',
    pkce: 'none',
    configKeys: [],
    defaultScopes: OIDC_SCOPES,
    create: basic,
    userInfo: userinfo((c) => `https://${c.environment === 'sandbox' ? 'sandbox-accounts' : 'accounts'}.platform.intuit.com/v1/openid_connect/userinfo`, (j) =>
      profile({ id: j.sub, email: j.email, emailVerified: j.emailVerified === true || j.emailVerified === 'true', name: joinName(j.givenName, j.familyName) }),
    ),
  },
  {
    id: 'kakao',
    className: 'Kakao',
    label: 'Kakao',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['profile_nickname', 'profile_image', 'account_email'],
    create: basic,
    userInfo: userinfo('https://kapi.kakao.com/v2/user/me', (j) => {
      const account = obj(j.kakao_account);
      const p = obj(account.profile);
      return profile({
        id: j.id,
        email: account.email,
        emailVerified: account.is_email_valid === true && account.is_email_verified === true,
        name: p.nickname,
        avatarUrl: p.profile_image_url,
      });
    }),
  },
  {
    id: 'keycloak',
    className: 'KeyCloak',
    label: 'Keycloak',
    pkce: 'required',
    configKeys: ['realmURL'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('realmURL'),
    userInfo: oidc((c) => `${trimSlash(need(c, 'realmURL'))}/protocol/openid-connect/userinfo`),
  },
  {
    id: 'kick',
    className: 'Kick',
    label: 'Kick',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['user:read'],
    create: basic,
    userInfo: userinfo('https://api.kick.com/public/v1/users', (j) => {
      const u = obj(list(j.data)[0]);
      return profile({ id: u.user_id, email: u.email, name: u.name, avatarUrl: u.profile_picture });
    }),
  },
  {
    // Public client (no secret); the email is a separate call that needs `email:read`.
    id: 'lichess',
    className: 'Lichess',
    label: 'Lichess',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['email:read'],
    create: (Class, o) => construct(Class, o.clientId, o.redirectUri),
    userInfo: custom(
      async (tokens, _c, http) => {
        const account = await call(http, 'https://lichess.org/api/account', tokens.accessToken());
        const email = await call(http, 'https://lichess.org/api/account/email', tokens.accessToken()).catch(() => ({}) as Json);
        return { ...account, email: email.email };
      },
      (j) => profile({ id: j.id, email: j.email, name: j.username }),
    ),
  },
  {
    // The userinfo endpoint has no email; the id_token has it (with the `email` permission).
    id: 'line',
    className: 'Line',
    label: 'LINE',
    pkce: 'required',
    configKeys: [],
    defaultScopes: OIDC_SCOPES,
    create: basic,
    userInfo: { kind: 'idToken' },
  },
  {
    id: 'linear',
    className: 'Linear',
    label: 'Linear',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['read'],
    create: basic,
    userInfo: custom(
      async (tokens, _c, http) => obj((await graphql(http, 'https://api.linear.app/graphql', tokens.accessToken(), '{ viewer { id name email avatarUrl } }')).viewer),
      (v) => profile({ id: v.id, email: v.email, name: v.name, avatarUrl: v.avatarUrl }),
    ),
  },
  {
    id: 'linkedin',
    className: 'LinkedIn',
    label: 'LinkedIn',
    pkce: 'none',
    configKeys: [],
    defaultScopes: OIDC_SCOPES,
    create: basic,
    userInfo: oidc('https://api.linkedin.com/v2/userinfo'),
  },
  {
    // arctic 3.7's class authorizes at <baseURL>/api/v1/oauth/authorize and exchanges codes at
    // /api/v1/oauth/token, paths Mastodon does not serve (its own are /oauth/authorize, /oauth/token):
    // the adapter sends the same requests to the real paths through arctic's generic OAuth2Client.
    // Mastodon's API never exposes the account's email; ids are per instance (one document per instance).
    id: 'mastodon',
    className: 'Mastodon',
    label: 'Mastodon',
    pkce: 'required',
    configKeys: ['baseURL'],
    defaultScopes: ['read:accounts'],
    create: (Class, o) => {
      const base = trimSlash(need(o.config, 'baseURL'));
      const oauth = new (arctic().OAuth2Client)(o.clientId, o.clientSecret, o.redirectUri);
      const client = patch(scoped('baseURL', 'required')(Class, o), 'createAuthorizationURL', () => (state, verifier, scopes) =>
        oauth.createAuthorizationURLWithPKCE(`${base}/oauth/authorize`, String(state), arctic().CodeChallengeMethod.S256, String(verifier), list(scopes).map(String)),
      );
      return patch(client, 'validateAuthorizationCode', () => (code, verifier) => oauth.validateAuthorizationCode(`${base}/oauth/token`, String(code), String(verifier)));
    },
    userInfo: userinfo(
      (c) => `${trimSlash(need(c, 'baseURL'))}/api/v1/accounts/verify_credentials`,
      (j) => profile({ id: j.id, name: j.display_name || j.username, avatarUrl: j.avatar }),
    ),
  },
  {
    // Scopes are set on the application, not in the URL.
    id: 'mercadolibre',
    className: 'MercadoLibre',
    label: 'Mercado Libre',
    pkce: 'required',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: userinfo('https://api.mercadolibre.com/users/me', (j) =>
      profile({ id: j.id, email: j.email, name: joinName(j.first_name, j.last_name) ?? j.nickname, avatarUrl: obj(j.thumbnail).picture_url }),
    ),
  },
  {
    id: 'mercadopago',
    className: 'MercadoPago',
    label: 'Mercado Pago',
    pkce: 'required',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: userinfo('https://api.mercadopago.com/users/me', (j) =>
      profile({ id: j.id, email: j.email, name: joinName(j.first_name, j.last_name) ?? j.nickname, avatarUrl: obj(j.thumbnail).picture_url }),
    ),
  },
  {
    // No `email_verified` claim. `picture` is a Graph URL that itself needs the token: not kept.
    id: 'microsoft-entra-id',
    className: 'MicrosoftEntraId',
    label: 'Microsoft Entra ID',
    pkce: 'required',
    configKeys: ['tenant'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('tenant'),
    userInfo: userinfo('https://graph.microsoft.com/oidc/userinfo', (j) =>
      profile({ id: j.sub, email: j.email, name: j.name ?? joinName(j.given_name, j.family_name) }),
    ),
  },
  {
    // MyAnimeList's API has no email. MyAnimeList supports only the `plain` PKCE method (arctic sends it).
    id: 'myanimelist',
    className: 'MyAnimeList',
    label: 'MyAnimeList',
    pkce: 'required',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: userinfo('https://api.myanimelist.net/v2/users/@me', (j) => profile({ id: j.id, name: j.name, avatarUrl: j.picture })),
  },
  {
    // arctic 3.7's createAuthorizationURL() takes no state (Naver requires one): the adapter adds it.
    // Scopes are set in the Naver developer console.
    id: 'naver',
    className: 'Naver',
    label: 'Naver',
    pkce: 'none',
    configKeys: [],
    defaultScopes: [],
    create: (Class, o) =>
      patch(basic(Class, o), 'createAuthorizationURL', (original) => (state) => {
        const url = original() as URL;
        url.searchParams.set('state', String(state));
        return url;
      }),
    userInfo: userinfo('https://openapi.naver.com/v1/nid/me', (j) => {
      const u = obj(j.response);
      return profile({ id: u.id, email: u.email, name: u.name ?? u.nickname, avatarUrl: u.profile_image });
    }),
  },
  {
    // The token response names the user who installed the integration (`owner.user`).
    id: 'notion',
    className: 'Notion',
    label: 'Notion',
    pkce: 'none',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: fromTokens((d) => {
      const u = obj(obj(d.owner).user);
      return profile({ id: u.id, email: obj(u.person).email, name: u.name, avatarUrl: u.avatar_url });
    }),
  },
  {
    // `config.authorizationServerId` is optional: without it, Okta's org authorization server.
    id: 'okta',
    className: 'Okta',
    label: 'Okta',
    pkce: 'required',
    configKeys: ['domain'],
    defaultScopes: OIDC_SCOPES,
    create: (Class, o) => construct(Class, need(o.config, 'domain'), str(o.config.authorizationServerId) ?? null, o.clientId, o.clientSecret, o.redirectUri),
    userInfo: oidc((c) => {
      const server = str(c.authorizationServerId);
      return `https://${need(c, 'domain')}/oauth2${server ? `/${server}` : ''}/v1/userinfo`;
    }),
  },
  {
    // osu! has no email in its API.
    id: 'osu',
    className: 'Osu',
    label: 'osu!',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['identify'],
    create: basic,
    userInfo: userinfo('https://osu.ppy.sh/api/v2/me', (j) => profile({ id: j.id, name: j.username, avatarUrl: j.avatar_url })),
  },
  {
    id: 'patreon',
    className: 'Patreon',
    label: 'Patreon',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['identity', 'identity[email]'],
    create: basic,
    userInfo: userinfo('https://www.patreon.com/api/oauth2/v2/identity?fields%5Buser%5D=email,full_name,image_url,is_email_verified', (j) => {
      const u = obj(j.data);
      const a = obj(u.attributes);
      return profile({ id: u.id, email: a.email, emailVerified: a.is_email_verified === true, name: a.full_name, avatarUrl: a.image_url });
    }),
  },
  {
    id: 'polar',
    className: 'Polar',
    label: 'Polar',
    pkce: 'required',
    configKeys: [],
    defaultScopes: OIDC_SCOPES,
    create: publicOk,
    userInfo: oidc('https://api.polar.sh/v1/oauth2/userinfo'),
  },
  {
    // Reddit's API has no email (`has_verified_email` only says one exists). `icon_img` is HTML-escaped.
    id: 'reddit',
    className: 'Reddit',
    label: 'Reddit',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['identity'],
    create: basic,
    userInfo: userinfo('https://oauth.reddit.com/api/v1/me', (j) => profile({ id: j.id, name: j.name, avatarUrl: str(j.icon_img)?.replaceAll('&amp;', '&') }), USER_AGENT),
  },
  {
    // Roblox gives no email to third parties.
    id: 'roblox',
    className: 'Roblox',
    label: 'Roblox',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['openid', 'profile'],
    create: publicOk,
    userInfo: oidc('https://apis.roblox.com/oauth/v1/userinfo'),
  },
  {
    id: 'salesforce',
    className: 'Salesforce',
    label: 'Salesforce',
    pkce: 'required',
    configKeys: ['domain'],
    defaultScopes: OIDC_SCOPES,
    create: scoped('domain'),
    userInfo: oidc((c) => `https://${need(c, 'domain')}/services/oauth2/userinfo`),
  },
  {
    // Shikimori has no email in its API and wants an identifying User-Agent.
    id: 'shikimori',
    className: 'Shikimori',
    label: 'Shikimori',
    pkce: 'none',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: userinfo('https://shikimori.one/api/users/whoami', (j) => profile({ id: j.id, name: j.nickname, avatarUrl: obj(j.image).x160 ?? j.avatar }), USER_AGENT),
  },
  {
    id: 'slack',
    className: 'Slack',
    label: 'Slack',
    pkce: 'none',
    configKeys: [],
    defaultScopes: OIDC_SCOPES,
    create: basic,
    // A Web API method (docs.slack.dev: "Method Access: POST"), which answers an error with HTTP 200
    // and `{"ok": false, "error": ...}`; the claims are OpenID Connect's.
    userInfo: custom(async (tokens, _c, http) => {
      const json = await call(http, 'https://slack.com/api/openid.connect.userInfo', tokens.accessToken(), { method: 'POST' });
      if (json.ok !== true) throw new Error(`slack.com refused openid.connect.userInfo: ${str(json.error) ?? 'no reason given'}`);
      return json;
    }, mapUserInfo),
  },
  {
    // Spotify documents the email as unverified.
    id: 'spotify',
    className: 'Spotify',
    label: 'Spotify',
    pkce: 'optional',
    configKeys: [],
    defaultScopes: ['user-read-email'],
    create: publicOk,
    userInfo: userinfo('https://api.spotify.com/v1/me', (j) => profile({ id: j.id, email: j.email, name: j.display_name, avatarUrl: obj(list(j.images)[0]).url })),
  },
  {
    // start.gg's token request repeats the scopes: validateAuthorizationCode(code, scopes). The flow
    // passes only the code, so the adapter sends the default scopes.
    id: 'startgg',
    className: 'StartGG',
    label: 'start.gg',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['user.identity', 'user.email'],
    create: (Class, o) =>
      patch(basic(Class, o), 'validateAuthorizationCode', (original) => (code, scopes) => original(code, Array.isArray(scopes) ? scopes : catalogEntry('startgg')!.defaultScopes)),
    userInfo: custom(
      async (tokens, _c, http) =>
        obj((await graphql(http, 'https://api.start.gg/gql/alpha', tokens.accessToken(), '{ currentUser { id slug email player { gamerTag } } }')).currentUser),
      (u) => profile({ id: u.id, email: u.email, name: obj(u.player).gamerTag ?? u.slug }),
    ),
  },
  {
    // Strava's API has no email.
    id: 'strava',
    className: 'Strava',
    label: 'Strava',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['read'],
    create: basic,
    userInfo: userinfo('https://www.strava.com/api/v3/athlete', (j) => profile({ id: j.id, name: joinName(j.firstname, j.lastname), avatarUrl: j.profile })),
  },
  {
    // Synology SSO Server; the class calls them application id and secret. Its OIDC claims are `sub`,
    // `username`, `email`, `groups`: `sub` is the DSM user name (no stable numeric id exists, so a
    // renamed user becomes a new identity), and nothing says the email was checked: untrusted by default.
    id: 'synology',
    className: 'Synology',
    label: 'Synology SSO',
    pkce: 'required',
    configKeys: ['baseURL'],
    defaultScopes: ['openid', 'email'],
    create: scoped('baseURL', 'required'),
    userInfo: oidc((c) => `${trimSlash(need(c, 'baseURL'))}/webman/sso/SSOUserInfo.cgi`),
    trustEmailVerified: false,
  },
  {
    // The class's first argument is TikTok's "client key"; TikTok has no email in its API.
    id: 'tiktok',
    className: 'TikTok',
    label: 'TikTok',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['user.info.basic'],
    create: basic,
    userInfo: userinfo('https://open.tiktokapis.com/v2/user/info/?fields=open_id,union_id,avatar_url,display_name', (j) => {
      const u = obj(obj(j.data).user);
      return profile({ id: u.union_id ?? u.open_id, name: u.display_name, avatarUrl: u.avatar_url });
    }),
  },
  {
    // The API wants the client id as a `Client-Id` header.
    id: 'tiltify',
    className: 'Tiltify',
    label: 'Tiltify',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['public'],
    create: (Class, o) => rememberAppKey(basic(Class, o), o.clientId),
    userInfo: custom(
      (tokens, _c, http) => {
        const clientId = appKeys.get(tokens);
        return call(http, 'https://v5api.tiltify.com/api/public/current-user', tokens.accessToken(), { headers: clientId ? { 'Client-Id': clientId } : {} });
      },
      (j) => {
        const u = obj(j.data);
        return profile({ id: u.id, email: u.email, name: u.username, avatarUrl: obj(u.avatar).src });
      },
    ),
  },
  {
    // Tumblr has no email in its API; the primary blog's uuid is the stable id (names can change).
    id: 'tumblr',
    className: 'Tumblr',
    label: 'Tumblr',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['basic'],
    create: basic,
    userInfo: userinfo('https://api.tumblr.com/v2/user/info', (j) => {
      const u = obj(obj(j.response).user);
      const blog = obj(list(u.blogs).find((b) => obj(b).primary === true) ?? list(u.blogs)[0]);
      return profile({ id: blog.uuid ?? u.name, name: u.name, avatarUrl: obj(list(blog.avatar)[0]).url });
    }),
  },
  {
    // Helix wants the client id as `Client-Id`; Twitch documents the email it returns as verified.
    id: 'twitch',
    className: 'Twitch',
    label: 'Twitch',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['user:read:email'],
    create: (Class, o) => rememberAppKey(basic(Class, o), o.clientId),
    userInfo: custom(
      async (tokens, _c, http) => {
        const clientId =
          appKeys.get(tokens) ?? str((await call(http, 'https://id.twitch.tv/oauth2/validate', tokens.accessToken(), { headers: { Authorization: `OAuth ${tokens.accessToken()}` } })).client_id);
        return obj(list((await call(http, 'https://api.twitch.tv/helix/users', tokens.accessToken(), { headers: { 'Client-Id': clientId ?? '' } })).data)[0]);
      },
      (u) => profile({ id: u.id, email: u.email, emailVerified: true, name: u.display_name ?? u.login, avatarUrl: u.profile_image_url }),
    ),
  },
  {
    // X returns `confirmed_email` with the `users.email` scope (and "Request email" enabled on the app).
    id: 'twitter',
    className: 'Twitter',
    label: 'X (Twitter)',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['users.read', 'tweet.read', 'users.email'],
    create: publicOk,
    userInfo: userinfo('https://api.twitter.com/2/users/me?user.fields=profile_image_url,confirmed_email', (j) => {
      const u = obj(j.data);
      return profile({ id: u.id, email: u.confirmed_email, emailVerified: true, name: u.name ?? u.username, avatarUrl: u.profile_image_url });
    }),
  },
  {
    // VK ID (id.vk.ru/about/business/go/docs/ru/vkid/latest/vk-id/connection/start-integration/auth-without-sdk/auth-without-sdk-web,
    // and the VK ID FAQ id.vk.ru/about/faq/business/vkid/OAuth/30022 and .../user_data/30008; checked 2026-11-24).
    // "OAuth ВКонтакте" at oauth.vk.com, which arctic 3.7's class uses, is deprecated: VK ID is OAuth 2.1
    // at id.vk.ru with PKCE S256 required, the callback's `device_id` sent back with the code, and the
    // profile from POST /oauth2/user_info. VK's `verified` is not about the email: emails count as unverified.
    id: 'vk',
    className: 'VK',
    label: 'VK ID',
    pkce: 'required',
    configKeys: [],
    defaultScopes: ['vkid.personal_info', 'email'],
    create: (Class, o) => {
      const oauth2 = new (arctic().OAuth2Client)(o.clientId, null, o.redirectUri);
      const client = patch(basic(Class, o), 'createAuthorizationURL', () => (state, verifier, scopes) =>
        oauth2.createAuthorizationURLWithPKCE('https://id.vk.ru/authorize', String(state), arctic().CodeChallengeMethod.S256, String(verifier), list(scopes).map(String)),
      );
      return patch(client, 'validateAuthorizationCode', () => async (code, verifier, params) => {
        const callback = params instanceof URLSearchParams ? params : new URLSearchParams();
        const deviceId = callback.get('device_id');
        if (!deviceId) throw new Error('the VK ID callback has no device_id');
        const res = await providerFetch('https://id.vk.ru/oauth2/auth', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
          body: new URLSearchParams({
            grant_type: 'authorization_code',
            code: String(code),
            code_verifier: String(verifier),
            client_id: o.clientId,
            device_id: deviceId,
            redirect_uri: o.redirectUri,
            state: callback.get('state') ?? '',
          }),
          signal: AbortSignal.timeout(USERINFO_TIMEOUT_MS),
        });
        const json = obj(await res.json().catch(() => ({})));
        if (!res.ok || typeof json.access_token !== 'string') throw new Error(`VK ID answered ${res.status} ${str(json.error) ?? ''}`.trim());
        // The profile call needs the client id too: it travels with the tokens (never shown to anyone).
        return new (arctic().OAuth2Tokens)({ ...json, svc_client_id: o.clientId });
      });
    },
    userInfo: custom(
      async (tokens, _c, http) => {
        const res = await http('https://id.vk.ru/oauth2/user_info', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
          body: new URLSearchParams({ client_id: str(tokenData(tokens).svc_client_id) ?? '', access_token: tokens.accessToken() }),
          signal: AbortSignal.timeout(USERINFO_TIMEOUT_MS),
        });
        if (!res.ok) throw new Error(`user info answered ${res.status}`);
        return obj(obj(await res.json()).user);
      },
      (u) => profile({ id: u.user_id, email: u.email, name: joinName(u.first_name, u.last_name), avatarUrl: u.avatar }),
    ),
  },
  {
    // Withings has no profile API for third parties: the token response carries `userid` only.
    id: 'withings',
    className: 'Withings',
    label: 'Withings',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['user.info'],
    create: basic,
    userInfo: fromTokens((d) => profile({ id: d.userid })),
  },
  {
    // The SSO profile comes with the token response. WorkOS does not verify emails coming from the IdP.
    id: 'workos',
    className: 'WorkOS',
    label: 'WorkOS',
    pkce: 'optional',
    configKeys: [],
    defaultScopes: [],
    create: publicOk,
    userInfo: fromTokens((d) => {
      const p = obj(d.profile);
      return profile({ id: p.id, email: p.email, name: joinName(p.first_name, p.last_name) });
    }),
  },
  {
    id: 'yahoo',
    className: 'Yahoo',
    label: 'Yahoo',
    pkce: 'none',
    configKeys: [],
    defaultScopes: OIDC_SCOPES,
    create: basic,
    userInfo: oidc('https://api.login.yahoo.com/openid/v1/userinfo'),
  },
  {
    id: 'yandex',
    className: 'Yandex',
    label: 'Yandex',
    pkce: 'none',
    configKeys: [],
    defaultScopes: ['login:email', 'login:info', 'login:avatar'],
    create: basic,
    // Yandex ID documents `Authorization: OAuth <token>` for login.yandex.ru/info
    // (yandex.com/dev/id/doc/en/user-information, checked 2026-11-24); `default_email` has no verified flag.
    userInfo: userinfo(
      'https://login.yandex.ru/info?format=json',
      (j) =>
        profile({
          id: j.id,
          email: j.default_email,
          name: j.real_name ?? j.display_name ?? j.login,
          avatarUrl: j.is_avatar_empty === true || !str(j.default_avatar_id) ? undefined : `https://avatars.yandex.net/get-yapic/${str(j.default_avatar_id)}/islands-200`,
        }),
      undefined,
      'OAuth',
    ),
  },
  {
    // Scopes are set on the Zoom app (it needs user:read). `verified` is about the account, not the email.
    id: 'zoom',
    className: 'Zoom',
    label: 'Zoom',
    pkce: 'required',
    configKeys: [],
    defaultScopes: [],
    create: basic,
    userInfo: userinfo('https://api.zoom.us/v2/users/me', (j) =>
      profile({ id: j.id, email: j.email, name: j.display_name ?? joinName(j.first_name, j.last_name), avatarUrl: j.pic_url }),
    ),
  },
];

/** Every provider class arctic exports (a class with both flow methods), except its generic `OAuth2Client`. */
export function discoverArcticProviders(mod: Record<string, unknown>): string[] {
  return Object.entries(mod)
    .filter(([name, value]) => {
      if (name === 'OAuth2Client' || typeof value !== 'function') return false;
      const proto = (value as { prototype?: Record<string, unknown> }).prototype;
      return typeof proto?.createAuthorizationURL === 'function' && typeof proto.validateAuthorizationCode === 'function';
    })
    .map(([name]) => name)
    .sort();
}

const byId = new Map(catalog.map((entry) => [entry.id, entry]));

export function catalogEntry(id: string): CatalogEntry | undefined {
  return byId.get(id);
}

