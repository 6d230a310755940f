import { vValidator } from '@hono/valibot-validator';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import * as v from 'valibot';
import { unauthenticatedError } from '../auth/index.ts';
import type { AppEnv } from './env.ts';
import { AppError, validationFailed, type ErrorDetail } from './errors.ts';

type AnySchema = v.GenericSchema;
type Out<S> = S extends AnySchema ? v.InferOutput<S> : undefined;

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** What a route documents about itself; the source of validation and of the OpenAPI document. */
export interface RouteSchema<B, Q, P> {
  summary: string;
  description?: string;
  tags?: string[];
  body?: B;
  query?: Q;
  params?: P;
}

/**
 * A route (SPEC.md "Reference plugin routes"): a factory returns this. `onRequest` runs before
 * validation (e.g. `authenticate`), `config.type` names the kind of operation (`dataCreate`...),
 * `config.public` exempts the route from `global.requireAuthentication`.
 */
export interface RouteDefinition<B = unknown, Q = unknown, P = unknown> {
  method: HttpMethod;
  path: string;
  onRequest?: MiddlewareHandler<AppEnv> | MiddlewareHandler<AppEnv>[];
  config?: { type?: string; public?: boolean };
  schema: RouteSchema<B, Q, P>;
  handler: (c: Context<AppEnv>, input: { body: Out<B>; query: Out<Q>; params: Out<P> }) => Response | Promise<Response>;
}

/**
 * Declares a route with its input types inferred from its schemas. Usage:
 * ```ts
 * export const createTodo = (instance: ServerInstance) => defineRoute({
 *   method: 'POST', path: '/todo', onRequest: instance.auth.authenticate(),
 *   schema: { summary: 'Create a todo', body: createSchema },
 *   handler: async (c, { body }) => c.json({ data: await service.create(body) }, 201),
 * });
 * ```
 */
export function defineRoute<
  B extends AnySchema | undefined = undefined,
  Q extends AnySchema | undefined = undefined,
  P extends AnySchema | undefined = undefined,
>(route: RouteDefinition<B, Q, P>): RouteDefinition<B, Q, P> {
  return route;
}

/** valibot issues as CONTRACT section 2's `details`: `[{"path":"a.b","message":"..."}]`. */
export function issueDetails(issues: readonly v.BaseIssue<unknown>[]): ErrorDetail[] {
  return issues.map((issue) => ({ path: v.getDotPath(issue) ?? '', message: issue.message }));
}

function failOnIssues(result: { success: boolean; issues?: readonly v.BaseIssue<unknown>[] }) {
  if (!result.success) throw validationFailed(issueDetails(result.issues ?? []));
}

/** Refuses a body that is not JSON before validation sees it: 415, or 400 `invalid_json`. */
const jsonBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(type)) {
    throw new AppError(415, 'unsupported_media_type', 'The request body must be JSON (Content-Type: application/json)');
  }
  try {
    await c.req.json(); // Hono caches the parsed body for the validator
  } catch {
    throw new AppError(400, 'invalid_json', 'The request body is not valid JSON');
  }
  await next();
};

export interface MountOptions {
  /** `global.requireAuthentication`: non-public routes refuse anonymous callers after `onRequest`. */
  requireAuthentication: boolean;
}

/**
 * The one place that turns route definitions into Hono routes: hooks, then body/query/params
 * validation, then the handler with typed input. Paths that exist answer other methods with 405.
 */
export function mountRoutes(app: Hono<AppEnv>, routes: RouteDefinition[], opts: MountOptions): void {
  const methodsByPath = new Map<string, Set<HttpMethod>>();
  for (const route of routes) {
    const chain: MiddlewareHandler<AppEnv>[] = [];
    chain.push(...[route.onRequest ?? []].flat());
    if (opts.requireAuthentication && !route.config?.public) chain.push(requireCaller);
    const { body, query, params } = route.schema as RouteSchema<AnySchema | undefined, AnySchema | undefined, AnySchema | undefined>;
    if (params) chain.push(vValidator('param', params, failOnIssues));
    if (query) chain.push(vValidator('query', query, failOnIssues));
    if (body) chain.push(jsonBody, vValidator('json', body, failOnIssues));
    const handler = (c: Context<AppEnv>) => {
      const req = c.req as unknown as { valid(target: string): unknown };
      return route.handler(c, {
        body: body ? req.valid('json') : undefined,
        query: query ? req.valid('query') : undefined,
        params: params ? req.valid('param') : undefined,
      } as never);
    };
    app.on(route.method, route.path, ...(chain as [MiddlewareHandler<AppEnv>]), handler);
    const methods = methodsByPath.get(route.path) ?? new Set();
    methods.add(route.method);
    methodsByPath.set(route.path, methods);
  }
  for (const [path, methods] of methodsByPath) {
    const allow = [...methods, ...(methods.has('GET') ? ['HEAD'] : [])].join(', ');
    app.all(path, () => {
      throw new AppError(405, 'method_not_allowed', `Method not allowed; this path accepts ${allow}`, undefined, { Allow: allow });
    });
  }
}

/** `global.requireAuthentication`: a caller is a session user or a work-session guest. */
const requireCaller: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (!c.get('authUser') && !c.get('workSession')) throw unauthenticatedError(c);
  await next();
};
