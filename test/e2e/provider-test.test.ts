// POST /auth/providers/:id/test (issue 57, docs/providers.md): svc's server requests the provider once and
// says how it went, 200 {ok, checked, status?, message?} whatever the provider answered. Against a local
// provider whose answers the test picks: a valid discovery document, a wrong issuer, not JSON, too large,
// a redirect (not followed: the "internal" host never hears from svc), an issuer that stopped answering,
// one that never answers (the timeout); an OAuth authorization endpoint that redirects (ok) or refuses (an HTTP error, or a redirect back with `error`).

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECK_TIMEOUT_MS, MAX_CHECK_BYTES } from '../../src/auth/oauth/provider-check.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';

type Mode = 'valid' | 'wrong-issuer' | 'not-json' | 'too-large' | 'redirect' | 'not-found' | 'hang';
let mode: Mode = 'valid';
let authorize: 302 | 400 | 'refused' = 302;
const internalHits: string[] = [];

function listen(handler: http.RequestListener): Promise<{ server: http.Server; origin: string }> {
  const server = http.createServer(handler);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}
const close = (server: http.Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

let t: TestApp;
let admin: TestClient;
let idp: { server: http.Server; origin: string };
let gone: { server: http.Server; origin: string };
let internal: { server: http.Server; origin: string };

const test = (id: string) => admin.fetch(`/auth/providers/${id}/test`, { method: 'POST' });
const check = async (id: string) => {
  const res = await test(id);
  expect(res.status).toBe(200);
  return (await res.json()) as { ok: boolean; checked: string; status?: number; message?: string };
};

beforeAll(async () => {
  internal = await listen((req, res) => {
    internalHits.push(req.url ?? '');
    res.end('{}');
  });
  const discovery = (origin: string) => ({ issuer: origin, authorization_endpoint: `${origin}/authorize`, token_endpoint: `${origin}/token`, jwks_uri: `${origin}/jwks` });
  idp = await listen((req, res) => {
    if (req.url?.startsWith('/authorize?')) {
      // RFC 6749 4.1.2.1: a refusal with a valid redirect URI goes back to it with `error`.
      const back = `${new URL(req.url, idp.origin).searchParams.get('redirect_uri')}?error=unauthorized_client&state=x`;
      if (authorize === 'refused') return res.writeHead(302, { location: back }).end();
      return res.writeHead(authorize, authorize === 302 ? { location: `${idp.origin}/login` } : {}).end();
    }
    if (req.url !== '/.well-known/openid-configuration') return res.writeHead(404).end();
    if (mode === 'hang') return; // never answers
    if (mode === 'not-found') return res.writeHead(404).end('no');
    if (mode === 'redirect') return res.writeHead(302, { location: `${internal.origin}/.well-known/openid-configuration` }).end();
    if (mode === 'not-json') return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>');
    if (mode === 'too-large') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...discovery(idp.origin), padding: 'x'.repeat(MAX_CHECK_BYTES) }));
    const doc = discovery(idp.origin);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(mode === 'wrong-issuer' ? { ...doc, issuer: `${idp.origin}/` } : doc));
  });
  gone = await listen((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(discovery(gone.origin))));
  t = await createTestApp();
  const user = await t.createUser({ admin: true });
  admin = t.client();
  expect((await admin.login(user.email, user.password)).status).toBe(200);
  for (const body of [
    { providerId: 'corp', type: 'oidc', config: { issuer: idp.origin } },
    { providerId: 'gone', type: 'oidc', config: { issuer: gone.origin } },
    { providerId: 'acme', type: 'custom', config: { authorizationEndpoint: `${idp.origin}/authorize`, tokenEndpoint: `${idp.origin}/token`, userInfoEndpoint: `${idp.origin}/userinfo` } },
  ]) {
    const res = await admin.fetch('/auth/providers', { method: 'POST', json: { clientId: 'svc-client', clientSecret: 'a client secret', ...body } });
    expect(res.status, await res.clone().text()).toBe(201);
  }
  // The issuer stops answering after the provider was saved.
  await close(gone.server);
});
afterAll(async () => {
  await t?.close();
  await Promise.all([close(idp.server), close(internal.server)]);
});

describe('POST /auth/providers/:id/test', () => {
  it('only for admins; an unknown provider is 404', async () => {
    expect((await t.fetch('/auth/providers/corp/test', { method: 'POST' })).status).toBe(401);
    const plain = await t.createUser();
    const user = t.client();
    await user.login(plain.email, plain.password);
    expect((await user.fetch('/auth/providers/corp/test', { method: 'POST' })).status).toBe(403);
    const unknown = await test('no-such');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: 'not_found' } });
    expect((await test('x'.repeat(201))).status).toBe(400);
  });

  it('OpenID: a valid discovery document passes and names what was requested', async () => {
    mode = 'valid';
    expect(await check('corp')).toEqual({ ok: true, checked: `${idp.origin}/.well-known/openid-configuration`, status: 200, message: 'the discovery document is valid' });
  });

  it('OpenID: a wrong issuer, not JSON, too large, not found: each said, with the status', async () => {
    mode = 'wrong-issuer';
    expect(await check('corp')).toMatchObject({ ok: false, status: 200, message: expect.stringContaining('is not exactly') });
    mode = 'not-json';
    expect(await check('corp')).toMatchObject({ ok: false, status: 200, message: 'the answer is not JSON' });
    mode = 'too-large';
    expect(await check('corp')).toMatchObject({ ok: false, status: 200, message: expect.stringContaining('larger than') });
    mode = 'not-found';
    expect(await check('corp')).toMatchObject({ ok: false, status: 404, message: expect.stringContaining('HTTP 404') });
  });

  it('OpenID: a redirect is reported, never followed', async () => {
    mode = 'redirect';
    const result = await check('corp');
    expect(result).toMatchObject({ ok: false, status: 302, message: expect.stringContaining(`redirecting to ${internal.origin}`) });
    expect(internalHits).toEqual([]);
  });

  it('OpenID: an issuer that stopped answering is said to be unreachable', async () => {
    expect(await check('gone')).toMatchObject({ ok: false, checked: `${gone.origin}/.well-known/openid-configuration`, message: expect.stringMatching(/cannot be reached \(ECONNREFUSED\)/) });
  });

  it(`OpenID: an issuer that never answers fails after ${CHECK_TIMEOUT_MS / 1000} s`, async () => {
    mode = 'hang';
    const started = Date.now();
    expect(await check('corp')).toMatchObject({ ok: false, message: expect.stringContaining(`no answer within ${CHECK_TIMEOUT_MS / 1000} s`) });
    expect(Date.now() - started).toBeLessThan(CHECK_TIMEOUT_MS + 3_000);
    mode = 'valid';
  }, 20_000);

  it('OAuth: the authorization URL a login would use; a redirect to the sign-in page passes, a refusal does not', async () => {
    authorize = 302;
    const passed = await check('acme');
    expect(passed).toMatchObject({ ok: true, status: 302 });
    const url = new URL(passed.checked);
    expect(`${url.origin}${url.pathname}`).toBe(`${idp.origin}/authorize`);
    expect(url.searchParams.get('client_id')).toBe('svc-client');
    expect(passed.checked).not.toContain('a client secret');
    authorize = 400;
    expect(await check('acme')).toMatchObject({ ok: false, status: 400, message: expect.stringContaining('HTTP 400') });
    authorize = 'refused';
    expect(await check('acme')).toMatchObject({ ok: false, status: 302, message: expect.stringContaining('sent the browser back to svc with error=unauthorized_client') });
  });
});
