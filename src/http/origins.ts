import type { MiddlewareHandler } from 'hono';
import { requestOrigin } from '../auth/client-ip.ts';
import type { Config } from '../config/load.ts';
import type { AppEnv } from './env.ts';
import { AppError } from './errors.ts';

/**
 * Which browser origins may do what. CSRF: state-changing requests from the listed frontends, the
 * service's own configured origins and each request's own origin. CORS with credentials: the listed
 * frontends only. Logged once at start-up, so an operator sees what the service will accept.
 */
export function allowedOrigins(config: Config): { csrf: string[]; cors: string[] } {
  const { frontendUrls, ownOrigins } = config.env;
  return { csrf: [...new Set([...frontendUrls, ...ownOrigins])], cors: [...frontendUrls] };
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * CSRF (CONTRACT section 3, **beyond**): a state-changing request whose `Origin` is neither allowed
 * (see `allowedOrigins`) nor the request's own origin is refused before any session or login logic.
 * No `Origin`: a non-browser client. `null` (sandboxed iframes, data: URLs, custom schemes) is never
 * allowed, whatever the configuration holds (issue 24, finding 6).
 * ```ts
 * app.use(originCheck(config));
 * ```
 */
export function originCheck(config: Config): MiddlewareHandler<AppEnv> {
  const allowed = new Set(allowedOrigins(config).csrf);
  const trustProxy = config.server.trustProxy;
  return async function originCheck(c, next) {
    const origin = c.req.header('origin');
    if (origin && UNSAFE.has(c.req.method) && (origin === 'null' || (!allowed.has(origin) && origin !== requestOrigin(c, trustProxy)))) {
      throw new AppError(403, 'csrf_failed', 'This request comes from an origin that is not allowed');
    }
    await next();
  };
}
