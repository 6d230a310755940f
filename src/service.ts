/**
 * What every runtime door shares (src/server.ts for Node, src/server-bun.ts, src/server-deno.ts):
 * config -> adapters -> instance -> app, the shutdown of all of it after the door stopped serving,
 * and the process's life (secrets, uncaught errors, stop signals). A door adds only the HTTP server.
 */
import path from 'node:path';
import type { Hono } from 'hono';
import { createApp } from './app.ts';
import { ensureAdmin } from './auth/bootstrap.ts';
import { Auth } from './auth/index.ts';
import { ConfigError, loadConfig, loadDotEnv, type Config } from './config/load.ts';
import { resolveCoreToThisBuild } from './core-import.ts';
import { openDatabase, type Database } from './db/index.ts';
import { migrate } from './db/migrations.ts';
import { createEvents } from './events.ts';
import type { AppEnv } from './http/env.ts';
import { allowedOrigins } from './http/origins.ts';
import type { ServerInstance } from './instance.ts';
import { createLogger, prettyDestination, type Logger } from './logger.ts';
import { appPluginsDir, loadPlugins, packageEntry } from './plugins/loader.ts';
import { applySeeds } from './plugins/seeds.ts';
import { Realtime } from './realtime/index.ts';
import { keepSecretsOutOfEnviron } from './secret-env.ts';
import { Stores } from './store/index.ts';
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

/** A service ready to be served: its instance and app, and what closes them once the door stopped serving. */
export interface OpenService {
  instance: ServerInstance;
  app: Hono<AppEnv>;
  /** Runs the plugins' close callbacks, then closes auth, the stores and the database (socket.io: `closeRealtime`). */
  close(): Promise<void>;
}

/**
 * config -> adapters -> instance -> app. Throws on a bad config or an unreachable store/database, with a
 * message that names the culprit, having closed whatever it had opened.
 */
export async function openService(env: NodeJS.ProcessEnv = process.env, logger?: Logger): Promise<OpenService> {
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
  const close = async () => {
    await instance.runCloseCallbacks();
    await instance.auth.close();
    await Promise.allSettled([stores.close(), db.close()]);
  };
  return { instance, app, close };
}

/** The base URL a door listens on, for the log line and `RunningServer.url`. */
export function listeningUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The line every door logs once it listens (what the README's quick start tells a newcomer to look for). */
export function logListening({ config, logger, stores, db }: ServerInstance, url: string, port: number, runtime?: string): void {
  // Browsers keep cookies per host name, some clients send a Secure cookie over plain HTTP to
  // `localhost` only, and passkeys need a host name: a newcomer copying 127.0.0.1 meets all three.
  const loopback = ['127.0.0.1', '::1'].includes(config.env.host) && config.auth.cookie.secure;
  const hint = loopback ? ` (browse and curl http://localhost:${port}, not the IP address: cookies are kept per host name, and passkeys need one)` : '';
  logger.info({ url, store: stores.all().map((s) => s.name), db: db.kind, ...(runtime ? { runtime } : {}) }, `svc listening on ${url}${hint}`);
}

/**
 * `cannot listen on ...`: "listen EADDRINUSE" alone does not say which setting to fix. A port in use is
 * worded as Node words it on every runtime (Bun: "Failed to start server. Is port 3000 in use?", Deno: AddrInUse).
 */
export function listenError(config: Config, err: Error): Error {
  const inUse = (err as { code?: string }).code === 'EADDRINUSE' || err.name === 'AddrInUse';
  const reason = inUse && !err.message.includes('EADDRINUSE') ? `listen EADDRINUSE: address already in use (${err.message})` : err.message;
  return new Error(`cannot listen on HOST=${config.env.host} PORT=${config.env.port}: ${reason}`, { cause: err });
}

export interface RunningServer {
  url: string;
  instance: ServerInstance;
  /** Graceful stop: refuse new connections, finish in-flight requests, close adapters. */
  close(): Promise<void>;
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

/** A door's `main`: secrets out of the environment, `.env`, start, and a graceful stop on a signal. */
export async function runService(start: () => Promise<RunningServer>): Promise<void> {
  // Before anything reads the environment: secrets out of the one the kernel shows (src/secret-env.ts).
  await keepSecretsOutOfEnviron();
  let logger: Logger | undefined;
  exitOnUncaught(() => (logger ??= createLogger('info')));
  let running: RunningServer;
  try {
    const envFile = loadDotEnv();
    running = await start();
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
