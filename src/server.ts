import { getRequestListener } from '@hono/node-server';
import { createServer, type IncomingMessage } from 'node:http';
import { Server as NetServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createApp } from './app.ts';
import { ensureAdmin } from './auth/bootstrap.ts';
import { Auth } from './auth/index.ts';
import { ConfigError, loadConfig, loadDotEnv, type Config } from './config/load.ts';
import { openDatabase, type Database } from './db/index.ts';
import { migrate } from './db/migrations.ts';
import { createEvents } from './events.ts';
import type { ServerInstance } from './instance.ts';
import { createLogger, prettyDestination, type Logger } from './logger.ts';
import { keepSecretsOutOfEnviron } from './secret-env.ts';
import { Realtime } from './realtime/index.ts';
import { appPluginsDir, loadPlugins, packageEntry } from './plugins/loader.ts';
import { applySeeds } from './plugins/seeds.ts';
import type { Hono } from 'hono';
import type { AppEnv } from './http/env.ts';
import { allowedOrigins } from './http/origins.ts';
import { PresetHeadersResponse } from './http/response-headers.ts';
import { Stores } from './store/index.ts';
import { sessionLane } from '../routes/auth/session.ts';
import { resolveCoreToThisBuild } from './core-import.ts';
import { answerClientErrors, requireHost, unusableRequest } from './http/client-error.ts';
import { refuseOversizedBodies } from './http/oversized-body.ts';
import { appCodeFiles, typeScriptFor, typeScriptRegistered } from './typescript.ts';

/** Builds the server instance from opened adapters (also used by tests with embedded ones). */
export async function buildInstance(config: Config, logger: Logger, stores: Stores, db: Database): Promise<ServerInstance> {
  const events = createEvents(logger);
  const auth = await Auth.create(config, stores, db, logger);
  const realtime = new Realtime({ config, logger, auth, db, store: stores.forRole('sessions') });
  const onClose: (() => void | Promise<void>)[] = [];
  const runCloseCallbacks = async () => {
    for (const fn of onClose.splice(0)) {
      try {
        await fn();
      } catch (err) {
        logger.error({ err }, 'a close callback failed');
      }
    }
  };
  return { config, logger, stores, store: stores.instance('cache'), db, auth, realtime, on: events.on, emit: events.emit, onClose: (fn) => void onClose.push(fn), runCloseCallbacks };
}

/** Loads the plugins, applies the landing seeds (app files and plugins') and builds the app (start-up and tests alike). */
export async function appWithPlugins(instance: ServerInstance): Promise<Hono<AppEnv>> {
  const plugins = await loadPlugins(instance);
  await applySeeds(instance, plugins);
  return createApp(instance, plugins);
}

export interface RunningServer {
  url: string;
  instance: ServerInstance;
  /** Graceful stop: refuse new connections, finish in-flight requests, close adapters. */
  close(): Promise<void>;
}

/**
 * Node entry: config -> adapters -> instance -> app -> serve. Throws (before listening) on a bad
 * config or an unreachable store/database, with a message that names the culprit.
 */
