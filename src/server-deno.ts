/**
 * The Deno door: the service (src/service.ts) served by `Deno.serve`, Deno's own Web-standard server
 * (measured against Deno's `node:http` layer in docs/runtimes.md). socket.io runs on
 * @socket.io/bun-engine, its WebSockets upgraded by Deno (src/realtime/deno-websockets.ts).
 * `deno run -A bin/start.js` (`npm run start:deno`) lands here; the Node-only parts of the Node door
 * (its parser-error answers, the session lane on Node's request objects) have Deno's own behaviour
 * instead (docs/runtimes.md, "Differences").
 */
import { pathToFileURL } from 'node:url';
import { webSessionLane } from '../routes/auth/session.ts';
import type { RuntimeBindings } from './http/env.ts';
import type { Logger } from './logger.ts';
import { denoUpgrades } from './realtime/deno-websockets.ts';
import { listenError, listeningUrl, logListening, openService, runService, type RunningServer } from './service.ts';

/** The part of Deno's API this door uses (no Deno types in a Node project for one call). */
interface DenoServer {
  readonly addr: { port: number };
  /** Stops listening; resolves once in-flight requests are answered. */
  shutdown(): Promise<void>;
}
interface DenoServeOptions {
  hostname: string;
  port: number;
  onListen(): void;
  onError(err: unknown): Response;
}
declare const Deno: {
  serve(options: DenoServeOptions, handler: (request: Request, info: { remoteAddr: { hostname: string } }) => Response | Promise<Response>): DenoServer;
};

/**
 * A socket.io request whose `signal` aborts only when the client goes before its answer. Deno's own
 * aborts after every answer too (its "legacy" behaviour, unless `--unstable-no-legacy-abort`), which
 * the engine takes for a polling client that left: it closed each connection right after its handshake.
 * A WebSocket upgrade keeps Deno's request, which `Deno.upgradeWebSocket` needs.
 */
function abortOnlyBeforeAnswer(request: Request): { request: Request; answered(): void } {
  if (request.headers.has('upgrade')) return { request, answered: () => {} };
  const left = new AbortController();
  let answered = false;
  request.signal.addEventListener('abort', () => answered || left.abort(), { once: true });
  return { request: new Request(request, { signal: left.signal }), answered: () => void (answered = true) };
}

export async function startServer(env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<RunningServer> {
  const service = await openService(env, logger);
  const { instance, app } = service;
  const { config, logger: log } = instance;
  const internalError = JSON.stringify({ error: { code: 'internal_error', message: 'Something went wrong on our side' } });
  // The plainest `GET /auth/session` before the app, as the Node door does (routes/auth/session.ts).
  const serve = webSessionLane(instance, (request, bindings) => app.fetch(request, bindings));
  let server: DenoServer;
  try {
    const realtime = await instance.realtime.attachEngine();
    server = Deno.serve(
      {
        hostname: config.env.host,
        port: config.env.port,
        onListen: () => {}, // svc logs its own line below
        onError(err) {
          log.error({ err }, 'a request failed outside the app');
          return new Response(internalError, { status: 500, headers: { 'Content-Type': 'application/json' } });
        },
      },
      (request, info) => {
        if (realtime.isSocketRequest(request)) {
          const upgrades = denoUpgrades(realtime.engine);
          const polling = abortOnlyBeforeAnswer(request);
          return realtime.handle(polling.request, upgrades.server).then((response) => {
            polling.answered();
            return upgrades.upgraded() ?? response;
          });
        }
        const bindings: RuntimeBindings = { clientAddress: info.remoteAddr.hostname, webDoor: true };
        return serve(request, bindings);
      },
    );
  } catch (err) {
    await instance.realtime.close();
    await service.close();
    throw listenError(config, err as Error);
  }
  const url = listeningUrl(config.env.host, server.addr.port);
  logListening(instance, url, server.addr.port, 'deno');

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      log.info('shutting down: finishing in-flight requests');
      const stopped = server.shutdown();
      // socket.io's connections end now, and their clients reconnect to another instance.
      await instance.realtime.close();
      // A request that hangs does not hold the stop for more than 10 s, as in the Node door.
      let hard: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([stopped, new Promise<void>((resolve) => (hard = setTimeout(resolve, 10_000)))]);
      clearTimeout(hard);
      await service.close();
      log.info('stopped');
    })());
  return { url, instance, close };
}

export const main = () => runService(() => startServer());

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
