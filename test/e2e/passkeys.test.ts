// Passkeys (CONTRACT section 11) through HTTP with a software authenticator (test/support/webauthn.ts):
// register while signed in, log in with no email and no password, and every way a response can be
// wrong: another challenge, origin or RP id, a replayed challenge, an unknown credential, a counter
// that goes back (a cloned authenticator). The real browser (Chromium's virtual authenticator) is in
// test/deploy/passkeys-browser.test.ts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { SoftAuthenticator, type CreationOptions, type RequestOptions } from '../support/webauthn.ts';

const SERVER = 'http://localhost:3000';
const FRONTEND = 'http://localhost:5173';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ env: { SVC_SERVER_BASE_URL: SERVER, SVC_FRONTEND_URLS: FRONTEND } });
});
afterAll(() => t?.close());

async function signedIn(): Promise<{ c: TestClient; id: string; email: string; password: string }> {
  const u = await t.createUser();
  const c = t.client();
  expect((await c.login(u.email, u.password)).status).toBe(200);
  return { c, ...u };
}

const post = (c: TestClient, path: string, json?: unknown) => c.fetch(path, json === undefined ? { method: 'POST' } : { method: 'POST', json });
const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;

async function register(c: TestClient, device: SoftAuthenticator, tamper: Parameters<SoftAuthenticator['create']>[1] = {}, name?: string) {
  const options = (await (await post(c, '/auth/passkeys/options')).json()) as CreationOptions;
  return post(c, '/auth/passkeys', { response: device.create(options, tamper), ...(name ? { name } : {}) });
}

async function passkeyLogin(device: SoftAuthenticator, tamper: Parameters<SoftAuthenticator['get']>[1] = {}, browser = t.client()) {
  const options = (await (await post(browser, '/auth/login/passkey/options')).json()) as RequestOptions;
  const res = await post(browser, '/auth/login/passkey', { response: device.get(options, tamper) });
  return { res, browser, options };
}

