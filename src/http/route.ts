import { vValidator } from '@hono/valibot-validator';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import * as v from 'valibot';
import type { AppEnv } from './env.ts';
import { promised, syncAwareLayer, type SyncAwareLayer } from './dispatch.ts';
import { MAX_JSON_DEPTH, nestedDeeperThan } from './json-depth.ts';
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
  /** `optionalBody`: a request with no body at all is validated as `{}` (e.g. a command with no arguments). */
  config?: { type?: string; public?: boolean; optionalBody?: boolean };
  /**
   * The route takes API keys (CONTRACT 15) holding every one of these scopes (`<pluginKey>:<action>`);
   * `[]`: any key. Absent: a key gets 403 `api_key_not_allowed`. Sessions are not affected.
   */
  scopes?: string[];
  schema: RouteSchema<B, Q, P>;
  handler: (c: Context<AppEnv>, input: { body: Out<B>; query: Out<Q>; params: Out<P> }) => Response | Promise<Response>;
}

/**
 * Declares a route with its input types inferred from its schemas. `scopes`: API keys holding them
 * may call it too (CONTRACT 15). Usage:
 * ```ts
 * export const createTodo = (instance: ServerInstance) => defineRoute({
 *   method: 'POST', path: '/todo', onRequest: instance.auth.authenticate(), scopes: ['svc__todo:write'],
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

/** Routes mounted on each Hono app by `mountRoutes`, so the app's owner can document them (openapi.ts). */
const registry = new WeakMap<object, RouteDefinition[]>();

function recordRoutes(app: object, routes: RouteDefinition[]): void {
  registry.set(app, [...(registry.get(app) ?? []), ...routes]);
}

/** The route definitions `mountRoutes` mounted on `app`. */
export function routesOf(app: object): RouteDefinition[] {
  return registry.get(app) ?? [];
}

/** valibot issues as CONTRACT section 2's `details`: `[{"path":"a.b","message":"..."}]`. */
export function issueDetails(issues: readonly v.BaseIssue<unknown>[]): ErrorDetail[] {
  return issues.map((issue) => ({ path: v.getDotPath(issue) ?? '', message: messageOf(issue) }));
}

/** valibot's words where they read well; its object-key issues said as a person would. */
function messageOf(issue: v.BaseIssue<unknown>): string {
  const objectKey = issue.kind === 'schema' && /object/.test(issue.type) && issue.message.startsWith('Invalid key');
  if (objectKey && issue.expected === 'never') return 'is not an allowed field';
  if (objectKey && issue.received === 'undefined') return 'is required';
  return issue.message;
}

/** One line for a person: each problem prefixed by its field unless the message names it already. */
function summary(details: ErrorDetail[]): string {
  return details.map((d) => (!d.path || d.message.startsWith(d.path) ? d.message : `${d.path}: ${d.message}`)).join('; ');
}

function failOnIssues(result: { success: boolean; issues?: readonly v.BaseIssue<unknown>[] }) {
  if (result.success) return;
  const details = issueDetails(result.issues ?? []);
  throw validationFailed(details, summary(details));
}

/**
 * Query validation; a request without a query string reuses the one result of validating `{}`
 * (most GETs carry none, and the route still sees its defaults).
 */
function queryValidator(schema: AnySchema): MiddlewareHandler<AppEnv> {
  const validate = vValidator('query', schema, failOnIssues);
  const empty = v.safeParse(schema, {});
  const validator: SyncAwareLayer<AppEnv> = (c, next) => {
    if (empty.success && !c.req.url.includes('?')) {
      c.req.addValidatedData('query', { ...(empty.output as Record<string, unknown>) });
      return next();
    }
    return validate(c as never, promised(next));
  };
  return syncAwareLayer(validator) as MiddlewareHandler<AppEnv>;
}

