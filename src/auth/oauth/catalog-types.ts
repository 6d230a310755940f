import type { OAuth2Tokens } from 'arctic';
import type { Profile } from './profile.ts';

/** An arctic provider instance: every class has these two methods, with provider-specific arities. */
export interface ArcticClient {
  createAuthorizationURL(...args: never[]): URL;
  validateAuthorizationCode(...args: never[]): Promise<OAuth2Tokens>;
}

/** What a provider document gives the catalog to build a client. */
export interface ClientOptions {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  /** Provider document `config`: `tenant`, `realmURL`, `domain`, `baseURL`, ... */
  config: Record<string, unknown>;
}

/** How svc gets the user's identity after the code exchange. */
export type UserInfoSource =
  /** GET `url` with `Authorization: Bearer <access token>`; the JSON goes through `map` (default: the generic mapping). */
  | {
      kind: 'userinfo';
      url: string | ((config: Record<string, unknown>) => string);
      headers?: Record<string, string>;
      /** The Authorization scheme the provider documents (default `Bearer`; Yandex: `OAuth`). */
      scheme?: string;
      map?: (json: Record<string, unknown>) => Profile;
    }
  /** Claims of the id_token (OpenID Connect); through `map` (default: the generic mapping). */
  | { kind: 'idToken'; map?: (claims: Record<string, unknown>) => Profile }
  /**
   * Claims of an id_token that svc verifies itself (signature against `jwksUri`, `iss`, `aud`, `exp`,
   * and a `nonce` it sends): for providers with no userinfo endpoint (Apple). `map` also sees every
   * parameter of the callback (Apple posts the user's name there, on the first login only).
   */
  | { kind: 'verifiedIdToken'; issuer: string; jwksUri: string; map: (claims: Record<string, unknown>, callback: URLSearchParams) => Profile }
  /** Anything else (several calls, POST, ...): returns the raw JSON and the profile. */
  | {
      kind: 'custom';
      fetch: (tokens: OAuth2Tokens, config: Record<string, unknown>, http: typeof fetch) => Promise<{ raw: Record<string, unknown>; profile: Profile }>;
    };

/** One built-in provider: what the admin API shows and what the flow needs. */
export interface CatalogEntry {
  /** Kebab-case id of arctic's module (`microsoft-entra-id`, `keycloak`, `42`). */
  id: string;
  /** The class arctic exports (`MicrosoftEntraId`). */
  className: string;
  label: string;
  /** `required`: S256 always; `optional`: svc uses it; `none`: the provider class has no PKCE. */
  pkce: 'required' | 'optional' | 'none';
  /** Provider `config` keys the constructor needs (all required), e.g. `['realmURL']`. */
  configKeys: string[];
  defaultScopes: string[];
  /** Builds the arctic instance. */
  create(Class: new (...args: never[]) => ArcticClient, opts: ClientOptions): ArcticClient;
  userInfo: UserInfoSource;
  /**
   * Default of the provider document's `trustEmailVerified` (CONTRACT 5): false where the provider's
   * "verified" flag is known to be unreliable, so its emails count as unverified. Absent: true.
   */
  trustEmailVerified?: false;
  /** Set when the provider cannot work without a clientSecret even as a public client: why (the admin API says it). */
  clientSecretRequired?: string;
  /** Checks a clientSecret before it is saved (POST, PATCH): what is wrong with it, else undefined. Never echoes the secret. */
  checkClientSecret?: (secret: string) => string | undefined;
  /** Where to read about registering an app at this provider (optional). */
  docs?: string;
}

export interface UserInfoResult {
  raw: Record<string, unknown>;
  profile: Profile;
}

/** What the callback hands to `exchange` besides the code (used by OpenID providers). */
export interface CallbackContext {
  /** The nonce sent with the authorize request (from the state record), or null. */
  nonce: string | null;
  /** Every parameter of the callback URL (`code`, `state`, `iss`, ...). */
  params: URLSearchParams;
}

/** One provider, ready for the flow: authorize URL, code exchange, user info. */
export interface ProviderClient {
  pkce: boolean;
  /** The flow sends a fresh `nonce` with the authorize request and keeps it in the state record. */
  nonce?: boolean;
  authorizationUrl(state: string, codeVerifier: string | null, nonce?: string | null): URL | Promise<URL>;
  exchange(code: string, codeVerifier: string | null, callback?: CallbackContext): Promise<OAuth2Tokens>;
  userInfo(tokens: OAuth2Tokens): Promise<UserInfoResult>;
}
