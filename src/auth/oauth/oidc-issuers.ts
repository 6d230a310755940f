/**
 * OpenID Providers known by their issuer URL (CONTRACT 5, `type: "oidc"`): the discovery document
 * and the signing keys of each, read with panva's libraries (oauth4webapi for the discovery request
 * and its checks, jose for the JSON Web Key Set), cached per issuer.
 *
 * - The discovery document is read when an admin saves the provider (`discover`: every check, no
 *   cache) and at login (`metadata`: cached for an hour; a stale copy serves while a refresh fails,
 *   so a short outage of the IdP's discovery endpoint does not stop logins whose keys are known).
 * - The key set is jose's remote JWKS: cached for ten minutes, fetched again when a token names a
 *   `kid` it does not hold (key rotation), at most once per cool-down, so forged `kid`s cannot turn
 *   svc into a request loop against the IdP.
 * - Every URL of the document that svc's server will call must pass the provider URL rule
 *   (`provider-urls.ts`): the admin vetted the issuer, not what the issuer's document points at.
 */
import type { JWTVerifyGetKey } from 'jose';
// jose's own subpath modules: `from 'jose'` loads all 109 of its modules at start-up (0.4 MB more heap).
import { createRemoteJWKSet, customFetch } from 'jose/jwks/remote';
import * as oauth from 'oauth4webapi';
import { providerFetch } from './outbound.ts';
import { providerUrlProblem } from './provider-urls.ts';

/** Why an issuer cannot be used; the message is for the admin (it names no secret). */
export class IssuerError extends Error {
  override readonly name = 'IssuerError';
}

export interface OidcIssuersOptions {
  /** `SVC_ALLOW_INSECURE_PROVIDER_URLS=1`: plain http: to any host. */
  allowInsecure: boolean;
  /** Per request (discovery and key set). */
  timeoutMs?: number;
  /** How long a discovery document is used before it is read again. */
  metadataTtlMs?: number;
  /** How long a key set is used before it is read again. */
  jwksMaxAgeMs?: number;
  /** The least time between two reads of a key set caused by an unknown `kid`. */
  jwksCooldownMs?: number;
}

/** Endpoints svc's server calls or sends the browser to; the first three must be there. */
const REQUIRED_ENDPOINTS = ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const;
const OPTIONAL_ENDPOINTS = ['userinfo_endpoint'] as const;

interface Entry {
  metadata: oauth.AuthorizationServer;
  readAt: number;
  jwks: JWTVerifyGetKey;
}

export class OidcIssuers {
  private readonly entries = new Map<string, Entry>();
  /** One read per issuer at a time: concurrent logins wait for the same request. */
  private readonly reading = new Map<string, Promise<Entry>>();
  private readonly timeoutMs: number;
  private readonly metadataTtlMs: number;
  private readonly jwksMaxAgeMs: number;
  private readonly jwksCooldownMs: number;

  constructor(private readonly opts: OidcIssuersOptions) {
    this.timeoutMs = opts.timeoutMs ?? 5_000;
    this.metadataTtlMs = opts.metadataTtlMs ?? 60 * 60_000;
    this.jwksMaxAgeMs = opts.jwksMaxAgeMs ?? 10 * 60_000;
    this.jwksCooldownMs = opts.jwksCooldownMs ?? 30_000;
  }

  /**
   * Options of an oauth4webapi request: svc's fetch, which follows no redirect (outbound.ts), and
   * http: allowed (oauth4webapi refuses it unless told; the provider URL rule has already decided that).
   */
  requestOptions(url: string): { signal: AbortSignal; [oauth.customFetch]: typeof fetch; [oauth.allowInsecureRequests]?: boolean } {
    return {
      signal: AbortSignal.timeout(this.timeoutMs),
      [oauth.customFetch]: providerFetch,
      ...(new URL(url).protocol === 'http:' ? { [oauth.allowInsecureRequests]: true } : {}),
    };
  }

  /**
   * Reads `<issuer>/.well-known/openid-configuration` now and checks it: reachable, JSON, `issuer`
   * exactly the configured string, the endpoints svc needs present and allowed. Caches the result.
   * Throws IssuerError.
   */
  async discover(issuer: string): Promise<oauth.AuthorizationServer> {
    return (await this.read(issuer)).metadata;
  }

