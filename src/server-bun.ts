/**
 * The Bun door: the service served by `Bun.serve`, Bun's own Web-standard server, which hands the app the
 * `Request` it parsed (src/web-door.ts holds what the Web doors share). socket.io runs on
 * @socket.io/bun-engine, its engine for `Bun.serve`. `bun bin/start.js` (`npm run start:bun`) lands here;
 * what only the Node door does is listed in docs/runtimes.md, "Differences".
 */
import { pathToFileURL } from 'node:url';
import type { RuntimeBindings } from './http/env.ts';
import type { Logger } from './logger.ts';
import { runService, type RunningServer } from './service.ts';
import { startWebDoor } from './web-door.ts';

/** The part of Bun's API this door uses (no @types/bun for one call). */
interface BunServer {
  readonly port: number;
  requestIP(request: Request): { address: string } | null;
  /** Stops listening; resolves once in-flight requests are answered (`true`: closes them at once). */
  stop(closeActiveConnections?: boolean): Promise<void>;
}
interface BunServeOptions {
  hostname: string;
  port: number;
  /** Seconds a connection may sit idle (Bun's default is 10). */
  idleTimeout: number;
  maxRequestBodySize: number;
  fetch(request: Request, server: BunServer): Response | Promise<Response>;
  websocket: unknown;
  error(err: Error): Response;
}
declare const Bun: { serve(options: BunServeOptions): BunServer };

/**
 * The app's `env` for a request: the peer's address is asked of `Bun.serve` only when something reads it
 * (client-ip.ts; GET /auth/session's lane never does), as a getter on the class. An object literal with
 * a getter, made per request, cost svc on Bun about 1 µs a request more (a closure and an accessor each
 * time): 21.4 against 20.3 µs in alternating turns, local cache, pinned (docs/benchmarks.md).
 */
class BunBindings implements RuntimeBindings {
  readonly webDoor = true;
  constructor(
    private readonly request: Request,
    private readonly server: BunServer,
  ) {}
  get clientAddress(): string | undefined {
    return this.server.requestIP(this.request)?.address;
  }
}

export const startServer = (env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<RunningServer> =>
  startWebDoor(
    {
      runtime: 'bun',
      listen({ host, port, serve, realtime, failed, bodyLimit }) {
        const server = Bun.serve({
          hostname: host,
          port,
          // As the Node door: idle keep-alive connections close after 5 s (behind nginx, its keepalive_timeout 4s closes them first).
          idleTimeout: 5,
          // Bun refuses a larger body itself (413); the app's own limit (src/app.ts) answers in JSON below it.
          maxRequestBodySize: bodyLimit + 64 * 1024,
          fetch(request, bun) {
            if (realtime.isSocketRequest(request)) return realtime.handle(request, bun);
            return serve(request, new BunBindings(request, bun));
          },
          websocket: realtime.websocket,
          error: failed,
        });
        // Bun closes idle keep-alive connections at once and the busy ones after their answer.
        return { port: server.port, stop: () => server.stop(), stopNow: () => server.stop(true) };
      },
    },
    env,
    logger,
  );

export const main = () => runService(() => startServer());

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
