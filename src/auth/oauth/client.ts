import type { OAuth2Tokens } from 'arctic';
import { arctic, loadArctic } from './arctic.ts';
import type { ArcticClient, CatalogEntry, ProviderClient } from './catalog-types.ts';
import { catalogEntry } from './catalog.ts';
import { oidcClient } from './oidc-client.ts';
import { asProviderCall, providerFailure, providerFetch } from './outbound.ts';
import { verifyIdToken } from './id-token.ts';
import type { OidcIssuers } from './oidc-issuers.ts';
import { mapUserInfo } from './profile.ts';
import { trustsEmailOf, type ProviderDoc } from './providers.ts';

/** A failure of the flow with the `auth_error` code it becomes (CONTRACT section 5). */
export class OAuthFlowError extends Error {
  constructor(
    readonly code: 'provider_not_found' | 'invalid_state' | 'access_denied' | 'token_exchange_failed' | 'userinfo_failed' | 'no_email' | 'account_exists' | 'identity_in_use' | 'server_error',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const USERINFO_TIMEOUT_MS = 10_000;

async function getJson(url: string, headers: Record<string, string>): Promise<Record<string, unknown>> {
  const res = await providerFetch(url, { headers: { Accept: 'application/json', ...headers }, signal: AbortSignal.timeout(USERINFO_TIMEOUT_MS) });
  if (!res.ok) throw new Error(`user info answered ${res.status}`);
  const json: unknown = await res.json();
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new Error('user info is not a JSON object');
  return json as Record<string, unknown>;
}

/** Empty scope lists omit the `scope` parameter (SPEC.md: the saved list is authoritative). */
function withScopes(url: URL, scopes: string[]): URL {
  if (scopes.length === 0) url.searchParams.delete('scope');
  return url;
}

function customClient(doc: ProviderDoc, secret: string): ProviderClient {
  const { authorizationEndpoint, tokenEndpoint, userInfoEndpoint, pkce = true, userInfoAuthorizationScheme = 'Bearer' } = doc.config;
  const client = new (arctic().OAuth2Client)(doc.clientId, secret || null, doc.redirectUri);
  return {
    pkce,
    authorizationUrl: (state, verifier) =>
      withScopes(
        pkce && verifier
          ? client.createAuthorizationURLWithPKCE(authorizationEndpoint!, state, arctic().CodeChallengeMethod.S256, verifier, doc.scopes)
          : client.createAuthorizationURL(authorizationEndpoint!, state, doc.scopes),
        doc.scopes,
      ),
    async exchange(code, verifier) {
      const tokens = await client.validateAuthorizationCode(tokenEndpoint!, code, pkce ? verifier : null);
      tokens.accessToken(); // throws for an answer without one: the exchange failed, not the user info
      return tokens;
    },
    async userInfo(tokens) {
      const raw = await getJson(userInfoEndpoint!, { Authorization: `${userInfoAuthorizationScheme} ${tokens.accessToken()}` });
      return { raw, profile: mapUserInfo(raw) };
    },
  };
}

/** What `exchange` verified for these tokens (providers whose id_token svc checks itself). */
const verified = new WeakMap<OAuth2Tokens, { claims: Record<string, unknown>; callback: URLSearchParams }>();

function builtinClient(doc: ProviderDoc, secret: string, entry: CatalogEntry): ProviderClient {
  const Class = (arctic() as unknown as Record<string, new (...args: never[]) => ArcticClient>)[entry.className];
  if (!Class) throw new Error(`arctic does not export ${entry.className}`);
  const client = entry.create(Class, { clientId: doc.clientId, clientSecret: secret, redirectUri: doc.redirectUri, config: doc.config }) as unknown as {
    createAuthorizationURL(...args: unknown[]): URL;
    validateAuthorizationCode(...args: unknown[]): Promise<OAuth2Tokens>;
  };
  const pkce = entry.pkce !== 'none';
  const source = entry.userInfo;
  const scheme = doc.config.userInfoAuthorizationScheme ?? (source.kind === 'userinfo' ? source.scheme : undefined) ?? 'Bearer';
  const checksIdToken = source.kind === 'verifiedIdToken';
  return {
    pkce,
    nonce: checksIdToken,
    authorizationUrl: (state, verifier, nonce) => {
      const url = withScopes(pkce ? client.createAuthorizationURL(state, verifier, doc.scopes) : client.createAuthorizationURL(state, doc.scopes), doc.scopes);
      if (checksIdToken && nonce) url.searchParams.set('nonce', nonce);
      return url;
    },
    async exchange(code, verifier, callback) {
      // The callback's parameters go along: an adapter may need one (VK ID's `device_id`); arctic's classes ignore them.
      const tokens = await (pkce ? client.validateAuthorizationCode(code, verifier, callback?.params) : client.validateAuthorizationCode(code));
      if (source.kind === 'verifiedIdToken') {
        const claims = await verifyIdToken(tokens.idToken(), { issuer: source.issuer, jwksUri: source.jwksUri, audience: doc.clientId, nonce: callback?.nonce ?? null });
        verified.set(tokens, { claims, callback: callback?.params ?? new URLSearchParams() });
      }
      return tokens;
    },
    async userInfo(tokens) {
      if (source.kind === 'verifiedIdToken') {
        const checked = verified.get(tokens);
        if (!checked) throw new Error('no verified id_token for these tokens');
        return { raw: checked.claims, profile: source.map(checked.claims, checked.callback) };
      }
      if (source.kind === 'idToken') {
        const raw = arctic().decodeIdToken(tokens.idToken()) as Record<string, unknown>;
        return { raw, profile: (source.map ?? mapUserInfo)(raw) };
      }
      if (source.kind === 'custom') return source.fetch(tokens, doc.config, providerFetch);
      const url = typeof source.url === 'function' ? source.url(doc.config) : source.url;
      const raw = await getJson(url, { Authorization: `${scheme} ${tokens.accessToken()}`, ...source.headers });
      return { raw, profile: (source.map ?? mapUserInfo)(raw) };
    },
  };
}

/** An untrusted provider's (`trustEmailVerified: false`) profile never says its email is verified. */
function withoutVerifiedClaim(client: ProviderClient): ProviderClient {
  return {
    ...client,
    async userInfo(tokens) {
      const info = await client.userInfo(tokens);
      return { ...info, profile: { ...info.profile, emailVerified: false } };
    },
  };
}

/**
 * The client for a provider document: arctic's class for built-ins, arctic's OAuth2Client for custom
 * ones, the issuer's discovery document for OpenID providers (`issuers` caches those). Its profile
 * carries only a verified claim svc believes, so the account resolution and the login handlers never
 * see one from an untrusted provider (`emailVerifiedBy` is the whole rule). The first one loads arctic
 * (arctic.ts), which everything behind it then reads with `arctic()`.
 */
export async function providerClient(doc: ProviderDoc, clientSecret: string, issuers: OidcIssuers): Promise<ProviderClient> {
  await loadArctic();
  let client: ProviderClient;
  if (doc.type === 'custom') client = customClient(doc, clientSecret);
  else if (doc.type === 'oidc') client = oidcClient(doc, clientSecret, issuers);
  else {
    const entry = catalogEntry(doc.providerId);
    if (!entry) throw new OAuthFlowError('provider_not_found', `no built-in provider "${doc.providerId}"`);
    client = builtinClient(doc, clientSecret, entry);
  }
  return withoutRedirects(trustsEmailOf(doc) ? client : withoutVerifiedClaim(client));
}

/**
 * Every call of the client runs as a provider call (outbound.ts): no fetch it makes, arctic's
 * included, follows a redirect, takes too long or reads too much. Such a failure surfaces as itself,
 * so the failed login's log line says why (arctic would hide it behind "Failed to send request").
 */
function withoutRedirects(client: ProviderClient): ProviderClient {
  const run = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await asProviderCall(fn);
    } catch (err) {
      throw providerFailure(err) ?? err;
    }
  };
  return {
    ...client,
    authorizationUrl: (...args) => run(async () => client.authorizationUrl(...args)),
    exchange: (...args) => run(() => client.exchange(...args)),
    userInfo: (tokens) => run(() => client.userInfo(tokens)),
  };
}
