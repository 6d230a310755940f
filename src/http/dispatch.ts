import { Context, type Env, type ErrorHandler, type Hono, type NotFoundHandler } from 'hono';
import type { Router } from 'hono/router';

/**
 * A layer of the middleware chain (a hook, a validator, a route handler) whose `next` may answer
 * synchronously. Such a layer passes `next()`'s result on (or only awaits it) and never chains on
 * it with `.then`: svc's own hooks, validators and route handlers. Any other layer, a plugin's
 * middleware for one, gets a `next` that returns a Promise, as Hono's does.
 */
export type SyncAwareLayer<E extends Env = Env> = (c: Context<E>, next: () => unknown) => unknown;

const syncAware = new WeakSet<object>();

/** Marks a layer as written for a `next` that may answer synchronously (see `SyncAwareLayer`). */
export function syncAwareLayer<T extends object>(layer: T): T {
  syncAware.add(layer);
  return layer;
}

/** Whether a layer's answer must be waited for (a Promise, or any other thenable a handler returns). */
export function isPending(value: unknown): value is PromiseLike<unknown> {
  if (value instanceof Promise) return true;
  return typeof value === 'object' && value !== null && !(value instanceof Response) && !(value instanceof Context) && typeof (value as { then?: unknown }).then === 'function';
}

/** `next` as Hono's middleware expects it, a Promise of what `next` gives: for a layer that is not sync-aware. */
export const promised = (next: () => unknown) => (async () => next()) as () => Promise<void>;

type Layer = [[(c: Context, next: () => unknown) => unknown, unknown], unknown];

/**
 * Runs the matched layers exactly as Hono's `compose` does (hono/dist/compose.js: the route index set
 * for each layer, an Error a layer throws handed to the error handler with `c.error` set, the
 * not-found handler past the last layer, a layer's Response kept unless the context is finalized),
 * but without a Promise where no layer needed one. Hono's compose is an async function per layer, so
 * even an answer that was ready at once was written from a later microtask: on `GET /auth/session`
 * answered from the local session cache, dropping those promises took the server's user CPU per request
 * from 24.2-26.9 to 22.8-23.7 µs (autocannon -c 50). Returns the context, or a Promise of it once some
 * layer answered later.
 */
function runLayers(c: Context, layers: Layer[], onError: ErrorHandler, onNotFound: NotFoundHandler): Context | Promise<Context> {
  let index = -1;
  const settle = (res: unknown, isError: boolean): Context => {
    if (res && (c.finalized === false || isError)) c.res = res as Response;
    return c;
  };
  const failed = (err: unknown): Context | Promise<Context> => {
    if (!(err instanceof Error)) throw err;
    c.error = err;
    const res = onError(err, c);
    return isPending(res) ? Promise.resolve(res).then((answer) => settle(answer, true)) : settle(res, true);
  };
  const settled = (answer: unknown) => settle(answer, false);
  const dispatch = (i: number): Context | Promise<Context> => {
    if (i <= index) throw new Error('next() called multiple times');
    index = i;
    const layer = layers[i];
    if (!layer) {
      if (c.finalized) return c;
      const res = onNotFound(c);
      return isPending(res) ? Promise.resolve(res).then(settled) : settle(res, false);
    }
    const handler = layer[0][0];
    c.req.routeIndex = i;
    let res: unknown;
    try {
      const next = () => dispatch(i + 1);
      res = handler(c, syncAware.has(handler) ? next : promised(next));
    } catch (err) {
      return failed(err);
    }
    return isPending(res) ? Promise.resolve(res).then(settled, failed) : settle(res, false);
  };
  return dispatch(0);
}

const NOT_FINALIZED = 'Context is not finalized. Did you forget to return a Response object or `await next()`?';

/**
 * Replaces `app.fetch` (and so `app.request`) with Hono's own dispatch (hono/dist/hono-base.js
 * `#dispatch`: the path, the router's match, a Context, HEAD answered as GET without a body) running
 * `runLayers` instead of `compose`. A request every layer of which answers synchronously gets its
 * Response synchronously, and @hono/node-server writes it in the same turn of the event loop.
 * `getPath`, `router`, `onError` and `notFound` are the ones the app was given.
 */
export function dispatchSynchronously<E extends Env>(
  app: Hono<E>,
  parts: { getPath: (request: Request) => string; router: Router<unknown>; onError: ErrorHandler<E>; notFound: NotFoundHandler<E> },
): void {
  const { getPath, router, notFound } = parts;
  const onError = parts.onError as unknown as ErrorHandler;
  const handleError = (err: unknown, c: Context): Response | Promise<Response> => {
    if (err instanceof Error) return onError(err, c);
    throw err;
  };
  const dispatch = (request: Request, env: unknown, executionCtx: unknown, method: string): Response | Promise<Response> => {
    if (method === 'HEAD') return (async () => new Response(null, await dispatch(request, env, executionCtx, 'GET')))();
    const path = getPath(request);
    const matchResult = router.match(method, path) as never;
    const c = new Context(request, { path, matchResult, env, executionCtx: executionCtx as never, notFoundHandler: notFound as never });
    // The answer once every layer ran; a context nothing finalized is an error, as in Hono.
    const finish = (done: Context): Response | Promise<Response> => (done.finalized ? done.res : handleError(new Error(NOT_FINALIZED), c));
    let done: Context | Promise<Context>;
    try {
      done = runLayers(c, (matchResult as [Layer[]])[0], onError, notFound as unknown as NotFoundHandler);
    } catch (err) {
      return handleError(err, c);
    }
    return isPending(done) ? done.then(finish, (err: unknown) => handleError(err, c)) : finish(done);
  };
  (app as { fetch: unknown }).fetch = (request: Request, env?: unknown, executionCtx?: unknown) => dispatch(request, env, executionCtx, request.method);
}