/** Refuses a body that is not JSON before validation sees it: 415, or 400 `invalid_json`. */
const jsonBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(type)) {
    throw new AppError(415, 'unsupported_media_type', 'The request body must be JSON (Content-Type: application/json)');
  }
  if (nestedDeeperThan(await c.req.text(), MAX_JSON_DEPTH)) {
    throw new AppError(400, 'invalid_json', `The request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  try {
    await c.req.json(); // Hono caches the parsed body for the validator
  } catch {
    throw new AppError(400, 'invalid_json', 'The request body is not valid JSON');
  }
  await next();
};

const OBJECT_SCHEMAS = new Set(['object', 'strict_object', 'loose_object', 'object_with_rest']);

interface SchemaShape {
  type: string;
  entries?: Record<string, AnySchema>;
  wrapped?: AnySchema;
  item?: AnySchema;
  value?: AnySchema;
  options?: AnySchema[];
}

/** An object or record schema, piped or not, or a union of them. */
function wantsObject(schema: AnySchema): boolean {
  const { type, options } = schema as SchemaShape;
  if (OBJECT_SCHEMAS.has(type) || type === 'record') return true;
  return (type === 'union' || type === 'variant') && Array.isArray(options) && options.every(wantsObject);
}

/**
 * Where in `value` a JSON array stands for an object of `schema` ('' for the whole body), if anywhere:
 * valibot's object check lets an array through as `{}`, so a PATCH of `[]` answered 200 as an empty
 * change and a provider's `"config": []` was stored as `{}`. Walks objects, arrays, records and the
 * wrappers (optional, nullable, ...).
 */
function arrayForObject(schema: AnySchema, value: unknown, path = ''): string | undefined {
  const s = schema as SchemaShape;
  if (s.wrapped) return arrayForObject(s.wrapped, value, path);
  if (Array.isArray(value) && wantsObject(schema)) return path;
  if (typeof value !== 'object' || value === null) return undefined;
  const at = (key: string | number) => (path ? `${path}.${key}` : String(key));
  const first = (pairs: [string | number, AnySchema, unknown][]) => {
    for (const [key, entry, field] of pairs) {
      const found = arrayForObject(entry, field, at(key));
      if (found !== undefined) return found;
    }
    return undefined;
  };
  const fields = value as Record<string, unknown>;
  if (OBJECT_SCHEMAS.has(s.type) && s.entries) return first(Object.entries(s.entries).filter(([key]) => key in fields).map(([key, entry]) => [key, entry, fields[key]]));
  if (s.type === 'array' && s.item && Array.isArray(value)) return first(value.map((item, i) => [i, s.item!, item]));
  if (s.type === 'record' && s.value && !Array.isArray(value)) return first(Object.entries(fields).map(([key, field]) => [key, s.value!, field]));
  return undefined;
}

/** Refuses a JSON array where the body schema wants an object, as it refuses a string there. */
function refusingArrays(schema: AnySchema, validate: MiddlewareHandler<AppEnv>): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const path = arrayForObject(schema, await c.req.json());
    if (path !== undefined) {
      const details = [{ path, message: 'Invalid type: Expected Object but received Array' }];
      throw validationFailed(details, summary(details));
    }
    return validate(c, next);
  };
}

/** `config.optionalBody`: an empty body is `{}`; any other body must be JSON as usual. */
function optionalJsonBody(schema: AnySchema, validate: MiddlewareHandler<AppEnv>): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    // Read once (Hono caches it for the JSON parse that follows): an empty body, however sent, is `{}`.
    if ((await c.req.text()) === '') {
      const result = v.safeParse(schema, {});
      failOnIssues(result);
      c.req.addValidatedData('json', result.output as object);
      return next();
    }
    return jsonBody(c, () => validate(c, next) as Promise<void>);
  };
}

// Handlers of routes declared `config.public`: `requireCaller` lets them through.
const publicHandlers = new WeakSet<object>();
// The 405 fallbacks match every method of a path, so they must not decide whether a path is public.
const fallbackHandlers = new WeakSet<object>();
// The handlers `mountRoutes` ends each route with: past one, later matches never run.
const finalHandlers = new WeakSet<object>();
const COMPOSED_HANDLER = '__COMPOSED_HANDLER'; // where Hono's `route()` keeps a wrapped sub-app handler

/** Whether `handler`, or the one Hono wrapped into it when mounting a sub-app, passes `test`. */
function either(test: (handler: object) => boolean, handler: object): boolean {
  const inner = (handler as Record<string, object | undefined>)[COMPOSED_HANDLER];
  return test(handler) || (inner !== undefined && test(inner));
}

const isPublicHandler = (handler: object) => either((h) => publicHandlers.has(h), handler);

/**
 * The one place that turns route definitions into Hono routes: hooks, then body/query/params
 * validation, then the handler with typed input. Paths that exist answer other methods with 405.
 */
export function mountRoutes(app: Hono<AppEnv>, routes: RouteDefinition[]): void {
  recordRoutes(app, routes);
  const methodsByPath = new Map<string, Set<HttpMethod>>();
  for (const route of routes) {
    const chain: MiddlewareHandler<AppEnv>[] = [];
    if (route.scopes) chain.push(scopeLayer(route.scopes));
    chain.push(...[route.onRequest ?? []].flat());
    const { body, query, params } = route.schema as RouteSchema<AnySchema | undefined, AnySchema | undefined, AnySchema | undefined>;
    if (params) chain.push(vValidator('param', params, failOnIssues));
    if (query) chain.push(queryValidator(query));
    if (body) {
      const validate = refusingArrays(body, vValidator('json', body, failOnIssues) as unknown as MiddlewareHandler<AppEnv>);
      chain.push(route.config?.optionalBody ? optionalJsonBody(body, validate) : jsonBody, ...(route.config?.optionalBody ? [] : [validate]));
    }
    // Takes no `next`: whatever the route's handler answers, at once or later, is the answer.
    const handler = syncAwareLayer((c: Context<AppEnv>) => {
      const req = c.req as unknown as { valid(target: string): unknown };
      return route.handler(c, {
        body: body ? req.valid('json') : undefined,
        query: query ? req.valid('query') : undefined,
        params: params ? req.valid('param') : undefined,
      } as never);
    });
    if (route.config?.public) publicHandlers.add(handler);
    finalHandlers.add(handler);
    app.on(route.method, route.path, ...(chain as [MiddlewareHandler<AppEnv>]), handler);
    const methods = methodsByPath.get(route.path) ?? new Set();
    methods.add(route.method);
    methodsByPath.set(route.path, methods);
  }
  answerOtherMethods(app, methodsByPath);
}

/** Registers, for each path, a 405 `method_not_allowed` (with `Allow`) for the methods it does not take. */
function answerOtherMethods(app: Hono<AppEnv>, methodsByPath: Map<string, Set<string>>): void {
  for (const [path, methods] of methodsByPath) {
    const allow = [...methods, ...(methods.has('GET') ? ['HEAD'] : [])].join(', ');
    const methodNotAllowed = () => {
      throw new AppError(405, 'method_not_allowed', `Method not allowed; this path accepts ${allow}`, undefined, { Allow: allow });
    };
    fallbackHandlers.add(methodNotAllowed);
    app.all(path, methodNotAllowed);
  }
}

/**
 * Mounts a plugin's Hono app under `prefix`. Its plain routes (`app.get(...)`, not `defineRoute`) get
 * the 405 of every other route too: a path the plugin answers for some methods is not "not found"
 * for the others (CONTRACT section 2). Paths the plugin answers for every method are left alone.
 */
export function mountPlugin(app: Hono<AppEnv>, prefix: string, plugin: Hono<AppEnv>): void {
  app.route(prefix, plugin);
  const methodsByPath = new Map<string, Set<string>>();
  const anyMethod = new Set(plugin.routes.filter((r) => r.method === 'ALL').map((r) => r.path));
  for (const { method, path } of plugin.routes) {
    if (method === 'ALL' || anyMethod.has(path)) continue;
    const full = path === '/' ? prefix : `${prefix}${path.startsWith('/') ? '' : '/'}${path}`;
    methodsByPath.set(full, (methodsByPath.get(full) ?? new Set()).add(method));
  }
  answerOtherMethods(app, methodsByPath);
}

/** What `requireCaller` needs to know of authentication, given by the app (this layer knows no auth). */
export interface CallerRules {
  /** Route hooks that judge anonymous callers themselves (work-session guests' `authenticatedOrWorksession`). */
  judgesAnonymous(hook: object): boolean;
  /** The error for an anonymous caller of a route that wants one (401). */
  unauthenticated(c: Context): Error;
}

/**
 * `global.requireAuthentication` (SPEC.md rule 9): anonymous callers get 401 on every route not
 * declared `config.public`, core and plugin alike (plain Hono routes of plugins included). Paths
 * that match no route fall through to 404. `appMiddleware` are the app-wide hooks, which do not
 * count as routes. Only anonymous requests pay for the route lookup.
 */
export function requireCaller(appMiddleware: WeakSet<object>, rules: CallerRules): SyncAwareLayer<AppEnv> {
  const judgesAnonymous = (handler: object) => either((h) => rules.judgesAnonymous(h), handler);
  return function requireCaller(c, next) {
    if (!c.get('authUser') && !c.get('workSession')) {
      const routes = matchedRoutes(c).filter((r) => !appMiddleware.has(r.handler) && !fallbackHandlers.has(r.handler));
      // Routes with an `authenticatedOrWorksession` hook judge anonymous callers themselves (401
      // `unauthenticated` without the header, `invalid_work_session` for a header naming no valid one).
      const open = routes.some((r) => isPublicHandler(r.handler) || judgesAnonymous(r.handler));
      if (routes.length > 0 && !open) throw rules.unauthenticated(c);
    }
    return next();
  };
}

// ---------------------------------------------------------------------------------------------
// API keys (CONTRACT 15): which route layers take them, and the scopes they ask for.

/** Route layers that take API keys, with the scopes each asks for. */
const keyLayers = new WeakMap<object, readonly string[]>();

/** Marks `layer` as taking API keys that hold `scopes` (`authenticate({scopes})`, `defineRoute({scopes})`). */
export function acceptsApiKeys<T extends object>(layer: T, scopes: readonly string[]): T {
  keyLayers.set(layer, scopes);
  return layer;
}

/**
 * For a key request (`authUser.apiKey`): 403 `insufficient_scope` unless the key holds every one of
 * `scopes`; else the request counts as let through by a layer that takes keys. Sessions pass as they are.
 */
export function checkScopes(c: Context<AppEnv>, scopes: readonly string[]): void {
  const key = c.get('authUser')?.apiKey;
  if (!key) return;
  const missing = scopes.filter((s) => !key.scopes.includes(s));
  if (missing.length) throw new AppError(403, 'insufficient_scope', `This API key lacks the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
  c.set('apiKeyAccepted', true);
}

/** `defineRoute({scopes})`'s first layer. */
function scopeLayer(scopes: readonly string[]): MiddlewareHandler<AppEnv> {
  const layer: SyncAwareLayer<AppEnv> = (c, next) => {
    checkScopes(c, scopes);
    return next();
  };
  return acceptsApiKeys(syncAwareLayer(layer), scopes) as MiddlewareHandler<AppEnv>;
}

/** The scopes an API key needs for `route` (`[]`: any key), or undefined: the route takes no key. */
export function routeKeyScopes(route: RouteDefinition): readonly string[] | undefined {
  if (route.scopes) return route.scopes;
  const hooks = [route.onRequest ?? []].flat() as object[];
  const scoped = hooks.filter((h) => keyLayers.has(h));
  return scoped.length ? [...new Set(scoped.flatMap((h) => keyLayers.get(h)!))] : undefined;
}

/** Every scope the routes declare (`defineRoute({scopes})`): what a new API key may ask for. */
export function declaredScopes(routes: RouteDefinition[]): string[] {
  return [...new Set(routes.flatMap((r) => r.scopes ?? []))];
}

/**
 * The app-wide rule for API keys (CONTRACT 15), for key requests only: a route takes a key when one of
 * its layers says so (`defineRoute({scopes})`, `authenticate({scopes})`, `authenticate({admin:true})`);
 * any other route answers 403 `api_key_not_allowed` before a handler sees the key's user, public ones
 * too (`/health`, `/openapi.json`: "a route declared without scopes takes no key"). Paths that match no
 * route fall through to 404/405. `appMiddleware` are the app-wide hooks, which do not count as routes.
 */
export function apiKeyGate(appMiddleware: WeakSet<object>): SyncAwareLayer<AppEnv> {
  const is = (set: WeakSet<object>) => (handler: object) => either((h) => set.has(h), handler);
  const isFallback = is(fallbackHandlers);
  const isFinal = is(finalHandlers);
  const takesKeys = (handler: object) => either((h) => keyLayers.has(h), handler);
  return function apiKeyGate(c, next) {
    if (!c.get('authUser')?.apiKey) return next();
    let matched = false;
    for (const r of matchedRoutes(c)) {
      if (appMiddleware.has(r.handler) || isFallback(r.handler)) continue;
      matched = true;
      if (takesKeys(r.handler)) return next();
      if (isFinal(r.handler)) break; // what matches after the route that answers never runs
    }
    if (!matched) return next();
    throw apiKeyNotAllowed();
  };
}

/** 403 `api_key_not_allowed`: this route takes sessions only. */
export const apiKeyNotAllowed = (why = 'This route does not accept API keys: call it with a session') => new AppError(403, 'api_key_not_allowed', why);
