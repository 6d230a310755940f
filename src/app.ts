import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { Scalar } from '@scalar/hono-api-reference';
import { HTTPException } from 'hono/http-exception';
import { requestId } from 'hono/request-id';
import { getPath } from 'hono/utils/url';
import { coreRoutes } from '../routes/index.ts';
import { requestOrigin } from './auth/client-ip.ts';
import type { Config } from './config/load.ts';
import type { AppEnv } from './http/env.ts';
import { AppError } from './http/errors.ts';
import { buildOpenApi, routesOf } from './http/openapi.ts';
import { allowedOrigins } from './http/origins.ts';
import { defineRoute, mountRoutes, requireCaller, type RouteDefinition } from './http/route.ts';
import type { ServerInstance } from './instance.ts';
import type { LoadedPlugin } from './plugins/loader.ts';

/** `/api/auth/login` and `/auth/login` reach the same route: a proxy may strip `/api` or not. */
function withoutApiPrefix(request: Request): string {
  const path = getPath(request);
  if (path === '/api') return '/';
  return path.startsWith('/api/') ? path.slice(4) : path;
}

const statusCodes: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'too_many_requests',
};

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * CSRF (CONTRACT section 3, **beyond**): a state-changing request whose `Origin` is neither ours nor a
 * listed frontend is refused before any session or login logic. No `Origin`: a non-browser client.
 */
function originCheck(config: Config): MiddlewareHandler<AppEnv> {
  const allowed = allowedOrigins(config);
  return async function originCheck(c, next) {
    const origin = c.req.header('origin');
    if (origin && UNSAFE.has(c.req.method) && !allowed.has(origin) && origin !== requestOrigin(c, config.server.trustProxy)) {
      throw new AppError(403, 'csrf_failed', 'This request comes from an origin that is not allowed');
    }
    await next();
  };
}

/**
 * The Hono application of one server instance: request ids and logs, body limit, error model
 * (CONTRACT section 2), core routes and plugins. Web-standard only; `server.ts` serves it on Node.
 */
export function createApp(instance: ServerInstance, plugins: LoadedPlugin[] = []): Hono<AppEnv> {
  const { logger, config } = instance;
  const app = new Hono<AppEnv>({ getPath: withoutApiPrefix });

  const logRequests: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (!logger.isLevelEnabled('info')) return next();
    const started = performance.now();
    await next();
    logger.info(
      { reqId: c.get('requestId'), method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - started) },
      'request',
    );
  };
  const bodyLimiter = bodyLimit({
    maxSize: config.server.bodyLimit,
    onError: () => {
      throw new AppError(413, 'payload_too_large', `The request body is larger than ${config.server.bodyLimit} bytes`);
    },
  });
  // Only requests that carry a body pay for the limiter: reading `c.req.raw.body` makes
  // @hono/node-server build a full Request (measured: ~11% of the session route's CPU).
  const limitBody: MiddlewareHandler<AppEnv> = (c, next) =>
    c.req.header('content-length') === undefined && c.req.header('transfer-encoding') === undefined ? next() : bodyLimiter(c, next);
  const corsHandler = cors({ origin: (origin) => (config.env.frontendUrls.includes(origin) ? origin : null), credentials: true, maxAge: 600 });
  // Only browser cross-origin requests carry Origin. For the rest, `cors` would rewrite a finished
  // response (Vary) and push it onto @hono/node-server's slow streaming path (measured ~5% CPU).
  const corsForFrontends: MiddlewareHandler<AppEnv> = (c, next) => (c.req.header('origin') !== undefined ? corsHandler(c, next) : next());
  const appMiddleware = new WeakSet<object>();
  const hooks: MiddlewareHandler<AppEnv>[] = [requestId(), logRequests, limitBody, corsForFrontends, originCheck(config), instance.auth.sessionHook];
  if (config.global.requireAuthentication) hooks.push(requireCaller(appMiddleware));
  for (const hook of hooks) {
    appMiddleware.add(hook);
    app.use(hook);
  }

  const core = coreRoutes(instance);
  mountRoutes(app, core);
  for (const plugin of plugins) app.route(plugin.prefix, plugin.app);

  const documentation = [
    defineRoute({ method: 'GET', path: '/openapi.json', config: { public: true }, schema: { summary: 'This OpenAPI 3.1 document', tags: ['docs'] }, handler: (c) => c.json(openApi) }),
    defineRoute({
      method: 'GET',
      path: '/docs',
      config: { public: true },
      schema: { summary: 'API reference page', tags: ['docs'] },
      // Relative, so the page works at /docs and at /api/docs behind a proxy.
      handler: Scalar({ url: 'openapi.json', pageTitle: 'svc API' }) as never,
    }),
  ] as RouteDefinition[];
  // Built after `documentation` so the document lists its own routes too.
  const openApi = buildOpenApi([{ prefix: '', routes: [...core, ...documentation] }, ...plugins.map((p) => ({ prefix: p.prefix, routes: routesOf(p.app) }))], {
    title: 'svc',
    version: '0.2.0',
  });
  mountRoutes(app, documentation);

  app.notFound((c) => c.json(new AppError(404, 'not_found', 'No route matches this path').toJSON(), 404));
  app.onError((err, c) => {
    if (err instanceof AppError) {
      // An outage answers every request 503: one short line each, not a stack trace each.
      if (err.code === 'unavailable') logger.warn({ reqId: c.get('requestId'), cause: (err.cause as Error | undefined)?.message }, err.message);
      else if (err.status >= 500) logger.error({ reqId: c.get('requestId'), code: err.code, err: err.cause ?? err }, err.message);
      return c.json(err.toJSON(), err.status, err.headers);
    }
    if (err instanceof HTTPException && err.status < 500) {
      const error = new AppError(err.status as 400, statusCodes[err.status] ?? 'bad_request', err.message || 'Bad request');
      return c.json(error.toJSON(), error.status);
    }
    logger.error({ reqId: c.get('requestId'), err }, 'unhandled error');
    return c.json(new AppError(500, 'internal_error', 'Something went wrong on our side').toJSON(), 500);
  });
  return app;
}
