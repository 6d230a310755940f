import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { RouterRoute } from 'hono/types';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { HTTPException } from 'hono/http-exception';
import { getPath } from 'hono/utils/url';
import { coreRoutes } from '../routes/index.ts';
import { unauthenticatedError } from './auth/index.ts';
import { guestAwareHooks } from './auth/work-sessions.ts';
import type { AppEnv } from './http/env.ts';
import { dispatchSynchronously, isPending, promised, syncAwareLayer, type SyncAwareLayer } from './http/dispatch.ts';
import { bodyBrokeOff } from './http/client-error.ts';
import { adminConsoleRoutes } from './http/admin-console.ts';
import { docsRoutes } from './http/docs.ts';
import { AppError, HTTP_ERROR_CODES } from './http/errors.ts';
import { buildOpenApi } from './http/openapi.ts';
import { corsOrigin, originCheck } from './http/origins.ts';
import { DEFAULT_HEADERS, nodeResponse, presetHeader, requestIdFor } from './http/response-headers.ts';
import { laneKey, requestHeader } from './http/request-headers.ts';
import { apiKeyGate, declaredScopes, defineRoute, mountPlugin, mountRoutes, requireCaller, routesOf, type RouteDefinition } from './http/route.ts';
import { bearerApiKey } from './auth/api-keys.ts';
import { MemoTrieRouter } from './http/router.ts';
import type { ServerInstance } from './instance.ts';
import type { LoadedPlugin } from './plugins/loader.ts';
import { logRequest, requestStarted } from './logger.ts';

/** `/api/auth/login` and `/auth/login` reach the same route: a proxy may strip `/api` or not. */
function withoutApiPrefix(request: Request): string {
  const path = getPath(request);
  if (path === '/api') return '/';
  return path.startsWith('/api/') ? path.slice(4) : path;
}


/**
 * The Hono application of one server instance: request ids and logs, body limit, error model
 * (CONTRACT section 2), core routes and plugins. Web-standard only; `server.ts` serves it on Node.
 */
