/**
 * Verifies an id_token that a built-in provider hands back from its token endpoint (Sign in with
 * Apple): the signature against the provider's published key set, `iss`, `aud` = our client id, `exp`,
 * and the `nonce` svc sent with the authorize request. Only claims that passed every check are
 * returned, so no claim of a forged or replayed token reaches the account resolution.
 */
// jose's own subpath modules: `from 'jose'` loads all 109 of its modules at start-up (0.4 MB more heap).
import { createRemoteJWKSet, customFetch } from 'jose/jwks/remote';
import type { JWTPayload } from 'jose';
import { jwtVerify } from 'jose/jwt/verify';
import { providerFetch } from './outbound.ts';

/** One key set per URL for the process: jose caches the keys and refetches once for an unknown `kid`. */
const keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();
const keySet = (jwksUri: string) => {
  let set = keySets.get(jwksUri);
  if (!set) {
    set = createRemoteJWKSet(new URL(jwksUri), { timeoutDuration: 10_000, [customFetch]: providerFetch });
    keySets.set(jwksUri, set);
  }
  return set;
};

/** Asymmetric algorithms only: an `HS256` token would verify with a secret the key set cannot vouch for. */
const ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'];

export interface IdTokenCheck {
  issuer: string;
  jwksUri: string;
  audience: string;
  nonce: string | null;
}

export async function verifyIdToken(idToken: string, check: IdTokenCheck): Promise<JWTPayload> {
  if (!check.nonce) throw new Error('the login has no nonce to compare the id_token with');
  const { payload } = await jwtVerify(idToken, keySet(check.jwksUri), { issuer: check.issuer, audience: check.audience, algorithms: ALGORITHMS });
  if (payload.nonce !== check.nonce) throw new Error('the id_token nonce does not match this login');
  if (typeof payload.sub !== 'string' || !payload.sub) throw new Error('the id_token has no sub');
  return payload;
}
