/**
 * The Deno door: the service served by `Deno.serve`, Deno's own Web-standard server (src/web-door.ts
 * holds what the Web doors share). socket.io runs on @socket.io/bun-engine, its WebSockets upgraded by
 * Deno (src/realtime/deno-websockets.ts). `deno run -A bin/start.js` (`npm run start:deno`) lands here;
 * what only the Node door does is listed in docs/runtimes.md, "Differences".
 */
import { pathToFileURL } from 'node:url';
import type { Logger } from './logger.ts';
import { denoUpgrades } from './realtime/deno-websockets.ts';
import { runService, type RunningServer } from './service.ts';
import { startWebDoor } from './web-door.ts';

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

export const startServer = (env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<RunningServer> =>
  startWebDoor(
    {
      runtime: 'deno',
      listen({ host, port, serve, realtime, failed }) {
        const server = Deno.serve(
          { hostname: host, port, onListen: () => {} /* svc logs its own line */, onError: failed },
          (request, info) => {
            if (realtime.isSocketRequest(request)) {
              const upgrades = denoUpgrades(realtime.engine);
              const polling = abortOnlyBeforeAnswer(request);
              return realtime.handle(polling.request, upgrades.server).then((response) => {
                polling.answered();
                return upgrades.upgraded() ?? response;
              });
            }
            return serve(request, { clientAddress: info.remoteAddr.hostname, webDoor: true });
          },
        );
        // Deno has no way to cut the connections a hanging request holds: the stop goes on without it.
        return { port: server.addr.port, stop: () => server.shutdown(), stopNow: () => Promise.resolve() };
      },
    },
    env,
    logger,
  );

export const main = () => runService(() => startServer());

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