export function createApp(instance: ServerInstance, plugins: LoadedPlugin[] = []): Hono<AppEnv> {
  const { logger, config } = instance;
  const router = new MemoTrieRouter<[MiddlewareHandler<AppEnv>, RouterRoute]>();
  const app = new Hono<AppEnv>({ getPath: withoutApiPrefix, router });

  /**
   * What starts every request: the request id (`X-Request-Id`, the client's own when plain) and the
   * DEFAULT_HEADERS. Returns the time the request started, for the access log line at `info` (0 when
   * that level is off).
   */
  const startRequest = (c: Context<AppEnv>): number => {
    const id = requestIdFor(requestHeader(c, 'x-request-id'));
    c.set('requestId', id);
    presetHeader(c, 'X-Request-Id', id);
    if (nodeResponse(c)) for (const [name, value] of DEFAULT_HEADERS) presetHeader(c, name, value);
    // Timed from where it came in: `GET /auth/session`'s lane may have waited for the store first.
    const key = laneKey(c);
    return (key && instance.auth.lookedUp.get(key)?.started) || requestStarted(logger);
  };
  /** What ends every request: the DEFAULT_HEADERS where Node's response did not take them, and the log line. */
  const endRequest = (c: Context<AppEnv>, started: number): void => {
    if (!nodeResponse(c)) {
      const headers = c.res.headers;
      try {
        for (const [name, value] of DEFAULT_HEADERS) if (!headers.has(name)) headers.set(name, value);
      } catch {
        // Immutable headers (a fetch() Response passed through as is): the upstream decided.
      }
    }
    logRequest(logger, started, c.get('requestId'), c.req.method, c.req.path, c.res.status);
  };
  /** Every error's answer (CONTRACT section 2): Hono's error handler, and the hooks' (below). */
  const onError = (err: Error, c: Context<AppEnv>): Response => {
    if (err instanceof AppError) {
      // An outage answers every request 503: one short line each, not a stack trace each.
      if (err.code === 'unavailable') logger.warn({ reqId: c.get('requestId'), cause: (err.cause as Error | undefined)?.message }, err.message);
      // Not built in this configuration (501 `email_not_configured`): the operator's choice, no fault.
      else if (err.code === 'email_not_configured') logger.info({ reqId: c.get('requestId'), code: err.code }, err.message);
      else if (err.status >= 500) logger.error({ reqId: c.get('requestId'), code: err.code, err: err.cause ?? err }, err.message);
      return c.json(err.toJSON(), err.status, err.headers);
    }
    if (err instanceof HTTPException && err.status < 500) {
      const error = new AppError(err.status as 400, HTTP_ERROR_CODES[err.status] ?? 'bad_request', err.message || 'Bad request');
      return c.json(error.toJSON(), error.status);
    }
    if (bodyBrokeOff(err)) {
      // The client's doing, not ours: it left, or its body broke framing (answered by client-error.ts).
      logger.info({ reqId: c.get('requestId') }, 'the request body broke off before it arrived');
      return c.json(new AppError(400, 'bad_request', 'The request body broke off before it arrived').toJSON(), 400);
    }
    logger.error({ reqId: c.get('requestId'), err }, 'unhandled error');
    return c.json(new AppError(500, 'internal_error', 'Something went wrong on our side').toJSON(), 500);
  };
  const bodyLimiter = bodyLimit({
    maxSize: config.server.bodyLimit,
    onError: () => {
      // The rest of the body is not read: the connection cannot carry another request, and says so
      // (a keep-alive client would otherwise send its next request into a closing socket).
      throw new AppError(413, 'payload_too_large', `The request body is larger than ${config.server.bodyLimit} bytes`, undefined, { Connection: 'close' });
    },
  });
  const corsHandler = cors({ origin: corsOrigin(config, logger), credentials: true, maxAge: 600 });
  const checkOrigin = originCheck(config, logger);
  /**
   * One layer for what guards a request before any handler reads it, in this order: the body limit,
   * CORS for browser frontends, the CSRF origin check. A request with neither a body nor an Origin (a
   * GET from the app's own pages, any non-browser client) goes straight on: reading `c.req.raw.body`
   * makes @hono/node-server build a full Request (measured: ~11% of the session route's CPU), `cors`
   * would rewrite the finished response (Vary) onto the slow streaming path (~5%), and the origin
   * check has nothing to check. A request with an API key skips the origin check (CONTRACT 15): the key,
   * not a cookie, authenticates it (cookies sent along are ignored), and no other site can make a browser send it.
   */
  const guards: SyncAwareLayer<AppEnv> = function guards(c, next) {
    const fromBrowser = requestHeader(c, 'origin') !== undefined;
    const hasBody = requestHeader(c, 'content-length') !== undefined || requestHeader(c, 'transfer-encoding') !== undefined;
    // A browser's request from another site that names no Origin: the origin check refuses it if it would change anything.
    const crossSite = !fromBrowser && requestHeader(c, 'sec-fetch-site') === 'cross-site';
    if (!fromBrowser && !hasBody && !crossSite) return next();
    const later = promised(next);
    const withKey = (fromBrowser || crossSite) && bearerApiKey(requestHeader(c, 'authorization')) !== undefined;
    const checked = fromBrowser
      ? () => corsHandler(c, () => (withKey ? later() : checkOrigin(c, later)) as Promise<void>) as Promise<void>
      : crossSite && !withKey
        ? () => checkOrigin(c, later) as Promise<void>
        : later;
    return hasBody ? bodyLimiter(c, checked) : checked();
  };
  // The session hook, and `global.requireAuthentication`'s guard right after it, as one layer.
  const appMiddleware = new WeakSet<object>();
  const callerRules = { judgesAnonymous: (hook: object) => guestAwareHooks.has(hook), unauthenticated: unauthenticatedError };
  const caller = config.global.requireAuthentication ? requireCaller(appMiddleware, callerRules) : null;
  const sessionHook = instance.auth.sessionHook;
  // API keys reach only the routes that take them (CONTRACT 15): checked right after the hook resolved the key.
  const keyGate = apiKeyGate(appMiddleware);
  const afterSession: SyncAwareLayer<AppEnv> = caller ? (c, next) => keyGate(c, () => caller(c, next)) : keyGate;
  const session: SyncAwareLayer<AppEnv> = (c, next) => sessionHook(c, () => afterSession(c, next));
  /** The end of a request the hooks saw through: the hooks' answer if they gave one (a CORS preflight), and the log line. */
  const answered = (c: Context<AppEnv>, res: unknown, started: number): void => {
    if (res instanceof Response && !c.finalized) c.res = res;
    endRequest(c, started);
  };
  /** What Hono does with an Error a layer throws, for the hooks inside this one. */
  const failed = (c: Context<AppEnv>, err: unknown, started: number): void => {
    if (!(err instanceof Error)) throw err;
    c.error = err;
    c.res = onError(err, c);
    endRequest(c, started);
  };
  /**
   * The app-wide hooks as ONE layer of the middleware chain, in this order: request id and default
   * headers, guards, session (and `requireAuthentication`'s guard). Each layer of Hono's chain cost
   * every request an async dispatch (measured: four more pass-through layers cost GET /auth/session
   * 5-8% of its requests per second). What Hono does for a layer, this one does for the hooks inside
   * it: an Error one of them throws becomes the error handler's answer, and a Response one returns (a
   * CORS preflight) the answer; either way the request is logged as answered. Synchronous while
   * everything after it is (`dispatchSynchronously`): a session from the local cache needs no Promise.
   */
  const hooks: SyncAwareLayer<AppEnv> = syncAwareLayer(function hooks(c: Context<AppEnv>, next: () => unknown) {
    const started = startRequest(c);
    let res: unknown;
    try {
      res = guards(c, () => session(c, next));
    } catch (err) {
      return failed(c, err, started);
    }
    if (isPending(res)) {
      return Promise.resolve(res).then(
        (answer) => answered(c, answer, started),
        (err: unknown) => failed(c, err, started),
      );
    }
    answered(c, res, started);
  });
  appMiddleware.add(hooks);
  app.use(hooks as MiddlewareHandler<AppEnv>);

  const core = coreRoutes(instance);
  mountRoutes(app, core);
  for (const plugin of plugins) {
    // A plugin Node runs as CommonJS gets hono's CommonJS build: another Hono, whose default error handler
    // would answer what the plugin throws as a plain-text 500. Unless the plugin set its own, errors are svc's.
    const other = plugin.app as unknown as { errorHandler: unknown; onError: (handler: typeof onError) => unknown };
    if (!(plugin.app instanceof Hono) && other.errorHandler === new (other.constructor as new () => typeof other)().errorHandler) {
      other.onError(onError);
    }
    mountPlugin(app, plugin.prefix, plugin.app);
  }

  const documentation = [
    defineRoute({ method: 'GET', path: '/openapi.json', config: { public: true }, schema: { summary: 'This OpenAPI 3.1 document', tags: ['docs'] }, handler: (c) => c.json(openApi) }),
    ...docsRoutes(),
    ...adminConsoleRoutes({ enabled: config.admin.console.enabled, appName: config.app.name ?? 'svc' }),
  ] as RouteDefinition[];
  // Built after `documentation` so the document lists its own routes too.
  // The scopes a new API key may hold: those the mounted routes declare (`authenticate({scopes})` adds its own).
  instance.auth.apiKeys.declare(declaredScopes([...core, ...plugins.flatMap((p) => routesOf(p.app))]));
  const openApi = buildOpenApi([{ prefix: '', routes: [...core, ...documentation] }, ...plugins.map((p) => ({ prefix: p.prefix, routes: routesOf(p.app) }))], {
    title: 'svc',
    version: '0.2.0',
  });
  mountRoutes(app, documentation);

  const notFound = (c: Context<AppEnv>) => c.json(new AppError(404, 'not_found', 'No route matches this path').toJSON(), 404);
  app.notFound(notFound);
  app.onError(onError);
  dispatchSynchronously(app, { getPath: withoutApiPrefix, router, onError, notFound });
  return app;
}
