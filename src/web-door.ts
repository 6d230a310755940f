/**
 * What the Web-standard doors share (src/server-bun.ts, src/server-deno.ts): the service, socket.io on
 * its engine for `Request`/`Response` servers, `GET /auth/session`'s lane in front of the app, the start-up
 * line and the graceful stop. A door adds only its runtime's `serve` call (`listen`).
 */
import { webSessionLane } from '../routes/auth/session.ts';
import type { RuntimeBindings } from './http/env.ts';
import type { Logger } from './logger.ts';
import type { EngineRealtime } from './realtime/index.ts';
import { listenError, listeningUrl, logListening, openService, type RunningServer } from './service.ts';

/** A server a door started. */
export interface WebListener {
  readonly port: number;
  /** Stops listening; resolves once the answers in flight are out. */
  stop(): Promise<void>;
  /** Cuts what still hangs 10 s after `stop` (as the Node door does). */
  stopNow(): Promise<void>;
}

export interface WebDoor {
  runtime: 'bun' | 'deno';
  /** Starts the runtime's server on `host`:`port`; throws when it cannot listen. */
  listen(options: {
    host: string;
    port: number;
    /** The app's answer, with the lane in front: for every request that is not socket.io's. */
    serve(request: Request, bindings: RuntimeBindings): Response | Promise<Response>;
    realtime: EngineRealtime;
    /** The answer to a request that failed outside the app (logged). */
    failed(err: unknown): Response;
    bodyLimit: number;
  }): WebListener;
}

const INTERNAL_ERROR = JSON.stringify({ error: { code: 'internal_error', message: 'Something went wrong on our side' } });

export async function startWebDoor(door: WebDoor, env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<RunningServer> {
  const service = await openService(env, logger);
  const { instance, app } = service;
  const { config, logger: log } = instance;
  // The plainest `GET /auth/session` before the app, as the Node door does (routes/auth/session.ts).
  const serve = webSessionLane(instance, (request, bindings) => app.fetch(request, bindings));
  const failed = (err: unknown) => {
    log.error({ err }, 'a request failed outside the app');
    return new Response(INTERNAL_ERROR, { status: 500, headers: { 'Content-Type': 'application/json' } });
  };
  let server: WebListener;
  try {
    const realtime = await instance.realtime.attachEngine();
    server = door.listen({ host: config.env.host, port: config.env.port, serve, realtime, failed, bodyLimit: config.server.bodyLimit });
  } catch (err) {
    await instance.realtime.close();
    await service.close();
    throw listenError(config, err as Error);
  }
  const url = listeningUrl(config.env.host, server.port);
  logListening(instance, url, server.port, door.runtime);

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      log.info('shutting down: finishing in-flight requests');
      const stopped = server.stop();
      // socket.io's connections end now, and their clients reconnect to another instance.
      await instance.realtime.close();
      let hard: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([stopped, new Promise<void>((resolve) => (hard = setTimeout(() => void server.stopNow().then(resolve), 10_000)))]);
      clearTimeout(hard);
      await service.close();
      log.info('stopped');
    })());
  return { url, instance, close };
}
