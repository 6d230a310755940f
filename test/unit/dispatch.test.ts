import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { describe, expect, it } from 'vitest';
import { dispatchSynchronously, syncAwareLayer } from '../../src/http/dispatch.ts';
import { MemoTrieRouter } from '../../src/http/router.ts';

/**
 * The same app twice: once with Hono's own dispatch, once with `dispatchSynchronously`. Every request
 * must get the same answer from both (status, headers, body), or fail the same way.
 */
function build(synchronous: boolean): Hono {
  const router = new MemoTrieRouter<never>();
  const getPath = (request: Request) => new URL(request.url).pathname;
  const app = new Hono({ router, getPath });
  const onError = (err: Error, c: Context) => c.json({ error: err.message }, 500);
  const notFound = (c: Context) => c.json({ error: 'not found' }, 404);
  // svc's kind of layer: passes next()'s answer on as it comes.
  const stamp = syncAwareLayer(((c, next) => {
    c.set('stamp' as never, 'yes' as never);
    return next();
  }) as MiddlewareHandler);
  app.use(stamp);
  // A plugin's kinds of middleware: after `await next()`, and chaining on the Promise.
  app.use('/after/*', async (c, next) => {
    await next();
    c.res.headers.set('x-after', 'set');
  });
  app.use('/chained/*', (c, next) => next().then(() => c.res.headers.set('x-chained', 'set')));
  app.use('/items/:id/*', async (c, next) => {
    c.header('x-item', c.req.param('id'));
    await next();
  });
  app.get('/sync', (c) => c.json({ stamp: c.get('stamp' as never) }));
  app.get('/async', async (c) => {
    await new Promise((resolve) => setTimeout(resolve, 1));
    return c.text('later');
  });
  app.get('/after/x', (c) => c.text('after'));
  app.get('/chained/x', (c) => c.text('chained'));
  app.get('/items/:id/detail', (c) => c.json({ id: c.req.param('id') }));
  app.get('/throws', () => {
    throw new Error('sync failure');
  });
  app.get('/rejects', async () => {
    throw new Error('async failure');
  });
  app.use('/twice', async (_c, next) => {
    await next();
    await next();
  });
  app.get('/twice', (c) => c.text('twice'));
  app.get('/nothing', (() => undefined) as never);
  app.use('/throws-after/*', async (_c, next) => {
    await next();
    throw new Error('after next');
  });
  app.get('/throws-after/x', (c) => c.text('x'));
  app.get('/non-error', () => {
    throw 'a string';
  });
  const sub = new Hono();
  sub.get('/boom', () => {
    throw new Error('sub failure');
  });
  sub.onError((err, c) => c.json({ sub: err.message }, 418));
  app.route('/sub', sub);
  app.notFound(notFound);
  app.onError(onError);
  if (synchronous) dispatchSynchronously(app, { getPath, router: router as never, onError, notFound });
  return app;
}

async function answer(app: Hono, method: string, path: string) {
  try {
    const res = await app.request(path, { method });
    return { status: res.status, headers: [...res.headers].sort(), body: await res.text() };
  } catch (err) {
    return { threw: String(err) };
  }
}

describe('dispatchSynchronously', () => {
  const hono = build(false);
  const ours = build(true);
  const requests: [string, string][] = [
    ['GET', '/sync'],
    ['GET', '/async'],
    ['HEAD', '/sync'],
    ['GET', '/after/x'],
    ['GET', '/chained/x'],
    ['GET', '/items/42/detail'],
    ['GET', '/throws'],
    ['GET', '/rejects'],
    ['GET', '/twice'],
    ['GET', '/nothing'],
    ['GET', '/throws-after/x'],
    ['GET', '/non-error'],
    ['GET', '/sub/boom'],
    ['GET', '/missing'],
    ['POST', '/sync'],
  ];

  it.each(requests)('%s %s answers exactly as Hono does', async (method, path) => {
    const expected = await answer(hono, method, path);
    expect(await answer(ours, method, path)).toEqual(expected);
  });

  it('answers at once, without a Promise, when every layer does', () => {
    const res = ours.fetch(new Request('http://localhost/sync'));
    expect(res).toBeInstanceOf(Response);
    expect(hono.fetch(new Request('http://localhost/sync'))).toBeInstanceOf(Promise);
  });

  it('a middleware that chains on next() gets a Promise, and answers later', async () => {
    const res = ours.fetch(new Request('http://localhost/chained/x'));
    expect(res).toBeInstanceOf(Promise);
    expect((await res).headers.get('x-chained')).toBe('set');
  });
});
