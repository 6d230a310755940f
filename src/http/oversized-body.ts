/**
 * A 413 must reach the client (issue 52 item 13). Two things stood in its way:
 * - `Expect: 100-continue`: Node answers `100 Continue` by itself before the app sees the request, so
 *   a client (curl sends it above 1 KiB) starts the very upload svc then refuses. Here a declared
 *   `Content-Length` over the body limit gets no 100: the request goes to the app as it is, whose body
 *   limit answers 413 from the header alone (the body is never asked for).
 * - Closing at once: a 413 comes while the client is still uploading, and Node closes the connection
 *   right after it (`Connection: close`). Bytes that arrive at a closed socket, or were still unread
 *   in it, make the kernel answer with a reset, and a reset can make the client drop the 413 it had
 *   not read yet (curl lost it 2 times in 5, Node's client got EPIPE). So the close lingers, as nginx's
 *   and Apache's do: the answer is sent, svc's side is shut (FIN), what the client still sends is read
 *   and dropped, and the socket closes once the client closes too, or after `lingerBytes` or `lingerMs`,
 *   whichever comes first (a client cannot hold the socket or make svc read without end).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface OversizedBodyOptions {
  /** `server.bodyLimit`: a declared `Content-Length` above it gets no `100 Continue`. */
  bodyLimit: number;
  /**
   * About this many bytes are read and dropped after an answer that left the body unread (4 MiB):
   * checked every 20 ms, as Node's parser reads the socket without telling (a fast client gets a few MiB more in).
   */
  lingerBytes?: number;
  /** For at most this long (2 s); the client has had the answer since the start of it. */
  lingerMs?: number;
}

const MiB = 1024 * 1024;

/** Whether a request says its body is larger than `limit` (`Content-Length`; chunked bodies are counted as they come, by the app). */
export const declaredTooLarge = (req: IncomingMessage, limit: number): boolean => Number(req.headers['content-length'] ?? 0) > limit;

/**
 * Installs both on `server`: call it after every other 'request' listener is in place.
 * @example
 * const server = createServer(listener);
 * refuseOversizedBodies(server, { bodyLimit: config.server.bodyLimit });
 */
export function refuseOversizedBodies(server: Server, { bodyLimit, lingerBytes = 4 * MiB, lingerMs = 2000 }: OversizedBodyOptions): void {
  server.on('checkContinue', function checkContinue(req: IncomingMessage, res: ServerResponse) {
    // Node's own behaviour, except for a body the app will refuse anyway: no invitation to send it.
    if (!declaredTooLarge(req, bodyLimit)) res.writeContinue();
    server.emit('request', req, res);
  });

  /** The request whose answer is the socket's latest: the one Node closes the connection after. */
  const current = new WeakMap<Socket, IncomingMessage>();
  server.on('request', (req: IncomingMessage) => current.set(req.socket, req));

  server.on('connection', (socket: Socket) => {
    // Node's http server ends a connection after a `Connection: close` answer with `destroySoon`
    // (end, then destroy once written). Where that answer left the request's body unread, this
    // socket's own `destroySoon` lingers instead.
    const destroySoon = socket.destroySoon.bind(socket);
    socket.destroySoon = function lingeringDestroySoon() {
      const req = current.get(socket);
      if (!req || req.complete || socket.destroyed) return destroySoon();
      linger(socket, req, lingerBytes, lingerMs);
    };
  });
}

function linger(socket: Socket, req: IncomingMessage, maxBytes: number, maxMs: number): void {
  const start = socket.bytesRead;
  const close = () => socket.destroy();
  const timer = setTimeout(close, maxMs);
  // Node's parser reads the socket itself (no 'data' events; a dropped body reaches no listener):
  // the socket's count of bytes read says how much came.
  const counter = setInterval(() => socket.bytesRead - start > maxBytes && close(), 20);
  socket.once('close', () => {
    clearTimeout(timer);
    clearInterval(counter);
  });
  // Whatever still reads the body (the app gave up on it): the rest is dropped as it arrives.
  req.removeAllListeners('data');
  req.resume();
  socket.end();
}
