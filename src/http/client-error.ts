/**
 * Requests Node's HTTP parser refuses before svc sees them: a malformed request line or header, headers
 * over Node's size limit, a chunked body that breaks its framing, headers or a body that took too long
 * to arrive (`headersTimeout`, `requestTimeout`). Node answers those itself with a bare status line and no body; here they get the
 * JSON error body of every other answer ("errors are always JSON"), then the connection closes.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import { RequestError } from '@hono/node-server';

const ANSWERS: Record<string, [status: number, code: string, message: string]> = {
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large', 'The request headers are too large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'payload_too_large', 'The chunk extensions are too large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'The request took too long to arrive'],
};
const MALFORMED: [number, string, string] = [400, 'bad_request', 'The request is not valid HTTP'];
/** Every status and code these answers use (the docs' error table lists them). */
export const PARSER_ERROR_CODES: [status: number, code: string][] = [...Object.values(ANSWERS), MALFORMED].map(([status, code]) => [status, code]);

/** CONTRACT section 2's error body. */
const errorJson = (code: string, message: string) => JSON.stringify({ error: { code, message } });

/** The raw HTTP/1.1 answer for a parser error code. */
function clientErrorAnswer(errorCode: string | undefined): string {
  const [status, code, message] = ANSWERS[errorCode ?? ''] ?? MALFORMED;
  const body = errorJson(code, message);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=UTF-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/**
 * An HTTP/1.1 request without `Host` (RFC 9112: answered 400). Node's own check (`requireHostHeader`,
 * turned off in server.ts) answers with an empty body; this one answers in JSON and closes. Put in
 * front of every 'request' listener of `server` (socket.io's, which takes its own paths, included).
 */
export function requireHost(server: Server): void {
  const listeners = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers.host !== undefined || req.httpVersion !== '1.1') {
      for (const listener of listeners) listener.call(server, req, res);
      return;
    }
    const [status, code] = MALFORMED;
    const body = errorJson(code, 'The request has no Host header');
    res.writeHead(status, { 'Content-Type': 'application/json; charset=UTF-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
    res.end(body);
  });
}

/**
 * @hono/node-server's `errorHandler`: a request it cannot turn into a URL (`GET *`, a backslash in the
 * path, a Host that is no host name) is answered 400 in JSON instead of with an empty body. Any other
 * error is one the app did not answer (its fetch threw or rejected; the app's error handler answers
 * everything it sees): logged, then a JSON 500.
 */
export function unusableRequest(logFailure: (err: unknown) => void) {
  return (err: unknown): Response => {
    const request = err instanceof RequestError;
    if (!request) logFailure(err);
    const [status, code, message] = request ? MALFORMED : [500, 'internal_error', 'Internal server error'];
    return new Response(errorJson(code, message), { status, headers: { 'Content-Type': 'application/json; charset=UTF-8' } });
  };
}

/** How long an answer to an earlier request on the connection may take before the refused one closes it. */
const PENDING_ANSWER_MS = 1000;

type Pending = NodeJS.EventEmitter & { headersSent: boolean; writableFinished: boolean; req?: { complete: boolean } };

/** Answers parser errors when Node would (no answer under way on the socket), in JSON. */
export function answerClientErrors(server: Server): void {
  // `_httpMessage`: the answer the socket is sending, Node's own test in its default handler.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: Pending | null }) => {
    const answer = () => (socket.writable ? socket.end(clientErrorAnswer(err.code), () => socket.destroy()) : socket.destroy());
    const pending = socket._httpMessage;
    // A reset, or an answer already on its way out: nothing can be said any more.
    if (err.code === 'ECONNRESET' || !socket.writable || pending?.headersSent) socket.destroy();
    // No answer owed, or the one owed is to this very request (it timed out arriving, or its body broke
    // off, e.g. a bad chunk size: the app's read of it fails and it would never be answered): say why at once.
    else if (!pending || pending.writableFinished || err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || pending.req?.complete === false) answer();
    else {
      // A request pipelined behind one whose answer is still being made: that answer goes first.
      const timer = setTimeout(() => socket.destroy(), PENDING_ANSWER_MS).unref();
      pending.once('finish', () => {
        clearTimeout(timer);
        answer();
      });
      pending.once('close', () => clearTimeout(timer));
    }
  });
}

/**
 * The error a handler meets reading a body that never fully arrived: the client left mid-body, or the
 * parser refused its framing (answered above). Node ends such a request with `aborted` / ECONNRESET.
 */
export const bodyBrokeOff = (err: Error): boolean => (err as NodeJS.ErrnoException).code === 'ECONNRESET' && err.message === 'aborted';
