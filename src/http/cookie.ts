import type { Context } from 'hono';
import { parse } from 'hono/utils/cookie';
import { requestHeader } from './request-headers.ts';

/** A cookie value that Hono's parser returns as it stands: no quotes, spaces, `%` escapes or `;`. */
const PLAIN_VALUE = /^[\w-]+$/;

/**
 * The cookie `name` of the request, exactly as Hono's `getCookie(c, name)` reads it. Every
 * authenticated request reads the session cookie, and Hono's parser (a split, two regular
 * expressions and a `decodeURIComponent` per pair) cost 1.6 µs of it in a microbenchmark, 5% of
 * `GET /auth/session` in a profile. The common case, the first mention of `name` in the header being
 * the start of a pair `name=<plain value>`, is read here in a few tens of nanoseconds; any other header
 * (whitespace, quotes, escapes, the name mentioned earlier) goes to Hono's parser.
 */
export function readCookie(c: Context, name: string): string | undefined {
  return cookieOf(requestHeader(c, 'cookie'), name);
}

/** The cookie `name` of a `Cookie` header, as `readCookie` reads it (for Node's request, where there is no Context). */
export function cookieOf(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  const at = header.indexOf(name);
  if (at === -1) return undefined;
  const valueAt = at + name.length + 1;
  if (header.charCodeAt(valueAt - 1) === 61 /* = */ && pairStarts(header, at)) {
    const end = header.indexOf(';', valueAt);
    const value = end === -1 ? header.slice(valueAt) : header.slice(valueAt, end);
    if (PLAIN_VALUE.test(value)) return value;
  }
  return parse(header, name)[name];
}

/** Whether only spaces or tabs stand between `at` and the start of the header or the `;` before it. */
function pairStarts(header: string, at: number): boolean {
  for (let i = at - 1; i >= 0; i--) {
    const code = header.charCodeAt(i);
    if (code === 59) return true;
    if (code !== 32 && code !== 9) return false;
  }
  return true;
}
