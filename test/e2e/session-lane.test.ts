// `GET /auth/session`'s lane (routes/auth/session.ts, `sessionLane`): the plainest form of that request
// is answered on Node's request and response in front of the app. Its answers must be the app's
// answers: the same status, headers, body and access log line, the same single store command. Each
// case sends the request the lane takes and the same request in a form it leaves to the app (`?` at
// the end: an empty query, the same route), over a real socket, on a private Redis, and compares.

import { getRequestListener } from '@hono/node-server';
import { Redis } from 'ioredis';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionLane } from '../../routes/auth/session.ts';
import { PresetHeadersResponse } from '../../src/http/response-headers.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { commandCalls, ISO_RE, parseSetCookie } from '../support/auth.ts';
import { redisServerAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis.ts';
import { freePort } from '../support/spawn.ts';

const FRONTEND = 'https://app.example.test';

interface Served {
  t: TestApp;
  url: string;
  /** Requests the lane handed to the app. */
  handedOver: number;
  /** The access log lines. */
  lines: Record<string, unknown>[];
  close(): Promise<void>;
}

/** The app on a real socket behind the lane, as server.ts serves it. */
async function serve(redisUrl: string, session: Record<string, unknown> = {}): Promise<Served> {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const t = await createTestApp({ redisUrl, config: { auth: { session } }, env: { SVC_FRONTEND_URLS: FRONTEND }, logger: createLogger('info', sink) });
  const app = getRequestListener(t.app.fetch);
  const served = { t, url: '', handedOver: 0, lines } as Served;
  const next = (req: IncomingMessage, res: ServerResponse) => {
    served.handedOver++;
    return app(req, res);
  };
  const http: Server = createServer({ ServerResponse: PresetHeadersResponse }, sessionLane(t.instance, next));
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  served.url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  served.close = async () => {
    await new Promise<void>((r) => http.close(() => r()));
    await t.close();
  };
  return served;
}

/** Logs in a new user over the socket; returns the user and the `Cookie` header to send. */
async function login(s: Served) {
  const user = await s.t.createUser();
  const res = await fetch(`${s.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: user.email, password: user.password }) });
  expect(res.status).toBe(200);
  return { user, cookie: res.headers.getSetCookie()[0]!.split(';')[0]! };
}

/** What of an answer must be the same both ways: the request id, the date and the session's moving expiry aside. */
async function comparable(res: Response) {
  const headers = Object.fromEntries([...res.headers].filter(([name]) => !['date', 'x-request-id', 'set-cookie'].includes(name)));
  const cookies = res.headers.getSetCookie().map(parseSetCookie);
  const body = (await res.json()) as Record<string, unknown>;
  if (body.expiresAt !== undefined) expect(body.expiresAt).toMatch(ISO_RE);
  return { status: res.status, headers, cookies, body: { ...body, expiresAt: typeof body.expiresAt } };
}

/** A GET of `path` exactly as written (fetch would drop an empty query's `?`), as a web Response. */
function get(s: Served, path: string, headers: Record<string, string>): Promise<Response> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(s.url);
    const req = request({ hostname, port, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const answer = new Headers();
        for (const [name, value] of Object.entries(res.headers)) for (const one of [value ?? []].flat()) answer.append(name, one);
        resolve(new Response(Buffer.concat(chunks), { status: res.statusCode!, headers: answer }));
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** Sends `path` the lane's way and with `?` appended (the app's way); returns both answers, read. */
async function both(s: Served, path: string, headers: Record<string, string>) {
  const before = s.handedOver;
  const lane = await get(s, path, headers);
  const laneHandedOver = s.handedOver - before;
  const app = await get(s, `${path}?`, headers);
  expect(s.handedOver - before - laneHandedOver, 'the `?` form goes to the app').toBe(1);
  return { lane, app, laneHandedOver };
}

describe.skipIf(!redisServerAvailable)("GET /auth/session's lane answers as the app does (private Redis)", () => {
  let redis: PrivateRedis;
  let probe: Redis;
  const servers: Served[] = [];
  beforeAll(async () => {
    redis = await startPrivateRedis(await freePort());
    probe = new Redis(redis.url);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    probe?.disconnect();
    redis?.kill('SIGTERM');
  });

  for (const [label, session] of [
    ['default (sliding, one GETEX)', {}],
    ['local cache', { localCache: true }],
    ['absolute sessions', { ttlMode: 'absolute' }],
  ] as const) {
    it(`${label}: a signed-in request is the lane's, with the app's status, headers, cookie, body and log line`, async () => {
      const s = await serve(redis.url, session);
      servers.push(s);
      const { cookie } = await login(s);
      // The local cache renews the cookie once a minute: the first request after the login does, the next do not.
      if ('localCache' in session) expect((await get(s, '/auth/session', { cookie })).headers.getSetCookie()).toHaveLength(1);
      for (const path of ['/auth/session', '/api/auth/session']) {
        const { lane, app, laneHandedOver } = await both(s, path, { cookie, 'x-request-id': 'lane-check-1' });
        expect(laneHandedOver, `${path}: answered by the lane`).toBe(0);
        expect(lane.headers.get('x-request-id')).toBe('lane-check-1');
        expect(app.headers.get('x-request-id')).toBe('lane-check-1');
        const [a, b] = [await comparable(lane), await comparable(app)];
        expect(a.status).toBe(200);
        expect(a).toEqual(b);
        // Sliding sessions renew the cookie on every request (with the local cache, once a minute).
        if ('ttlMode' in session) expect(a.cookies).toEqual([]);
        else if (!('localCache' in session)) expect(a.cookies.map((c) => c.name)).toEqual(['sid_app']);
      }
      const logged = s.lines.filter((l) => l.msg === 'request' && l.reqId === 'lane-check-1');
      expect(logged).toHaveLength(4);
      expect(s.handedOver, 'only the `?` forms (and the login) went to the app').toBe(3);
      expect(new Set(logged.map(({ method, path, status }) => JSON.stringify({ method, path, status })))).toEqual(new Set([JSON.stringify({ method: 'GET', path: '/auth/session', status: 200 })]));
      for (const line of logged) expect(typeof line.ms).toBe('number');
    });
  }

  it('a request id that is not plain is replaced, as the app does', async () => {
    const s = await serve(redis.url);
    servers.push(s);
    const { cookie } = await login(s);
    const { lane, app, laneHandedOver } = await both(s, '/auth/session', { cookie, 'x-request-id': 'not plain; at all' });
    expect(laneHandedOver).toBe(0);
    for (const res of [lane, app]) expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await comparable(lane)).toEqual(await comparable(app));
  });

  it('one store command per request; a cookie without a session goes to the app, which does not ask the store again', async () => {
    const s = await serve(redis.url);
    servers.push(s);
    const { cookie } = await login(s);
    await probe.config('RESETSTAT');
    const before = s.handedOver;
    for (let i = 0; i < 5; i++) expect((await fetch(`${s.url}/auth/session`, { headers: { cookie } })).status).toBe(200);
    expect(s.handedOver).toBe(before);
    const unknown = `sid_app=${'A'.repeat(43)}`;
    const { lane, app, laneHandedOver } = await both(s, '/auth/session', { cookie: unknown });
    expect(laneHandedOver).toBe(1);
    expect(await comparable(lane)).toEqual(await comparable(app));
    expect(lane.status).toBe(401);
    const calls = await commandCalls(probe);
    // 5 sessions read, then the unknown cookie twice (once the lane's way, once the app's way): one each.
    expect(calls.get('getex')).toBe(7);
  });

  it('what the lane does not take goes to the app: a browser Origin (CORS), a body, HEAD, a query, no cookie', async () => {
    const s = await serve(redis.url);
    servers.push(s);
    const { cookie } = await login(s);
    const handed = async (init: RequestInit & { path?: string }) => {
      const before = s.handedOver;
      const res = await fetch(`${s.url}${init.path ?? '/auth/session'}`, init);
      expect(s.handedOver - before, JSON.stringify(init)).toBe(1);
      return res;
    };
    const cors = await handed({ headers: { cookie, origin: FRONTEND } });
    expect(cors.status).toBe(200);
    expect(cors.headers.get('access-control-allow-origin')).toBe(FRONTEND);
    expect(cors.headers.get('access-control-allow-credentials')).toBe('true');
    expect((await handed({ method: 'HEAD', headers: { cookie } })).status).toBe(200);
    expect((await handed({ path: '/auth/session?expand=user', headers: { cookie } })).status).toBe(200);
    expect((await handed({ path: '/auth/session?expand=nope', headers: { cookie } })).status).toBe(400);
    expect((await handed({ headers: {} })).status).toBe(401);
    expect((await handed({ path: '/auth/session/', headers: { cookie } })).status).toBe(404);
  });

  it('the lane answers what the record says now: a changed record, a moved expiry (the answer it keeps goes)', async () => {
    for (const session of [{ localCache: true }, {}]) {
      const s = await serve(redis.url, session);
      servers.push(s);
      const { user, cookie } = await login(s);
      const read = async () => {
        const before = s.handedOver;
        const answer = await fetch(`${s.url}/auth/session`, { headers: { cookie } });
        expect(s.handedOver, 'answered by the lane').toBe(before);
        const text = await answer.text();
        expect(Number(answer.headers.get('content-length')), 'the length of this answer').toBe(Buffer.byteLength(text));
        const body = JSON.parse(text) as { isAdmin: boolean; expiresAt: string };
        expect(Object.keys(body)).toEqual(['userId', 'isAdmin', 'provider', 'createdAt', 'expiresAt', 'totp']);
        expect(body.expiresAt).toMatch(ISO_RE);
        return body;
      };
      const first = await read();
      expect((await read()).isAdmin).toBe(false);
      await s.t.instance.auth.sessions.rewrite(user.id, { isAdmin: true, totp: false });
      expect((await read()).isAdmin, JSON.stringify(session)).toBe(true);
      if (!('localCache' in session)) {
        // Without the cache every request pushes the TTL: the expiry moves with each answer.
        await new Promise((r) => setTimeout(r, 5));
        expect(Date.parse((await read()).expiresAt)).toBeGreaterThan(Date.parse(first.expiresAt));
      }
    }
  });

  it('a session that ended is refused at once, both ways (logout on another connection)', async () => {
    const s = await serve(redis.url, { localCache: true });
    servers.push(s);
    const { cookie } = await login(s);
    expect((await fetch(`${s.url}/auth/session`, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${s.url}/auth/logout`, { method: 'POST', headers: { cookie, origin: s.url } })).status).toBe(204);
    const { lane, app } = await both(s, '/auth/session', { cookie });
    expect([lane.status, app.status]).toEqual([401, 401]);
    expect(await comparable(lane)).toEqual(await comparable(app));
  });
});
