/**
 * The client of a `type: "oidc"` provider (CONTRACT 5): any OpenID Provider by its issuer URL.
 *
 * Everything comes from the issuer's discovery document. The authorize request always carries PKCE
 * S256 and a `nonce`. The code exchange is oauth4webapi's: it checks the `iss` of the authorization
 * response (RFC 9207, mix-up) and the id_token's claims (`iss`, `aud` = client id, `azp`, `exp`,
 * `iat`, `nonce`); jose then checks its signature against the issuer's key set. Only a token that
 * passed every check yields claims, and any failure is a failed code exchange
 * (`token_exchange_failed`), so no claim of an unverified token ever reaches the account resolution.
 * The profile is the id_token's claims, completed by the userinfo endpoint when the issuer has one
 * (its `sub` must be the id_token's).
 */
import type { OAuth2Tokens } from 'arctic';
import { arctic } from './arctic.ts';
// jose's own subpath modules: `from 'jose'` loads all 109 of its modules at start-up (0.4 MB more heap).
import { jwtVerify } from 'jose/jwt/verify';
import * as oauth from 'oauth4webapi';
import type { ProviderClient } from './catalog-types.ts';
import type { OidcIssuers } from './oidc-issuers.ts';
import { mapUserInfo } from './profile.ts';
import type { ProviderDoc } from './providers.ts';

const TOKEN_TIMEOUT_MS = 10_000;
/** Symmetric (`HS*`) algorithms would verify with the client secret, which the IdP's key set cannot vouch for. */
const ASYMMETRIC = /^(RS|PS|ES)(256|384|512)$|^EdDSA$|^Ed25519$/;

/** The verified claims of the id_token that came with these tokens (set by `exchange` only). */
const verifiedClaims = new WeakMap<OAuth2Tokens, oauth.IDToken>();

/** Client authentication at the token endpoint: none for a public client, else what the IdP supports. */
function clientAuth(as: oauth.AuthorizationServer, secret: string): oauth.ClientAuth {
  if (!secret) return oauth.None();
  const methods = as.token_endpoint_auth_methods_supported;
  // The spec's default is client_secret_basic; use POST only for an IdP that lists it and not basic.
  if (methods && !methods.includes('client_secret_basic') && methods.includes('client_secret_post')) return oauth.ClientSecretPost(secret);
  return oauth.ClientSecretBasic(secret);
}

export function oidcClient(doc: ProviderDoc, secret: string, issuers: OidcIssuers): ProviderClient {
  const issuer = doc.config.issuer;
  if (!issuer) throw new Error('provider config.issuer is required');
  const client: oauth.Client = { client_id: doc.clientId };

  return {
    pkce: true,
    nonce: true,

    async authorizationUrl(state, codeVerifier, nonce) {
      if (!codeVerifier || !nonce) throw new Error('an OpenID login needs a PKCE verifier and a nonce');
      const as = await issuers.metadata(issuer);
      const url = new URL(as.authorization_endpoint!);
      url.searchParams.set('response_type', 'code');
      url.searchParams.set('client_id', doc.clientId);
      url.searchParams.set('redirect_uri', doc.redirectUri);
      // The id_token (the only verified source of the identity) comes with the `openid` scope only.
      const scopes = doc.scopes.includes('openid') ? doc.scopes : ['openid', ...doc.scopes];
      url.searchParams.set('scope', scopes.join(' '));
      url.searchParams.set('state', state);
      url.searchParams.set('nonce', nonce);
      url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(codeVerifier));
      url.searchParams.set('code_challenge_method', 'S256');
      return url;
    },

    async exchange(_code, codeVerifier, callback) {
      if (!codeVerifier || !callback?.nonce) throw new Error('the login has no PKCE verifier or nonce');
      const as = await issuers.metadata(issuer);
      // The flow has checked `state` (and its binding to the browser); this checks `iss` and the rest.
      const params = oauth.validateAuthResponse(as, client, callback.params, oauth.skipStateCheck);
      const res = await oauth.authorizationCodeGrantRequest(as, client, clientAuth(as, secret), params, doc.redirectUri, codeVerifier, {
        ...issuers.requestOptions(as.token_endpoint!),
        signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
      });
      const body = await oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: callback.nonce, requireIdToken: true });
      const claims = oauth.getValidatedIdTokenClaims(body)!;
      const algorithms = (as.id_token_signing_alg_values_supported ?? ['RS256']).filter((alg) => ASYMMETRIC.test(alg));
      // The signature, against the issuer's published keys (refetched once for an unknown `kid`).
      await jwtVerify(body.id_token!, await issuers.keys(issuer), { issuer: as.issuer, audience: doc.clientId, algorithms });
      const tokens = new (arctic().OAuth2Tokens)(body);
      verifiedClaims.set(tokens, claims);
      return tokens;
    },

    async userInfo(tokens) {
      const claims = verifiedClaims.get(tokens);
      if (!claims) throw new Error('no verified id_token for these tokens');
      const as = await issuers.metadata(issuer);
      let raw: Record<string, unknown> = { ...claims };
      if (as.userinfo_endpoint) {
        const res = await oauth.userInfoRequest(as, client, tokens.accessToken(), issuers.requestOptions(as.userinfo_endpoint));
        // The userinfo's `sub` must be the id_token's (OpenID Connect Core 5.3.2), else it is someone else's.
        const info = await oauth.processUserInfoResponse(as, client, claims.sub, res);
        // The id_token is signed and checked: its claims win; userinfo fills in what it lacks.
        raw = { ...info, ...claims };
      }
      // `sub` is the stable id (a userinfo `id` field, first in the generic mapping, is not).
      return { raw, profile: { ...mapUserInfo(raw), id: claims.sub } };
    },
  };
}
