/**
 * "Test" of a configured provider (`POST /auth/providers/:id/test`, docs/providers.md): one request from
 * svc's server to the provider, so an admin sees at once whether the saved settings reach it. The admin
 * console cannot make that request itself (its Content-Security-Policy allows only svc's origin, and
 * an admin's browser should not call identity providers with svc's settings anyway).
 *
 * - `oidc`: reads `<issuer>/.well-known/openid-configuration` and checks it as the save does (JSON,
 *   `issuer` exactly the configured one, the endpoints svc calls present and allowed). It does not
 *   touch the discovery cache of logins (oidc-issuers.ts).
 * - `arctic` and `custom`: builds the authorization URL as a login would (a throwaway state and
 *   verifier, nothing stored) and sends it a GET: a 2xx (the provider's sign-in page) or a 3xx (its
 *   redirect to one) is a pass; a 4xx or 5xx, or a redirect back to svc's callback with `error=`, a
 *   failure whose status (and error code) is reported.
 *
 * The URL must pass the provider URL rule now (provider-urls.ts: `https:`, `http:` to loopback or with
 * SVC_ALLOW_INSECURE_PROVIDER_URLS=1), no redirect is followed, the request and its body are bounded in
 * time (CHECK_TIMEOUT_MS) and size (MAX_CHECK_BYTES). The answer names what was checked, never a secret.
 */
import { AnswerTooLarge, readBounded } from '../../http/read-bounded.ts';
import { arctic } from './arctic.ts';
import { providerClient } from './client.ts';
import type { OidcIssuers } from './oidc-issuers.ts';
import { providerUrlProblem } from './provider-urls.ts';
import type { ProviderDoc } from './providers.ts';

/** The longest a check may take, its body read included. */
export const CHECK_TIMEOUT_MS = 5_000;
/** The most of a discovery document a check reads (real ones are a few kilobytes). */
export const MAX_CHECK_BYTES = 256 * 1024;

export interface ProviderCheck {
  ok: boolean;
  /** The URL requested (or that would have been). */
  checked: string;
  /** The provider's HTTP status, when it answered. */
  status?: number;
  /** What went wrong, or what passed, for a person. */
  message?: string;
}

/** Endpoints a discovery document must name (svc sends the browser to or calls them). */
const REQUIRED_ENDPOINTS = ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const;

export async function checkProvider(doc: ProviderDoc, clientSecret: string, issuers: OidcIssuers, allowInsecure: boolean): Promise<ProviderCheck> {
  if (doc.type === 'oidc') return checkDiscovery(doc.config.issuer ?? '', allowInsecure);
  let url: string;
  try {
    const client = await providerClient(doc, clientSecret, issuers);
    url = (await client.authorizationUrl(arctic().generateState(), client.pkce ? arctic().generateCodeVerifier() : null, client.nonce ? arctic().generateState() : null)).toString();
  } catch (err) {
    return { ok: false, checked: '', message: `the authorization URL cannot be built: ${(err as Error).message}` };
  }
  const problem = providerUrlProblem(url, allowInsecure);
  if (problem) return { ok: false, checked: url, message: `the authorization URL ${problem}` };
  const answer = await get(url);
  if ('message' in answer) return { ok: false, checked: url, message: answer.message };
  const { res } = answer;
  await res.body?.cancel().catch(() => {});
  const refused = refusedBack(res, url, doc.redirectUri);
  if (refused) return { ok: false, checked: url, status: res.status, message: `the provider sent the browser back to svc with error=${refused}: check the client id, the redirect URI and the scopes` };
  if (res.status >= 200 && res.status < 400) {
    return { ok: true, checked: url, status: res.status, message: res.status < 300 ? 'the provider answered its sign-in page' : `the provider redirects to ${target(res, url)} (its sign-in page; not followed)` };
  }
  return { ok: false, checked: url, status: res.status, message: `the provider answered HTTP ${res.status}: check the client id, the redirect URI and the scopes` };
}