export async function startServer(env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<RunningServer> {
  // Compiled svc loads TypeScript app files (config, plugins, seeds, a TS plugin package) through tsx, only if there are any.
  const appRoot = path.resolve(env.SVC_APP_PATH || process.cwd());
  const appCode = appCodeFiles(appRoot, appPluginsDir(appRoot));
  await typeScriptFor(appCode);
  const { config, warnings } = await loadConfig(env);
  await typeScriptFor(config.plugins.flatMap((name) => {
    try {
      return [packageEntry(name, config.env.appRoot)];
    } catch {
      return []; // not installed: the loader says so, naming the plugin
    }
  }));
  resolveCoreToThisBuild(appCode.length > 0 || config.plugins.length > 0);
  const pretty = !logger && config.env.logPretty ? await prettyDestination() : undefined;
  const log = logger ?? createLogger(config.env.logLevel, pretty?.destination);
  // An installed production package has no pino-pretty (a devDependency): one JSON line says so, and JSON it stays.
  if (pretty?.reason) log.warn({ reason: pretty.reason }, 'LOG_PRETTY is set but pino-pretty cannot be loaded (a devDependency: not in a production install): logging JSON lines');
  for (const warning of warnings) log.warn(warning);
  if (typeScriptRegistered()) log.info('the app has TypeScript files: they load through tsx');
  if (config.source) log.info({ file: config.source }, 'config loaded');
  const origins = allowedOrigins(config);
  log.info(
    origins,
    `allowed origins: state-changing requests (CSRF) from ${origins.csrf.join(', ') || 'no listed origin'} and each request's own origin; ` +
      `CORS with credentials for ${origins.cors.join(', ') || 'none (SVC_FRONTEND_URLS is empty)'}`,
  );

  const stores = await Stores.open(config, log);
  let db: Database;
  try {
    db = await openDatabase(config, log);
  } catch (err) {
    await stores.close();
    throw err;
  }
  try {
    await migrate(db, log); // before anything reads the data: it is in the shape this svc expects
  } catch (err) {
    await Promise.allSettled([stores.close(), db.close()]);
    throw err;
  }
  let instance: ServerInstance;
  let app: Hono<AppEnv>;
  try {
    instance = await buildInstance(config, log, stores, db);
    await ensureAdmin(instance.auth.users, config, db.kind, log, instance.auth.audit);
    // The bootstrap admin exists now: its password leaves the process (plugins and the programs they
    // start see neither the variable nor the config field).
    delete env.SVC_ADMIN_PASSWORD;
    delete config.env.adminPassword;
    app = await appWithPlugins(instance);
  } catch (err) {
    await Promise.allSettled([stores.close(), db.close()]);
    throw err;
  }

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
      // "getaddrinfo ENOTFOUND 999.1.1.1" / "listen EADDRINUSE ..." alone do not say which setting to fix.
      const refused = (err: Error) => reject(new Error(`cannot listen on HOST=${config.env.host} PORT=${config.env.port}: ${err.message}`, { cause: err }));
      http.once('error', refused);
      http.listen(config.env.port, config.env.host, () => {
        http.off('error', refused);
        resolve();
      });
    });
  } catch (err) {
    await instance.runCloseCallbacks();
    await instance.realtime.close();
    await instance.auth.close();
    await Promise.allSettled([stores.close(), db.close()]);
    throw err;
  }
  const { port } = http.address() as AddressInfo;
  const url = `http://${config.env.host.includes(':') ? `[${config.env.host}]` : config.env.host}:${port}`;
  // Browsers keep cookies per host name, some clients send a Secure cookie over plain HTTP to
  // `localhost` only, and passkeys need a host name: a newcomer copying 127.0.0.1 meets all three.
  const loopback = ['127.0.0.1', '::1'].includes(config.env.host) && config.auth.cookie.secure;
  const hint = loopback ? ` (browse and curl http://localhost:${port}, not the IP address: cookies are kept per host name, and passkeys need one)` : '';
  log.info({ url, store: stores.all().map((s) => s.name), db: db.kind }, `svc listening on ${url}${hint}`);

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
      await instance.runCloseCallbacks();
      await instance.auth.close();
      await Promise.allSettled([stores.close(), db.close()]);
      log.info('stopped');
    })());
  return { url, instance, close };
}

/**
 * An error nothing caught (a plugin's timer or listener that throws): logged with its stack, then the
 * process exits non-zero (its state is unknown; a supervisor restarts it). The `exit` handlers run,
 * so no script the CLI connector started outlives it.
 */
function exitOnUncaught(log: () => Logger): void {
  const die = (kind: string) => (err: unknown) => {
    try {
      log().fatal({ err }, `${kind}: the process exits`);
    } catch {
      process.stderr.write(`${kind}: ${err instanceof Error ? err.stack : String(err)}\n`);
    }
    process.exit(70);
  };
  process.on('uncaughtException', die('uncaught exception'));
  process.on('unhandledRejection', die('unhandled promise rejection'));
}

export async function main() {
  // Before anything reads the environment: secrets out of the one the kernel shows (src/secret-env.ts).
  await keepSecretsOutOfEnviron();
  let logger: Logger | undefined;
  exitOnUncaught(() => (logger ??= createLogger('info')));
  let running: RunningServer;
  try {
    const envFile = loadDotEnv();
    running = await startServer();
    logger = running.instance.logger;
    if (envFile) logger.info({ file: envFile }, 'environment read from .env (variables set in the real environment keep their values)');
  } catch (err) {
    const message = err instanceof ConfigError ? `configuration error: ${err.message}` : (err as Error).message;
    process.stderr.write(`svc failed to start: ${message}\n`);
    process.exit(1);
  }
  const stop = (signal: string) => {
    running.instance.logger.info({ signal }, 'signal received');
    running.close().then(
      () => process.exit(0),
      (err: unknown) => {
        running.instance.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // SIGHUP (the terminal or session went away) stops svc as SIGTERM does, scripts included. `on`, not
  // `once`: a signal that comes twice (Ctrl-C reaches the whole process group, and the first process
  // of src/secret-env.ts forwards it too) must not fall back to Node's default of dying on the spot.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => stop(signal));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
