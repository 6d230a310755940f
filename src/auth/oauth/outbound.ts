/**
 * Every call svc's server makes to an OAuth provider (discovery, key set, token, user info, the
 * catalog's profile calls) goes through `providerFetch`, which never follows a redirect: a 3xx
 * answer is a failure that names the host it pointed at (issue 39, finding 8). The provider URL rule
 * (`provider-urls.ts`) vets the URLs an admin saves; a redirect would let the provider pick another
 * one (an internal address, plain http:), and a 307 would even re-send the code and client secret
 * there. Token and user-info endpoints have no reason to redirect, so none is followed.
 *
 * arctic 3 calls the global `fetch` and takes no fetch of ours (`sendTokenRequest` in its
 * request.js), so the global `fetch` is wrapped once: inside `asProviderCall` it is `providerFetch`,
 * anywhere else it is the platform's, unchanged. oauth4webapi and jose take `providerFetch` as their
 * `customFetch`; svc's own calls use it directly.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** A provider answered a redirect, which svc does not follow; the message names both hosts, never a URL's path or query. */
export class ProviderRedirectError extends Error {
  override readonly name = 'ProviderRedirectError';
}

interface Scope {
  calls: AsyncLocalStorage<true>;
}

/** One wrapper per process, even when this module is loaded more than once (test isolation). */
const KEY = Symbol.for('svc.providerCall');
const scope: Scope = ((globalThis as Record<symbol, unknown>)[KEY] as Scope | undefined) ?? install();

function install(): Scope {
  const calls = new AsyncLocalStorage<true>();
  const platformFetch = globalThis.fetch;
  async function withoutRedirects(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const res = await platformFetch(input, { ...init, redirect: 'manual' });
    if (res.status < 300 || res.status > 399) return res;
    await res.body?.cancel();
    const from = new URL(input instanceof Request ? input.url : String(input));
    const location = res.headers.get('location');
    const to = location && URL.canParse(location, from) ? new URL(location, from) : null;
    const target = to ? `${to.protocol}//${to.host}` : 'no usable location';
    throw new ProviderRedirectError(`${from.host} answered ${res.status} redirecting to ${target}: provider calls do not follow redirects`);
  }
  globalThis.fetch = function fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    return calls.getStore() ? withoutRedirects(input, init) : platformFetch(input, init);
  };
  const made: Scope = { calls };
  (globalThis as Record<symbol, unknown>)[KEY] = made;
  return made;
}

/** Runs `fn` with every `fetch` it makes (arctic's included) refusing redirects. */
export function asProviderCall<T>(fn: () => Promise<T>): Promise<T> {
  return scope.calls.run(true, fn);
}

/**
 * `fetch` for a provider URL: redirects are not followed, a 3xx throws ProviderRedirectError.
 * It goes through the current global `fetch`, so a test's stand-in for a fixed provider host
 * (test/support/route-hosts.ts) still applies.
 */
export const providerFetch: typeof fetch = (input, init) => asProviderCall(() => globalThis.fetch(input, init));

/**
 * The refused redirect behind `err`, when there is one: libraries wrap the fetch's error (arctic's
 * "Failed to send request"), and the login's log line must name the host.
 */
export function refusedRedirect(err: unknown): ProviderRedirectError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof ProviderRedirectError) return e;
  }
  return undefined;
}