describe('register a passkey while signed in', () => {
  it('options -> create -> 201 {id,name,createdAt}; listed, renamed; the options ask for a discoverable credential of this RP', async () => {
    const { c } = await signedIn();
    const res = await post(c, '/auth/passkeys/options');
    expect(res.status).toBe(200);
    const options = (await res.json()) as CreationOptions & { authenticatorSelection: { residentKey: string }; attestation: string };
    expect(options.rp.id).toBe('localhost');
    expect(options.authenticatorSelection.residentKey).toBe('required');
    const device = new SoftAuthenticator(FRONTEND);
    const created = await post(c, '/auth/passkeys', { response: device.create(options), name: 'Laptop' });
    expect(created.status).toBe(201);
    const body = (await created.json()) as { id: string; name: string; createdAt: string };
    expect(Object.keys(body).sort()).toEqual(['createdAt', 'id', 'name']);
    expect(body.name).toBe('Laptop');
    const list = (await (await c.fetch('/auth/passkeys')).json()) as { items: { id: string; name: string; lastUsedAt: string | null }[] };
    expect(list.items).toEqual([{ id: body.id, name: 'Laptop', createdAt: body.createdAt, lastUsedAt: null }]);
    const renamed = await c.fetch(`/auth/passkeys/${body.id}`, { method: 'PATCH', json: { name: 'Work laptop' } });
    expect(renamed.status).toBe(200);
    expect(await renamed.json()).toMatchObject({ id: body.id, name: 'Work laptop' });
  });

  it('refused (400 invalid_passkey): another challenge, an origin not allowed, another RP id, no pending options, a replayed response', async () => {
    const { c } = await signedIn();
    for (const tamper of [{ challenge: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }, { origin: 'https://evil.example' }, { rpId: 'evil.example' }]) {
      const res = await register(c, new SoftAuthenticator(FRONTEND), tamper);
      expect(res.status, JSON.stringify(tamper)).toBe(400);
      expect((await errorCode(res)).code).toBe('invalid_passkey');
    }
    const device = new SoftAuthenticator(FRONTEND);
    const options = (await (await post(c, '/auth/passkeys/options')).json()) as CreationOptions;
    const response = device.create(options);
    expect((await post(c, '/auth/passkeys', { response })).status).toBe(201);
    const replay = await post(c, '/auth/passkeys', { response });
    expect(replay.status).toBe(400);
    expect((await errorCode(replay)).message).toMatch(/No registration is pending/);
  });

  it("the challenge is bound to the session: another session of the same user cannot use it", async () => {
    const a = await signedIn();
    const other = t.client();
    expect((await other.login(a.email, a.password)).status).toBe(200);
    const options = (await (await post(a.c, '/auth/passkeys/options')).json()) as CreationOptions;
    const res = await post(other, '/auth/passkeys', { response: new SoftAuthenticator(FRONTEND).create(options) });
    expect(res.status).toBe(400);
  });

  it('bad input: 401 anonymous; 400 for a malformed response, a long name, an unknown field; 404 for another user\'s id or one that is nobody\'s', async () => {
    const anon = t.client();
    for (const [method, path] of [['POST', '/auth/passkeys/options'], ['POST', '/auth/passkeys'], ['GET', '/auth/passkeys'], ['DELETE', '/auth/passkeys/00000000-0000-4000-8000-000000000000']] as const) {
      expect((await anon.fetch(path, { method })).status, path).toBe(401);
    }
    const { c } = await signedIn();
    for (const body of [{ response: { id: 'x' } }, { response: { id: '***', rawId: 'x', type: 'public-key', response: {} } }, { response: {}, extra: 1 }]) {
      const res = await post(c, '/auth/passkeys', body);
      expect(res.status).toBe(400);
      expect((await errorCode(res)).code).toBe('validation_failed');
    }
    const mine = (await (await register(c, new SoftAuthenticator(FRONTEND))).json()) as { id: string };
    expect((await c.fetch(`/auth/passkeys/${mine.id}`, { method: 'PATCH', json: { name: 'x'.repeat(65) } })).status).toBe(400);
    expect((await c.fetch('/auth/passkeys/not-a-uuid', { method: 'DELETE' })).status).toBe(404);
    expect((await c.fetch('/auth/passkeys/not-a-uuid', { method: 'PATCH', json: { name: 'x' } })).status).toBe(404);
    expect((await c.fetch(`/auth/passkeys/${'x'.repeat(129)}`, { method: 'DELETE' })).status).toBe(400);
    const stranger = await signedIn();
    expect((await stranger.c.fetch(`/auth/passkeys/${mine.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await stranger.c.fetch(`/auth/passkeys/${mine.id}`, { method: 'PATCH', json: { name: 'mine now' } })).status).toBe(404);
  });
});

describe('log in with a passkey', () => {
  it('no email, no password: the same body and cookie as a password login; lastUsedAt set; the challenge cookie is HttpOnly', async () => {
    const { c, id, email } = await signedIn();
    const device = new SoftAuthenticator(FRONTEND);
    expect((await register(c, device)).status).toBe(201);
    await t.instance.auth.users.users.updateOne({ _id: id }, { $set: { lastLoginAt: null } }); // forget the password login
    const browser = t.client();
    const optionsRes = await post(browser, '/auth/login/passkey/options');
    expect(optionsRes.status).toBe(200);
    expect(optionsRes.headers.getSetCookie().find((l) => l.startsWith('svc_passkey='))).toMatch(/HttpOnly/i);
    const options = (await optionsRes.json()) as RequestOptions & { allowCredentials?: unknown[] };
    expect(options.allowCredentials ?? []).toEqual([]);
    const res = await post(browser, '/auth/login/passkey', { response: device.get(options) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { user: { id: string; email: string }; expiresAt: string };
    expect(body.user).toMatchObject({ id, email });
    expect(typeof body.expiresAt).toBe('string');
    expect(res.headers.getSetCookie().some((l) => l.startsWith('sid_app=') && !l.startsWith('sid_app=;'))).toBe(true);
    const session = (await (await browser.fetch('/auth/session?expand=user')).json()) as { provider: string; user: { lastLoginAt: string | null } };
    expect(session.provider).toBe('passkey');
    expect(Date.parse(session.user.lastLoginAt!)).toBeGreaterThan(Date.now() - 60_000);
    const list = (await (await c.fetch('/auth/passkeys')).json()) as { items: { lastUsedAt: string | null }[] };
    expect(list.items[0]!.lastUsedAt).not.toBeNull();
  });

  it('refused (401 invalid_passkey): another challenge, origin or RP id; no options in this browser; a replayed challenge; an unknown passkey; a counter that went back', async () => {
    const { c } = await signedIn();
    const device = new SoftAuthenticator(FRONTEND);
    expect((await register(c, device)).status).toBe(201);
    const expectRefused = async (res: Response, why: RegExp) => {
      expect(res.status).toBe(401);
      const err = await errorCode(res);
      expect(err.code).toBe('invalid_passkey');
      expect(err.message).toMatch(why);
    };
    await expectRefused((await passkeyLogin(device, { challenge: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' })).res, /challenge/i);
    await expectRefused((await passkeyLogin(device, { origin: 'https://evil.example' })).res, /origin/i);
    await expectRefused((await passkeyLogin(device, { rpId: 'evil.example' })).res, /RP ID|rpID|rp id/i);
    // No options asked in this browser: no challenge cookie.
    await expectRefused(await post(t.client(), '/auth/login/passkey', { response: device.get({ challenge: 'AAAA', rpId: 'localhost' }) }), /no login is pending/);
    // The same browser replays a good response: its challenge was used up by the first.
    const ok = await passkeyLogin(device);
    expect(ok.res.status).toBe(200);
    const replayBrowser = ok.browser;
    await expectRefused(await post(replayBrowser, '/auth/login/passkey', { response: device.get(ok.options) }), /no login is pending/);
    // A passkey nobody registered.
    await expectRefused((await passkeyLogin(new SoftAuthenticator(FRONTEND))).res, /not registered/);
    // A cloned authenticator: its counter is behind the one svc saw last.
    const counter = device.counter;
    expect((await passkeyLogin(device)).res.status).toBe(200);
    await expectRefused((await passkeyLogin(device, { counter })).res, /counter/i);
  });

  it('a user with TOTP on logs in with the passkey alone (a passkey is both factors)', async () => {
    const { c, id, email, password } = await signedIn();
    const device = new SoftAuthenticator(FRONTEND);
    expect((await register(c, device)).status).toBe(201);
    // TOTP on (a confirmed secret): the password alone now asks for the code...
    await t.instance.auth.users.users.updateOne({ _id: id }, { $set: { totp: { secret: 'sealed-secret' } } });
    expect(await (await t.client().login(email, password)).json()).toEqual({ mfaRequired: true });
    // ...the passkey does not.
    const { res, browser } = await passkeyLogin(device);
    expect(res.status).toBe(200);
    expect(await res.json()).not.toHaveProperty('mfaRequired');
    expect((await browser.fetch('/auth/session')).status).toBe(200);
  });

  it('issue 39 finding 5: without user verification (a key touched without its PIN) a TOTP user gets the second step, never a session', async () => {
    const { c, id } = await signedIn();
    const device = new SoftAuthenticator(FRONTEND);
    expect((await register(c, device)).status).toBe(201);
    await t.instance.auth.users.users.updateOne({ _id: id }, { $set: { totp: { secret: 'sealed-secret' } } });
    const { res, browser } = await passkeyLogin(device, { userVerified: false });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ mfaRequired: true });
    expect(res.headers.getSetCookie().some((l) => l.startsWith('sid_app='))).toBe(false);
    expect(browser.cookies.has('svc_mfa')).toBe(true);
    expect((await browser.fetch('/auth/session')).status).toBe(401);
    // Without TOTP the passkey alone is one factor, as a password is: a session.
    await t.instance.auth.users.users.updateOne({ _id: id }, { $unset: { totp: '' } });
    const plain = await passkeyLogin(device, { userVerified: false });
    expect(plain.res.status).toBe(200);
    expect((await plain.browser.fetch('/auth/session')).status).toBe(200);
  });

  it('deleting the user removes their passkeys: the passkey no longer logs in', async () => {
    const { c, id } = await signedIn();
    const device = new SoftAuthenticator(FRONTEND);
    expect((await register(c, device)).status).toBe(201);
    await t.instance.auth.deleteUser(id);
    const { res } = await passkeyLogin(device);
    expect(res.status).toBe(401);
    expect((await errorCode(res)).message).toMatch(/not registered/);
  });

  it("the last way in: a user with no password and no linked account cannot delete their only passkey (409 last_login_method)", async () => {
    const { c, id } = await signedIn();
    const device = new SoftAuthenticator(FRONTEND);
    const mine = (await (await register(c, device)).json()) as { id: string };
    await t.instance.auth.users.users.updateOne({ _id: id }, { $unset: { passwordHash: '' } });
    const res = await c.fetch(`/auth/passkeys/${mine.id}`, { method: 'DELETE' });
    expect(res.status).toBe(409);
    expect((await errorCode(res)).code).toBe('last_login_method');
    await t.instance.auth.users.users.updateOne({ _id: id }, { $set: { passwordHash: 'x' } });
    expect((await c.fetch(`/auth/passkeys/${mine.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await (await c.fetch('/auth/passkeys')).json()) as unknown).toEqual({ items: [] });
  });
});

describe('relying party from configuration', () => {
  it('auth.passkeys.rpId set to another domain: a response for localhost is refused', async () => {
    const other = await createTestApp({ env: { SVC_SERVER_BASE_URL: SERVER, SVC_FRONTEND_URLS: FRONTEND }, config: { auth: { passkeys: { rpId: 'example.com' } } } });
    try {
      const u = await other.createUser();
      const c = other.client();
      await c.login(u.email, u.password);
      const options = (await (await post(c, '/auth/passkeys/options')).json()) as CreationOptions;
      expect(options.rp.id).toBe('example.com');
      const res = await post(c, '/auth/passkeys', { response: new SoftAuthenticator(FRONTEND).create(options, { rpId: 'localhost' }) });
      expect(res.status).toBe(400);
      expect((await errorCode(res)).message).toMatch(/RP ID|rpID/i);
    } finally {
      await other.close();
    }
  });
});
