import type { Context, MiddlewareHandler } from 'hono';
import type { Config } from '../config/load.ts';
import type { Logger } from '../logger.ts';
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

/**
 * A header value fit to quote in a message or a log line: it is attacker-controlled, so control
 * characters (terminal escapes, line breaks) become `?` and it is cut at `max` characters.
 */
export function printable(value: string, max = 200): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this removes
  const clean = value.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '?');
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}

const WINDOW_MS = 60_000;
const MAX_ORIGINS = 100;

/**
 * Tells the operator about refused origins without letting an attacker flood the log: one warn line
 * per origin per minute, and at most MAX_ORIGINS distinct origins a minute (then one line saying so).
 * Memory: at most MAX_ORIGINS entries, kept in the order they were logged so old ones drop off the front.
 */
function refusalLog(logger: Logger, kind: string, message: string, allowed: string[]) {
  const loggedAt = new Map<string, number>();
  let floodNoticeAt = -Infinity;
  return function logRefusal(origin: string, fields: Record<string, string | undefined>) {
    const now = Date.now();
    const last = loggedAt.get(origin);
    if (last !== undefined && now - last < WINDOW_MS) return;
    for (const [o, at] of loggedAt) {
      if (now - at < WINDOW_MS) break;
      loggedAt.delete(o);
    }
    if (loggedAt.size >= MAX_ORIGINS) {
      if (now - floodNoticeAt >= WINDOW_MS) {
        floodNoticeAt = now;
        logger.warn({ limit: MAX_ORIGINS, allowed }, `${kind}: more refused origins than ${MAX_ORIGINS} within a minute; the others are not logged`);
      }
      return;
    }
    loggedAt.delete(origin);
    loggedAt.set(origin, now);
    logger.warn({ origin, ...fields, allowed }, message);
  };
}

const LOOPBACK = new Set(['localhost', '127.0.0.1']);

/**
 * Why a refused origin looks like a listed one, when it differs only by localhost vs 127.0.0.1 or by
 * its port (the usual dev-server mistakes: browsers treat each as another origin), else undefined.
 */
export function nearMiss(origin: string, listed: string[]): string | undefined {
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return undefined;
  }
  for (const entry of listed) {
    const l = new URL(entry);
    if (l.protocol !== o.protocol) continue;
    if (l.hostname === o.hostname && l.port !== o.port) return `it differs from the listed ${entry} only by its port`;
    if (l.port === o.port && l.hostname !== o.hostname && LOOPBACK.has(l.hostname) && LOOPBACK.has(o.hostname)) {
      return `it differs from the listed ${entry} only by ${o.hostname} vs ${l.hostname}, which browsers treat as different origins`;
    }
  }
  return undefined;
}

/**
 * The `origin` option of Hono's `cors`: a listed frontend gets its Access-Control-Allow-Origin (with
 * credentials), any other origin none. A browser then reports only a CORS error to the developer, so a
 * miss from another site (not the service's own origin, which needs no CORS) is logged at warn, naming
 * the origin and SVC_FRONTEND_URLS, rate-limited like CSRF refusals. State-changing requests from such
 * an origin are not logged here: the CSRF check refuses and logs them.
 * ```ts
 * app.use(cors({ origin: corsOrigin(config, logger), credentials: true }));
 * ```
 */
