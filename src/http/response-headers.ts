import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';
import { ServerResponse, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { randomUuid } from '../uuid.ts';

/**
 * Headers every answer of an API should carry, unless the handler chose its own:
 * - `Cache-Control: no-store` (issue 24, finding 10): answers about a user (the session, the users API,
 *   plugin data) and errors must stay out of browser and shared caches; the /docs script keeps its year.
 * - `X-Content-Type-Options: nosniff`: a JSON answer is never run as a script or rendered as HTML.
 * - `Referrer-Policy: no-referrer`: redirects to identity providers and the /docs page tell no one
 *   where the browser came from.
 * Hono's `secureHeaders` sets these and more, but after the handler, through the Response's headers,
 * which costs the hot path (`presetHeader`); the rest of its set (HSTS, X-Frame-Options, COOP, CORP...) belongs
 * to the proxy or to pages (svc serves one: /docs, whose CSP says `frame-ancestors 'none'`), and would
 * keep frontends from framing asset downloads.
 *
 * Served by @hono/node-server (`c.env.outgoing`), they are preset on Node's response before the handler
 * runs (`presetHeader`), and the headers of the handler's Response override them in the one writeHead.
 * Going through the Response instead would turn its plain header object
 * into a Headers and back on GET /auth/session's hot path (measured: about 3 times the cost). Elsewhere
 * (an in-process `app.request`, another runtime) they are set on the Response after the handler.
 */
export const DEFAULT_HEADERS: [string, string][] = [
  ['Cache-Control', 'no-store'],
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
];
/** A request id the client sent is kept when it is short and plain (Hono's `requestId` rule). */
const CLIENT_REQUEST_ID = /^[\w\-=]{1,255}$/;

/** The request's id (`X-Request-Id`): the one the client sent when it is short and plain, else a new one. */
export const requestIdFor = (sent: string | undefined): string => (sent !== undefined && CLIENT_REQUEST_ID.test(sent) ? sent : randomUuid());

/** Node's response for this request, when @hono/node-server serves it (`c.env.outgoing`). */
export const nodeResponse = (c: Context) => (c.env as Partial<HttpBindings> | undefined)?.outgoing;

/**
 * Node's response as svc serves it (server.ts): headers set before the handler ran (`presetHeader`:
 * the request id, the default headers, the refreshed session cookie) go into the head in the one
 * `writeHead` call that @hono/node-server makes with the handler's headers, which win by name.
 * Node's own `setHeader` would do the same, but each call validates, and a response with headers set
 * that way merges the handler's headers one `setHeader` at a time: measured on Node 20, a head with
 * four such headers cost 10-14 µs against 5 µs in one object.
 */
export class PresetHeadersResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  /** `[lower-case name, name, value]` per header set before the handler; null: none. */
  preset: [string, string, string][] | null = null;

  override writeHead(statusCode: number, reason?: unknown, headers?: unknown): this {
    const preset = this.preset;
    if (preset) {
      this.preset = null;
      if (typeof reason === 'string') headers = this.withPreset(preset, headers);
      else reason = this.withPreset(preset, reason);
    }
    // Passed on as they came (Node reads `reason` as the headers when it is not a string).
    return super.writeHead(statusCode, reason as string, headers as OutgoingHttpHeaders);
  }

  /**
   * The head of a `200 OK` whose header lines svc wrote itself (`lines`: `Name: value\r\n` each), and the
   * body's length. Node's `writeHead` checks every header's name and value with a regular expression and
   * lower-cases each name to look for the ones it manages: for the six headers of `GET /auth/session`'s
   * lane, 13,300 instructions a request against 2,600 for bare Hono's two (callgrind, docs/benchmarks.md,
   * stop 80). Lines svc made from its own constants and ids need none of that. Node still writes what it
   * owns, as `writeHead` would: `Date`, `Connection` and `Keep-Alive` (or `Connection: close`, and the
   * connection ends after the answer) and `Content-Length`. Never with a value a client sent unless it
   * was checked to be plain (no CR, LF or other control character).
   * test/e2e/session-lane-connection.test.ts: HTTP/1.1, HTTP/1.0, `Connection: close`, a shutdown.
   */
  writeOwnHead(lines: string, contentLength: number): this {
    const self = this as unknown as NodeOutgoingInternals;
    if (this.headersSent || self._header) throw new Error('writeOwnHead: the head is written already');
    // What writeHead does besides the headers: a final status to a client that expects 100 Continue
    // and was not told to go on ends the connection (it may send a body next).
    if (self._expect_continue && !self._sent100) this.shouldKeepAlive = false;
    this.statusCode = 200;
    this.statusMessage = 'OK';
    self._contentLength = contentLength;
    // To an HTTP/1.0 client Node writes no length of its own (the body ends with the connection): the
    // answer says it, as the app's does.
    self._storeHeader(this.useChunkedEncodingByDefault ? OK_LINE + lines : `${OK_LINE}${lines}Content-Length: ${contentLength}\r\n`, null);
    return this;
  }

  /** The handler's headers with the preset ones it did not set; a Set-Cookie of both is kept. */
  private withPreset(preset: [string, string, string][], headers: unknown): unknown {
    if (headers !== undefined && (typeof headers !== 'object' || headers === null || Array.isArray(headers))) {
      // Headers as an array (nothing svc serves does this): Node merges them into these.
      for (const [, name, value] of preset) this.setHeader(name, value);
      return headers;
    }
    // A new object: the handler's may be shared by every answer of a cached Response, and must never
    // carry one request's refreshed cookie into the next.
    const given = (headers ?? {}) as OutgoingHttpHeaders;
    const merged: OutgoingHttpHeaders = {};
    for (const [lower, name, value] of preset) {
      const key = sameName(given, lower);
      if (key === undefined) merged[name] = value;
      else if (lower === 'set-cookie') merged[key] = [value, ...[given[key] ?? []].flat().map(String)];
    }
    for (const key in given) if (!Object.hasOwn(merged, key)) merged[key] = given[key];
    return merged;
  }
}

