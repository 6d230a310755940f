/**
 * The Bun door: the service (src/service.ts) served by `Bun.serve`, Bun's own Web-standard server, which
 * hands the app the `Request` it parsed (measured against Bun's `node:http` layer in docs/runtimes.md).
 * socket.io runs on @socket.io/bun-engine, its engine for `Bun.serve`. `bun bin/start.js` (`npm run
 * start:bun`) lands here; the Node-only parts of the Node door (its parser-error answers, the session
 * lane on Node's request objects) have Bun's own behaviour instead (docs/runtimes.md, "Differences").
 */
import { pathToFileURL } from 'node:url';
import { webSessionLane } from '../routes/auth/session.ts';
import type { Logger } from './logger.ts';
import { listenError, listeningUrl, logListening, openService, runService, type RunningServer } from './service.ts';
import type { RuntimeBindings } from './http/env.ts';

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
  fetch(request: Request, server: BunServer): Response | Promise<Response | undefined> | undefined;
  websocket?: unknown;
  error(err: Error): Response;
}
declare const Bun: { serve(options: BunServeOptions): BunServer };

export async function startServer(env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<RunningServer> {
  const service = await openService(env, logger);
  const { instance, app } = service;
  const { config, logger: log } = instance;
  const internalError = JSON.stringify({ error: { code: 'internal_error', message: 'Something went wrong on our side' } });
  // The plainest `GET /auth/session` before the app, as the Node door does (routes/auth/session.ts).
  const serve = webSessionLane(instance, (request, bindings) => app.fetch(request, bindings));
  let server: BunServer;
  try {
    const realtime = await instance.realtime.attachEngine();
    server = Bun.serve({
      hostname: config.env.host,
      port: config.env.port,
      // As the Node door: idle keep-alive connections close after 5 s (behind nginx, its keepalive_timeout 4s closes them first).
      idleTimeout: 5,
      // Bun refuses a larger body itself (413); the app's own limit (src/app.ts) answers in JSON below it.
      maxRequestBodySize: config.server.bodyLimit + 64 * 1024,
      fetch(request, bun) {
        if (realtime.isSocketRequest(request)) return realtime.handle(request, bun);
        const bindings: RuntimeBindings = { clientAddress: bun.requestIP(request)?.address, webDoor: true };
        return serve(request, bindings);
      },
      websocket: realtime.websocket,
      error(err) {
        log.error({ err }, 'a request failed outside the app');
        return new Response(internalError, { status: 500, headers: { 'Content-Type': 'application/json' } });
      },
    });
  } catch (err) {
    await instance.realtime.close();
    await service.close();
    throw listenError(config, err as Error);
  }
  const url = listeningUrl(config.env.host, server.port);
  logListening(instance, url, server.port, 'bun');

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      log.info('shutting down: finishing in-flight requests');
      const stopped = server.stop();
      // socket.io's connections end now, and their clients reconnect to another instance.
      await instance.realtime.close();
      // Bun closes idle keep-alive connections at once and the busy ones after their answer; one that
      // hangs is cut after 10 s, as the Node door does.
      let hard: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([stopped, new Promise<void>((resolve) => (hard = setTimeout(() => void server.stop(true).then(resolve), 10_000)))]);
      clearTimeout(hard);
      await service.close();
      log.info('stopped');
    })());
  return { url, instance, close };
}

export const main = () => runService(() => startServer());

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