  /** The discovery document for a login: cached, read again after its TTL (a stale copy serves if that fails). */
  async metadata(issuer: string): Promise<oauth.AuthorizationServer> {
    return (await this.entry(issuer)).metadata;
  }

  /** The key set of the issuer, for `jwtVerify`. */
  async keys(issuer: string): Promise<JWTVerifyGetKey> {
    return (await this.entry(issuer)).jwks;
  }

  private async entry(issuer: string): Promise<Entry> {
    const cached = this.entries.get(issuer);
    if (cached && Date.now() - cached.readAt < this.metadataTtlMs) return cached;
    try {
      return await this.read(issuer);
    } catch (err) {
      if (cached) return cached;
      throw err;
    }
  }

  private read(issuer: string): Promise<Entry> {
    let pending = this.reading.get(issuer);
    if (!pending) {
      pending = this.fetchMetadata(issuer).finally(() => this.reading.delete(issuer));
      this.reading.set(issuer, pending);
    }
    return pending;
  }

  private async fetchMetadata(issuer: string): Promise<Entry> {
    const problem = providerUrlProblem(issuer, this.opts.allowInsecure);
    if (problem) throw new IssuerError(problem);
    const where = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    let res: Response;
    try {
      res = await oauth.discoveryRequest(new URL(issuer), this.requestOptions(issuer));
    } catch (err) {
      throw new IssuerError(`${where} cannot be reached (${reason(err)})`);
    }
    // No redirect is followed (outbound.ts): a moved document must be configured where it is.
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new IssuerError(`${where} answered HTTP ${res.status}, not the discovery document`);
    }
    let metadata: oauth.AuthorizationServer;
    try {
      metadata = await oauth.processDiscoveryResponse(new URL(issuer), res);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === oauth.JSON_ATTRIBUTE_COMPARISON) throw notExactly((err as { cause?: { body?: { issuer?: unknown } } }).cause?.body?.issuer, issuer);
      if (code === oauth.PARSE_ERROR || code === oauth.RESPONSE_IS_NOT_JSON || code === oauth.INVALID_RESPONSE) {
        throw new IssuerError(`${where} is not a JSON discovery document`);
      }
      throw new IssuerError(`${where} cannot be read (${reason(err)})`);
    }
    // oauth4webapi compares normalized URLs; CONTRACT 5 wants the exact string (the id_token's `iss` is compared as one).
    if (metadata.issuer !== issuer) throw notExactly(metadata.issuer, issuer);
    for (const key of [...REQUIRED_ENDPOINTS, ...OPTIONAL_ENDPOINTS]) {
      const value = metadata[key];
      if (value === undefined && (OPTIONAL_ENDPOINTS as readonly string[]).includes(key)) continue;
      if (typeof value !== 'string') throw new IssuerError(`the discovery document has no ${key}`);
      const bad = providerUrlProblem(value, this.opts.allowInsecure);
      if (bad) throw new IssuerError(`the discovery document's ${key} ${bad}`);
    }
    const previous = this.entries.get(issuer);
    // Keep the key set (and what it cached) while the document still points at the same one.
    const jwks =
      previous && previous.metadata.jwks_uri === metadata.jwks_uri
        ? previous.jwks
        : createRemoteJWKSet(new URL(metadata.jwks_uri!), {
            timeoutDuration: this.timeoutMs,
            cacheMaxAge: this.jwksMaxAgeMs,
            cooldownDuration: this.jwksCooldownMs,
            [customFetch]: providerFetch,
          });
    const entry: Entry = { metadata, readAt: Date.now(), jwks };
    this.entries.set(issuer, entry);
    return entry;
  }
}

/** The issuer of the document differs from the configured one, even by a trailing slash: say both. */
const notExactly = (found: unknown, issuer: string) => new IssuerError(`the discovery document's issuer ${JSON.stringify(String(found))} is not exactly ${JSON.stringify(issuer)}`);

/** A short cause for the admin: timeouts and refused connections read as such. */
function reason(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'timed out';
  return e.cause?.code ?? e.cause?.message ?? e.message ?? 'unknown error';
}
