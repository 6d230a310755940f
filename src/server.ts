import { getRequestListener } from '@hono/node-server';
import { createServer, type IncomingMessage } from 'node:http';
import { Server as NetServer, type AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { sessionLane } from '../routes/auth/session.ts';
import { answerClientErrors, requireHost, unusableRequest } from './http/client-error.ts';
import { refuseOversizedBodies } from './http/oversized-body.ts';
import { PresetHeadersResponse } from './http/response-headers.ts';
import type { Logger } from './logger.ts';
import { keepTickObjectShape } from './tick-object-shape.ts';
import { listenError, listeningUrl, logListening, openService, runService, type RunningServer } from './service.ts';

export type { RunningServer } from './service.ts';

/**
 * The Node door: the service (src/service.ts) served by Node's HTTP server through @hono/node-server,
 * socket.io on the same server. Throws (before listening) on a bad config or an unreachable
 * store/database, with a message that names the culprit.
 */
export async function startServer(env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<RunningServer> {
  keepTickObjectShape();
  const service = await openService(env, logger);
  const { instance, app } = service;
  const { config, logger: log } = instance;

  // Slow clients (slowloris) cannot hold sockets: headers within 10 s, a whole request within
  // 30 s, checked every second (Node's default check runs every 30 s).
  let shuttingDown = false;
  /**
   * Once shutting down, every answer tells its keep-alive client to close (`Connection: close`), and
   * the connection ends after it: requests the client would send on the old connection would
   * otherwise race its close (a reset). Decided when the answer's head is written, not when its request
   * arrived, so answers to requests that were in flight at the signal close their connection too (left
   * open, it would be closed as idle right after the answer, racing the client's next request on it).
   */
  class ShutdownAwareResponse<Request extends IncomingMessage = IncomingMessage> extends PresetHeadersResponse<Request> {
    override writeHead(statusCode: number, reason?: unknown, headers?: unknown): this {
      if (shuttingDown) this.shouldKeepAlive = false;
      return super.writeHead(statusCode, reason, headers);
    }

    override writeOwnHead(lines: string, contentLength: number): this {
      if (shuttingDown) this.shouldKeepAlive = false;
      return super.writeOwnHead(lines, contentLength);
    }

    /**
     * The answers finished during one turn of the event loop go to their sockets together, once the
     * turn's I/O callbacks have run (`setImmediate`), as the store batches its commands to Redis. Under
     * load, one read of the sockets brings many requests: parsed and answered one after the other, then
     * written one after the other, each phase stays warm in the CPU's caches, and the clients are woken
     * once per batch rather than once per answer. Measured on GET /auth/session with the local cache (its
     * answers are ready at once), A/B in alternation, autocannon -c 50: 25-28k -> 36-39k requests/s,
     * server CPU per request 23.5-27.5 + 10.8-11.2 -> 17.5-18.7 + 6.4-7.7 µs (user + system), p99 4-5 ->
     * 3-4 ms. An answer is late by less than a turn; one whose socket closed meanwhile is dropped by Node
     * as it would drop a late asynchronous one.
     */
    override end(...args: unknown[]): this {
      ending.push([this, args]);
      if (ending.length === 1) setImmediate(endAll);
      return this;
    }

    /** Node's `end`, for `endAll`. */
    endNow(args: unknown[]): void {
      (super.end as (...a: unknown[]) => this)(...args);
    }
  }
  /** Answers whose `end` waits for the end of this turn of the event loop (`ShutdownAwareResponse.end`). */
  let ending: [ShutdownAwareResponse, unknown[]][] = [];
  const endAll = () => {
    const due = ending;
    ending = [];
    for (const [response, args] of due) {
      try {
        response.endNow(args);
      } catch (err) {
        // What `end` would have thrown to its caller (a body of the wrong type): that answer fails alone.
        log.error({ err }, 'an answer could not be sent');
        response.destroy(err as Error);
      }
    }
  };
  const serverOptions = {
    headersTimeout: 10_000,
    requestTimeout: 30_000,
    keepAliveTimeout: 5_000,
    connectionsCheckingInterval: 1_000,
    requireHostHeader: false, // answered in JSON by `requireHost`
    ServerResponse: ShutdownAwareResponse,
  };
  // The app behind `GET /auth/session`'s lane (routes/auth/session.ts), which answers the plainest
  // form of that request itself.
  const errorHandler = unusableRequest((err) => log.error({ err }, 'a request failed outside the app'));
  const http = createServer(serverOptions, sessionLane(instance, getRequestListener(app.fetch, { hostname: config.env.host, errorHandler })));
  answerClientErrors(http);
  try {
    // socket.io on the same server, ready before the first connection arrives.
    await instance.realtime.attach(http);
    // In front of every listener, socket.io's (it takes its paths before svc's) included.
    requireHost(http);
    // No `100 Continue` for a body over the limit, and a 413 that reaches a client still uploading.
    refuseOversizedBodies(http, { bodyLimit: config.server.bodyLimit });
    await new Promise<void>((resolve, reject) => {
      const refused = (err: Error) => reject(listenError(config, err));
      http.once('error', refused);
      http.listen(config.env.port, config.env.host, () => {
        http.off('error', refused);
        resolve();
      });
    });
  } catch (err) {
    await instance.realtime.close();
    await service.close();
    throw err;
  }
  const { port } = http.address() as AddressInfo;
  const url = listeningUrl(config.env.host, port);
  logListening(instance, url, port);

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      shuttingDown = true;
      log.info('shutting down: finishing in-flight requests');
      let realtimeClosed: Promise<void> | undefined;
      await new Promise<void>((resolve) => {
        // Stops listening and keeps the open connections: busy ones close after their answer (it says
        // `Connection: close`). http.Server's own close (Node 19+) also closes every idle keep-alive
        // one at once, which races a reverse proxy that has just sent a request on it: the request
        // meets a reset, and nginx does not retry a POST (502; 1-2 per restart under load). So behind
        // a proxy (`server.trustProxy`), idle connections are left to end as they always do: the proxy
        // closes them first (deploy/nginx.conf: keepalive_timeout 4s, below svc's 5 s keepAliveTimeout),
        // or svc at 5 s. Without one, they close at once: a browser repeats a request whose reused
        // connection reset before any answer.
        NetServer.prototype.close.call(http, () => resolve());
        // Right after refusing new connections: socket.io's connections (upgraded ones are not the
        // HTTP server's to close) end now, and their clients reconnect to another instance.
        realtimeClosed = instance.realtime.close();
        const closeIdle = () => http.closeIdleConnections();
        const idle = config.server.trustProxy > 0 ? undefined : setInterval(closeIdle, 100);
        if (idle) closeIdle();
        const hard = setTimeout(() => http.closeAllConnections(), 10_000);
        http.once('close', () => {
          clearInterval(idle);
          clearTimeout(hard);
          // What http.Server#close would have stopped too: Node's check of slow requests (an unref'd
          // timer, but it holds the server and the app in a process that goes on, as tests do).
          const checking = Object.getOwnPropertySymbols(http).find((s) => s.description === 'http.server.connectionsCheckingInterval');
          if (checking) clearInterval((http as unknown as Record<symbol, NodeJS.Timeout>)[checking]);
        });
      });
      await realtimeClosed;
      await service.close();
      log.info('stopped');
    })());
  return { url, instance, close };
}

export const main = () => runService(() => startServer());

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