async function checkDiscovery(issuer: string, allowInsecure: boolean): Promise<ProviderCheck> {
  const problem = providerUrlProblem(issuer, allowInsecure);
  const checked = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  if (problem) return { ok: false, checked, message: `the issuer ${problem}` };
  const answer = await get(checked);
  if ('message' in answer) return { ok: false, checked, message: answer.message };
  const { res } = answer;
  const status = res.status;
  if (status !== 200) {
    await res.body?.cancel().catch(() => {});
    const moved = status >= 300 && status < 400 ? ` redirecting to ${target(res, checked)} (not followed: configure the issuer where its document is)` : '';
    return { ok: false, checked, status, message: `answered HTTP ${status}${moved}, not the discovery document` };
  }
  let document: unknown;
  try {
    document = JSON.parse(await readBounded(res, MAX_CHECK_BYTES));
  } catch (err) {
    if (err instanceof AnswerTooLarge) return { ok: false, checked, status, message: `the answer is larger than ${MAX_CHECK_BYTES / 1024} KiB: not a discovery document` };
    if (err instanceof SyntaxError) return { ok: false, checked, status, message: 'the answer is not JSON' };
    return { ok: false, checked, status, message: `the answer cannot be read (${reason(err)})` };
  }
  if (!document || typeof document !== 'object' || Array.isArray(document)) return { ok: false, checked, status, message: 'the answer is not a JSON object' };
  const metadata = document as Record<string, unknown>;
  if (metadata.issuer !== issuer) return { ok: false, checked, status, message: `the document's issuer ${JSON.stringify(String(metadata.issuer))} is not exactly ${JSON.stringify(issuer)}` };
  for (const key of REQUIRED_ENDPOINTS) {
    const value = metadata[key];
    if (typeof value !== 'string') return { ok: false, checked, status, message: `the document has no ${key}` };
    const bad = providerUrlProblem(value, allowInsecure);
    if (bad) return { ok: false, checked, status, message: `the document's ${key} ${bad}` };
  }
  return { ok: true, checked, status, message: 'the discovery document is valid' };
}

/** One GET, no redirect followed, within CHECK_TIMEOUT_MS; a failure to get any answer becomes a message. */
async function get(url: string): Promise<{ res: Response } | { message: string }> {
  try {
    // The platform's fetch (not inside a provider call): a 3xx comes back as itself, and is reported.
    return { res: await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(CHECK_TIMEOUT_MS), headers: { accept: 'application/json, text/html;q=0.9' } }) };
  } catch (err) {
    return { message: `${new URL(url).host} cannot be reached (${reason(err)})` };
  }
}

/**
 * The `error` of a redirect back to svc's own callback (an IdP that refuses an authorization request
 * with a valid redirect URI answers that way, RFC 6749 4.1.2.1), or undefined for any other answer.
 */
function refusedBack(res: Response, from: string, redirectUri: string): string | undefined {
  const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
  if (!location || !URL.canParse(location, from)) return undefined;
  const to = new URL(location, from);
  if (`${to.origin}${to.pathname}` !== redirectUri.replace(/[?#].*$/, '')) return undefined;
  const error = to.searchParams.get('error');
  return error ? error.replace(/[^\w.-]/g, '').slice(0, 64) || 'unknown' : undefined;
}

/** Where a 3xx points: scheme and host only (its path and query may carry anything). */
function target(res: Response, from: string): string {
  const location = res.headers.get('location');
  if (!location || !URL.canParse(location, from)) return 'no usable location';
  const to = new URL(location, from);
  return `${to.protocol}//${to.host}`;
}

/** A short cause: timeouts and refused connections read as such. */
function reason(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return `no answer within ${CHECK_TIMEOUT_MS / 1000} s`;
  return e.cause?.code ?? e.cause?.message ?? e.message ?? 'unknown error';
}