export function corsOrigin(config: Config, logger: Logger): (origin: string, c: Context<AppEnv>) => string | null {
  const { cors, csrf } = allowedOrigins(config);
  const listed = new Set(cors);
  const own = new Set(csrf);
  const trustProxy = config.server.trustProxy;
  const logMiss = refusalLog(logger, 'cors', 'cors: Origin not listed in SVC_FRONTEND_URLS: no Access-Control-Allow-Origin for it', cors);
  return function corsOrigin(origin, c) {
    if (origin !== 'null' && listed.has(origin)) return origin;
    if (!UNSAFE.has(c.req.method) && !own.has(origin) && origin !== requestOrigin(c, trustProxy)) {
      const shown = printable(origin);
      logMiss(shown, { hint: nearMiss(origin, cors), reqId: c.get('requestId') });
    }
    return null;
  };
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * The form_post OAuth callback (Sign in with Apple) is posted by the provider's page, from its origin
 * or, as Chromium does after the provider's redirects, with `Origin: null` (test/deploy/apple-browser.test.ts).
 * It changes nothing by itself: it keeps the fields and redirects to the GET callback, which needs the
 * browser's state cookie (`OAuthFlow.formPost`).
 */
const FORM_POST_CALLBACK = /^(?:\/api)?\/auth\/oauth\/[^/]+\/callback$/;

/**
 * CSRF (CONTRACT section 3, **beyond**): a state-changing request whose `Origin` is neither allowed
 * (see `allowedOrigins`) nor the request's own origin is refused before any session or login logic.
 * No `Origin`: a non-browser client. `null` (sandboxed iframes, data: URLs, custom schemes) is never
 * allowed, whatever the configuration holds (issue 24, finding 6). A refusal names the Origin in its
 * message and is logged at warn with the allow-list and what the request's own origin looked like
 * (behind a proxy that drops the port from Host, that is where the mismatch shows; issue 26 §6).
 * ```ts
 * app.use(originCheck(config, logger));
 * ```
 */
export function originCheck(config: Config, logger: Logger): MiddlewareHandler<AppEnv> {
  const list = allowedOrigins(config).csrf;
  const allowed = new Set(list);
  const trustProxy = config.server.trustProxy;
  const logRefusal = refusalLog(logger, 'csrf_failed', 'csrf_failed: Origin refused', list);
  return async function originCheck(c, next) {
    const origin = c.req.header('origin');
    if (origin && UNSAFE.has(c.req.method) && !allowed.has(origin) && !(c.req.method === 'POST' && FORM_POST_CALLBACK.test(c.req.path))) {
      const own = requestOrigin(c, trustProxy);
      if (origin === 'null' || origin !== own) {
        const shown = printable(origin);
        logRefusal(shown, { ownOrigin: printable(own), reqId: c.get('requestId') });
        throw new AppError(
          403,
          'csrf_failed',
          `Origin "${shown}" may not send state-changing requests here: it is neither this service's origin nor listed in SVC_FRONTEND_URLS`,
        );
      }
    }
    // A browser that says the request comes from another site but names no Origin (a listed frontend
    // always sends one): nothing vouches for it (issue 58). Non-browser clients send neither header.
    if (!origin && UNSAFE.has(c.req.method) && c.req.header('sec-fetch-site') === 'cross-site' && !(c.req.method === 'POST' && FORM_POST_CALLBACK.test(c.req.path))) {
      logRefusal('(none, Sec-Fetch-Site: cross-site)', { ownOrigin: printable(requestOrigin(c, trustProxy)), reqId: c.get('requestId') });
      throw new AppError(403, 'csrf_failed', 'A cross-site request (Sec-Fetch-Site: cross-site) without an Origin may not change anything here');
    }
    await next();
  };
}

/** The origin a request reached, from its Host (and `X-Forwarded-Proto/Host` behind `trustProxy` proxies). */
export function originFromHeaders(headers: Record<string, string | string[] | undefined>, encrypted: boolean, trustProxy: number): string | undefined {
  const first = (name: string) => {
    const value = headers[name];
    return (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim() || undefined;
  };
  const proto = (trustProxy > 0 ? first('x-forwarded-proto') : undefined) ?? (encrypted ? 'https' : 'http');
  const host = (trustProxy > 0 ? first('x-forwarded-host') : undefined) ?? first('host');
  return host ? `${proto}://${host}` : undefined;
}

/** The origin the browser used to reach us, honouring `X-Forwarded-Proto/Host` behind a trusted proxy. */
export function requestOrigin(c: Context, trustProxy: number): string {
  const url = new URL(c.req.url);
  if (trustProxy > 0) {
    const proto = c.req.header('x-forwarded-proto')?.split(',')[0]?.trim();
    const host = c.req.header('x-forwarded-host')?.split(',')[0]?.trim();
    return `${proto || url.protocol.slice(0, -1)}://${host || url.host}`;
  }
  return url.origin;
}
