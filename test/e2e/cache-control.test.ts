// Security review, issue 24, finding 10: responses about a user (the session, the users API, plugin
// data) and error answers must not be stored by a browser or a shared cache. One app-wide rule sends
// `Cache-Control: no-store` unless the handler chose its own (the /docs script is cached for a year).
// In-process (the header is set on the Response), and through the real socket (set on Node's response
// before the handler: a second code path, see app.ts).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { startReadySvc, stopAll } from '../support/spawn.ts';

afterAll(stopAll);

describe('Cache-Control', () => {
  let t: TestApp;
  let admin: TestClient;
  beforeAll(async () => {
    t = await createTestApp();
    const user = await t.createUser({ admin: true });
    admin = t.client();
    expect((await admin.login(user.email, user.password)).status).toBe(200);
  });
  afterAll(() => t?.close());

  const noStore = (res: Response, what: string) => expect(res.headers.get('cache-control'), what).toBe('no-store');
  /** Issue 19 part 2 (security-headers.test.ts in-process): once each, also on Node's response path. */
  const securityHeaders = (res: Response, what: string) => {
    expect(res.headers.get('x-content-type-options'), what).toBe('nosniff');
    expect(res.headers.get('referrer-policy'), what).toBe('no-referrer');
  };

  it('finding 10: GET /auth/session (with and without expand=user) is no-store', async () => {
    for (const path of ['/auth/session', '/auth/session?expand=user', '/api/auth/session']) {
      const res = await admin.fetch(path);
      expect(res.status).toBe(200);
      noStore(res, path);
    }
  });

  it('finding 10: the users API is no-store (list, read, create)', async () => {
    const list = await admin.fetch('/auth/users');
    expect(list.status).toBe(200);
    noStore(list, 'GET /auth/users');
    const created = await admin.fetch('/auth/users', { method: 'POST', json: { email: `c-${Date.now()}@example.com`, password: 'a long password' } });
    expect(created.status).toBe(201);
    noStore(created, 'POST /auth/users');
    const one = await admin.fetch(`/auth/users/${(await created.json()).id}`);
    expect(one.status).toBe(200);
    noStore(one, 'GET /auth/users/:id');
  });

  it('finding 10: plugin data (/svc__todo/all) is no-store', async () => {
    const res = await admin.fetch('/svc__todo/all');
    expect(res.status).toBe(200);
    noStore(res, '/svc__todo/all');
  });

  it('finding 10: error answers are no-store (401, 404, 403 csrf_failed)', async () => {
    const anonymous = await t.fetch('/auth/session');
    expect(anonymous.status).toBe(401);
    noStore(anonymous, '401');
    const missing = await admin.fetch('/auth/users/nobody');
    expect(missing.status).toBe(404);
    noStore(missing, '404');
    const csrf = await admin.fetch('/auth/logout', { method: 'POST', headers: { origin: 'http://evil.example.com' } });
    expect(csrf.status).toBe(403);
    noStore(csrf, '403');
  });

  it("finding 10: a handler's own Cache-Control is kept (the /docs script)", async () => {
    const res = await t.fetch('/docs/scalar.js');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  });

  it('finding 10: the real process (Node response path) sends no-store too, and keeps a handler\'s own header; nosniff and no-referrer once each (issue 19)', async () => {
    const svc = await startReadySvc({ env: { SVC_ADMIN_EMAIL: 'admin@example.com', SVC_ADMIN_PASSWORD: 'a long admin password' } });
    const login = await fetch(`${svc.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@example.com', password: 'a long admin password' }),
    });
    expect(login.status).toBe(200);
    noStore(login, 'POST /auth/login');
    securityHeaders(login, 'POST /auth/login');
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const session = await fetch(`${svc.url}/auth/session`, { headers: { cookie, 'x-request-id': 'trace-42' } });
    expect(session.status).toBe(200);
    noStore(session, 'GET /auth/session');
    securityHeaders(session, 'GET /auth/session');
    // Set before the handler on Node's response too: the request id, and the sliding session's cookie,
    // re-issued once with the time the session has left (security review, finding 8).
    expect(session.headers.get('x-request-id')).toBe('trace-42');
    const refreshed = session.headers.getSetCookie();
    expect(refreshed).toHaveLength(1);
    expect(refreshed[0]).toMatch(new RegExp(`^${cookie}; Max-Age=(86400|86399); Path=/; HttpOnly; Secure; SameSite=Strict$`));
    // A logout's clearing cookie replaces the refresh: one Set-Cookie, and it ends the session cookie.
    const logout = await fetch(`${svc.url}/auth/logout`, { method: 'POST', headers: { cookie } });
    expect(logout.status).toBe(204);
    expect(logout.headers.getSetCookie()).toEqual([expect.stringMatching(/^sid_app=; Max-Age=0; /)]);
    expect((await fetch(`${svc.url}/auth/session`, { headers: { cookie } })).status).toBe(401);
    const anonymous = await fetch(`${svc.url}/auth/session`);
    expect(anonymous.status).toBe(401);
    noStore(anonymous, '401');
    securityHeaders(anonymous, '401');
    const again = await fetch(`${svc.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@example.com', password: 'a long admin password' }),
    });
    const cookie2 = again.headers.getSetCookie()[0]!.split(';')[0]!;
    const todos = await fetch(`${svc.url}/svc__todo/all`, { headers: { cookie: cookie2 } });
    expect(todos.status).toBe(200);
    noStore(todos, '/svc__todo/all');
    securityHeaders(todos, '/svc__todo/all');
    // A handler that sets a cookie of its own keeps the session's refresh beside it: two Set-Cookie lines.
    const options = await fetch(`${svc.url}/auth/login/passkey/options`, { method: 'POST', headers: { cookie: cookie2, origin: svc.url } });
    expect(options.status).toBe(200);
    const lines = options.headers.getSetCookie();
    expect(lines).toHaveLength(2);
    expect(lines.filter((line) => line.startsWith(`${cookie2}; Max-Age=`))).toHaveLength(1);
    expect(lines.filter((line) => line.startsWith('svc_passkey='))).toHaveLength(1);
    await options.arrayBuffer();
    // A handler's own Cache-Control wins here too, and appears once.
    const script = await fetch(`${svc.url}/docs/scalar.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    // It sets nosniff itself: still once.
    securityHeaders(script, '/docs/scalar.js');
    await script.arrayBuffer();
  });
});
