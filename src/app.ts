import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { requestId } from 'hono/request-id';
import { getPath } from 'hono/utils/url';
import { coreRoutes } from '../routes/index.ts';
import type { AppEnv } from './http/env.ts';
import { AppError } from './http/errors.ts';
import { mountRoutes } from './http/route.ts';
import type { ServerInstance } from './instance.ts';

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

/**
 * The Hono application of one server instance: request ids and logs, body limit, error model
 * (CONTRACT section 2), core routes and plugins. Web-standard only; `server.ts` serves it on Node.
 */
export function createApp(instance: ServerInstance): Hono<AppEnv> {
  const { logger, config } = instance;
  const app = new Hono<AppEnv>({ getPath: withoutApiPrefix });

  app.use(requestId());
  app.use(async (c, next) => {
    const started = performance.now();
    await next();
    logger.info(
      { reqId: c.get('requestId'), method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - started) },
      'request',
    );
  });
  app.use(
    bodyLimit({
      maxSize: config.server.bodyLimit,
      onError: () => {
        throw new AppError(413, 'payload_too_large', `The request body is larger than ${config.server.bodyLimit} bytes`);
      },
    }),
  );

  mountRoutes(app, coreRoutes(instance), { requireAuthentication: config.global.requireAuthentication });

  app.notFound((c) => c.json(new AppError(404, 'not_found', 'No route matches this path').toJSON(), 404));
  app.onError((err, c) => {
    if (err instanceof AppError) {
      if (err.status >= 500) logger.error({ reqId: c.get('requestId'), code: err.code, err: err.cause ?? err }, err.message);
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
