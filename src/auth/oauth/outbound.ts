/**
 * Every call svc's server makes to an OAuth provider (discovery, key set, token, user info, the
 * catalog's profile calls) goes through `providerFetch`, which never follows a redirect: a 3xx
 * answer is a failure that names the host it pointed at (issue 39, finding 8). The provider URL rule
 * (`provider-urls.ts`) vets the URLs an admin saves; a redirect would let the provider pick another
 * one (an internal address, plain http:), and a 307 would even re-send the code and client secret
 * there. Token and user-info endpoints have no reason to redirect, so none is followed.
 *
 * Each call is bounded too: PROVIDER_CALL_TIMEOUT_MS for the answer and its body (arctic sets no
 * timeout: a token endpoint that never answered held a login for 338 s, one that trickled a byte a
 * second held it for good), at most MAX_PROVIDER_ANSWER_BYTES of body after decompression (a 1 MB
 * gzip answer unpacked to 1 GB and took 1.5 GB of memory per login), and JSON nested no deeper than
 * MAX_JSON_DEPTH. Discovery documents, key sets, tokens and user info are a few kilobytes.
 *
 * arctic 3 calls the global `fetch` and takes no fetch of ours (`sendTokenRequest` in its
 * request.js), so the global `fetch` is wrapped once: inside `asProviderCall` it is `providerFetch`,
 * anywhere else it is the platform's, unchanged. oauth4webapi and jose take `providerFetch` as their
 * `customFetch`; svc's own calls use it directly.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../../http/json-depth.ts';

/** The longest a provider call may take, its body read included (a caller may set a shorter bound). */
export const PROVIDER_CALL_TIMEOUT_MS = 10_000;
/** The most body a provider answer may hold, decompressed. */
export const MAX_PROVIDER_ANSWER_BYTES = 1024 * 1024;

/** A provider answer svc will not read: too large, or JSON nested too deeply. Names the host only. */
export class ProviderAnswerError extends Error {
  override readonly name = 'ProviderAnswerError';
}

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
    const timeout = AbortSignal.timeout(PROVIDER_CALL_TIMEOUT_MS);
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const res = await platformFetch(input, { ...init, redirect: 'manual', signal });
    const from = new URL(input instanceof Request ? input.url : String(input));
    if (res.status < 300 || res.status > 399) return bounded(res, from.host);
    await res.body?.cancel();
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

/**
 * The answer with its body read, within MAX_PROVIDER_ANSWER_BYTES (counted as it arrives, after
 * decompression: reading stops at the cap) and, when it is JSON, MAX_JSON_DEPTH.
 */
async function bounded(res: Response, host: string): Promise<Response> {
  if (!res.body) return res;
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (let part = await reader.read(); !part.done; part = await reader.read()) {
    size += part.value.byteLength;
    if (size > MAX_PROVIDER_ANSWER_BYTES) {
      await reader.cancel().catch(() => {});
      throw new ProviderAnswerError(`${host} answered more than ${MAX_PROVIDER_ANSWER_BYTES} bytes: not read`);
    }
    chunks.push(part.value);
  }
  const body = Buffer.concat(chunks);
  const start = body.findIndex((byte) => byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09);
  if ((body[start] === 0x7b || body[start] === 0x5b) && nestedDeeperThan(body.toString('utf8'), MAX_JSON_DEPTH)) {
    throw new ProviderAnswerError(`${host} answered JSON nested deeper than ${MAX_JSON_DEPTH} levels: not read`);
  }
  // Decoded and complete now: the length is the body's, no encoding is left to undo.
  const headers = new Headers(res.headers);
  headers.delete('content-encoding');
  headers.delete('content-length');
  const nullBody = res.status === 204 || res.status === 205 || res.status === 304;
  const out = new Response(nullBody ? null : body, { status: res.status, statusText: res.statusText, headers });
  Object.defineProperty(out, 'url', { value: res.url });
  return out;
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
 * The provider-side reason behind `err`, when there is one: a refused redirect, an answer too large or
 * too deep, a call past its time. Libraries wrap the fetch's error (arctic's "Failed to send
 * request"), and the login's log line must say what happened and name the host.
 */
export function providerFailure(err: unknown): Error | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof ProviderRedirectError || e instanceof ProviderAnswerError) return e;
    if (e.name === 'TimeoutError') return new Error(`the provider did not answer within ${PROVIDER_CALL_TIMEOUT_MS / 1000} s`, { cause: e });
  }
  return undefined;
}
