// Issue 19 part 2: every answer carries the headers that suit an API: `X-Content-Type-Options: nosniff`
// (JSON is never sniffed into a script or a page) and `Referrer-Policy: no-referrer` (redirects to an
// identity provider and the /docs page tell no one where the browser came from), next to
// `Cache-Control: no-store` (cache-control.test.ts) and /docs' CSP (docs.test.ts). Checked in-process
// here; through the real socket in cache-control.test.ts (with no-store); through nginx in test/deploy/.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';

const apiHeaders = (res: Response, what: string) => {
  expect(res.headers.get('x-content-type-options'), what).toBe('nosniff');
  expect(res.headers.get('referrer-policy'), what).toBe('no-referrer');
};

describe('security headers', () => {
  let t: TestApp;
  let admin: TestClient;
  beforeAll(async () => {
    t = await createTestApp();
    const user = await t.createUser({ admin: true });
    admin = t.client();
    expect((await admin.login(user.email, user.password)).status).toBe(200);
  });
  afterAll(() => t?.close());

  it('authenticated JSON, errors and redirects carry nosniff and no-referrer (in-process)', async () => {
    const session = await admin.fetch('/api/auth/session');
    expect(session.status).toBe(200);
    apiHeaders(session, 'GET /api/auth/session');
    expect(session.headers.get('cache-control')).toBe('no-store');
    const users = await admin.fetch('/auth/users');
    expect(users.status).toBe(200);
    apiHeaders(users, 'GET /auth/users');
    const anonymous = await t.fetch('/auth/session');
    expect(anonymous.status).toBe(401);
    apiHeaders(anonymous, '401');
    const missing = await t.fetch('/no/such/route');
    expect(missing.status).toBe(404);
    apiHeaders(missing, '404');
    const redirect = await t.fetch('/auth/oauth/nobody/callback?code=x&state=y');
    expect(redirect.status).toBe(302);
    apiHeaders(redirect, 'OAuth callback redirect');
  });

  it('/docs keeps its CSP and adds no-referrer; the script keeps its own Cache-Control', async () => {
    const page = await t.fetch('/docs');
    expect(page.status).toBe(200);
    apiHeaders(page, '/docs');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const script = await t.fetch('/docs/scalar.js');
    expect(script.status).toBe(200);
    apiHeaders(script, '/docs/scalar.js');
    expect(script.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  });
});