const OK_LINE = 'HTTP/1.1 200 OK\r\n';

/**
 * What `writeOwnHead` uses of Node's OutgoingMessage beyond its typed API (the same in Node 20 to 24):
 * `_storeHeader(firstLine, headers)` is what `writeHead` ends with; given no headers, it appends `Date`,
 * the keep-alive lines and `Content-Length` (from `_contentLength`) to `firstLine`.
 */
interface NodeOutgoingInternals {
  _header: string | null;
  _contentLength: number | null;
  _expect_continue?: boolean;
  _sent100?: boolean;
  _storeHeader(firstLine: string, headers: null): void;
}

/** The key of `headers` that names the header `lower` (names are case-insensitive), if any. */
function sameName(headers: OutgoingHttpHeaders, lower: string): string | undefined {
  for (const key in headers) if (key.length === lower.length && key.toLowerCase() === lower) return key;
  return undefined;
}

/**
 * Sets a header of the answer before the handler runs (request id, default headers, the refreshed
 * session cookie); a header of the same name from the handler's Response wins (a Set-Cookie is kept
 * beside the handler's). Hono's `c.header` would instead turn the Response's plain header object into
 * a `Headers` (validation per call, and @hono/node-server's slower conversion back): measured on
 * `GET /auth/session`, about 8% of its CPU. Elsewhere (an in-process `app.request`, another runtime)
 * it goes through Hono.
 */
export function presetHeader(c: Context, name: string, value: string): void {
  const outgoing = nodeResponse(c);
  if (outgoing instanceof PresetHeadersResponse) (outgoing.preset ??= []).push([name.toLowerCase(), name, value]);
  else if (outgoing) outgoing.setHeader(name, value);
  else c.header(name, value, name.toLowerCase() === 'set-cookie' ? { append: true } : undefined);
}

/**
 * Takes back a header `presetHeader` set on Node's response (the refreshed cookie, when a handler sets
 * or clears the session cookie). False when the answer is not Node's: it is up to the caller then.
 */
export function dropPresetHeader(c: Context, name: string): boolean {
  const outgoing = nodeResponse(c);
  if (!outgoing) return false;
  const lower = name.toLowerCase();
  if (outgoing instanceof PresetHeadersResponse) outgoing.preset = outgoing.preset?.filter(([n]) => n !== lower) ?? null;
  else outgoing.removeHeader(name);
  return true;
}
