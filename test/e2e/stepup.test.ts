// Step-up (CONTRACT 10, issue 39 finding 6): what adds a lasting way in needs a session that proved
// who it is within `auth.session.freshAge` (here 3 s): a stolen cookie alone cannot add a passkey,
// TOTP or an identity, nor turn TOTP off. `POST /auth/reauthenticate` makes the session fresh with
// the password, a TOTP code, or a passkey whose authenticator verified the user. On real Redis when
// there is one.

import { Secret, TOTP } from 'otpauth';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { sleep } from '../support/auth.ts';
import { SoftAuthenticator, type CreationOptions, type RequestOptions } from '../support/webauthn.ts';

const redisUrl = inject('redisUrl');
const FRESH_AGE = 3;
const FRONTEND = 'http://localhost:5173';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({
    redisUrl: redisUrl || undefined,
    config: { auth: { session: { freshAge: FRESH_AGE } } },
    env: { SVC_SERVER_BASE_URL: 'http://localhost:3000', SVC_FRONTEND_URLS: FRONTEND, SVC_SECRET_ENCRYPTION_KEY: 'stepup-test-key' },
  });
});
afterAll(() => t?.close());

const post = (c: TestClient, path: string, json?: unknown) => c.fetch(path, json === undefined ? { method: 'POST' } : { method: 'POST', json });
const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

/** A signed-in user whose session is no longer fresh. */
async function staleSession(): Promise<{ c: TestClient; id: string; email: string; password: string }> {
  const u = await t.createUser();
  const c = t.client();
  expect((await c.login(u.email, u.password)).status).toBe(200);
  return { c, ...u };
}

/** A user with TOTP on (enrolled while fresh); returns the code generator. */
async function withTotp(c: TestClient) {
  const { otpauthUri } = (await (await post(c, '/auth/totp/enroll')).json()) as { otpauthUri: string };
  const totp = new TOTP({ secret: Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!) });
  expect((await post(c, '/auth/totp/confirm', { code: totp.generate() })).status).toBe(200);
  return totp;
}

describe('step-up: auth.session.freshAge', () => {
  let stale: Awaited<ReturnType<typeof staleSession>>;
  let totpUser: Awaited<ReturnType<typeof staleSession>> & { totp: TOTP };
  let passkeyUser: Awaited<ReturnType<typeof staleSession>> & { device: SoftAuthenticator };

  beforeAll(async () => {
    stale = await staleSession();
    const tu = await staleSession();
    totpUser = { ...tu, totp: await withTotp(tu.c) };
    const pu = await staleSession();
    const device = new SoftAuthenticator(FRONTEND);
    const options = (await (await post(pu.c, '/auth/passkeys/options')).json()) as CreationOptions;
    expect((await post(pu.c, '/auth/passkeys', { response: device.create(options) })).status).toBe(201);
    passkeyUser = { ...pu, device };
    // Every session above is now older than freshAge.
    await sleep(FRESH_AGE * 1000 + 300);
  });

  it('a session older than freshAge: 403 reauthentication_required on every route that adds or removes a way in', async () => {
    const calls: [string, string, unknown?][] = [
      ['POST', '/auth/passkeys/options'],
      ['POST', '/auth/passkeys', { response: new SoftAuthenticator(FRONTEND).create({ challenge: 'AAAA', rp: { id: 'localhost', name: 'svc' }, user: { id: 'x', name: 'x' } }) }],
      ['POST', '/auth/totp/enroll'],
      ['POST', '/auth/oauth/acme/link'],
      ['POST', '/auth/link/confirm'],
      ['DELETE', '/auth/totp', { password: stale.password }],
      ['POST', '/auth/totp/confirm', { code: '123456' }],
      ['DELETE', '/auth/passkeys/any-passkey-id'],
      ['DELETE', '/auth/account/providers/acme/12345'],
    ];
    for (const [method, path, json] of calls) {
      const res = await stale.c.fetch(path, { method, ...(json === undefined ? {} : { json }) });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(await errorCode(res), `${method} ${path}`).toBe('reauthentication_required');
    }
    // Reading and the rest of the account stay open.
    expect((await stale.c.fetch('/auth/passkeys')).status).toBe(200);
    expect((await stale.c.fetch('/auth/session')).status).toBe(200);
  });

  it('the password makes the session fresh again (204); a wrong one is 401 and counts like a failed login', async () => {
    const { c, password } = await staleSession();
    await sleep(FRESH_AGE * 1000 + 300);
    const wrong = await post(c, '/auth/reauthenticate', { password: 'not the password' });
    expect(wrong.status).toBe(401);
    expect(await errorCode(wrong)).toBe('invalid_credentials');
    expect((await post(c, '/auth/totp/enroll')).status).toBe(403);
    expect((await post(c, '/auth/reauthenticate', { password })).status).toBe(204);
    expect((await post(c, '/auth/totp/enroll')).status).toBe(200);
    // Five failures per email and address lock the password check, as for logins.
    for (let i = 0; i < 5; i++) await post(c, '/auth/reauthenticate', { password: `wrong ${i}` });
    const locked = await post(c, '/auth/reauthenticate', { password });
    expect(locked.status).toBe(429);
    expect(locked.headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it('a TOTP code makes the session fresh (and then TOTP may be turned off); a wrong code is 401 invalid_code', async () => {
    const { c, totp } = totpUser;
    expect((await c.fetch('/auth/totp', { method: 'DELETE', json: { code: totp.generate() } })).status).toBe(403);
    const wrong = await post(c, '/auth/reauthenticate', { code: '000000' === totp.generate() ? '111111' : '000000' });
    expect(wrong.status).toBe(401);
    expect(await errorCode(wrong)).toBe('invalid_code');
    // The next step's code: the current one was used by the confirmation (a code works once).
    expect((await post(c, '/auth/reauthenticate', { code: totp.generate({ timestamp: Date.now() + 30_000 }) })).status).toBe(204);
    expect((await c.fetch('/auth/totp', { method: 'DELETE', json: { password: totpUser.password } })).status).toBe(204);
  });

  it('a passkey with user verification makes the session fresh; without it, or another user\'s passkey: 401 invalid_passkey', async () => {
    const { c, device } = passkeyUser;
    const assert = async (tamper: { userVerified?: boolean }, authenticator = device) => {
      const options = (await (await post(c, '/auth/login/passkey/options')).json()) as RequestOptions;
      return post(c, '/auth/reauthenticate', { response: authenticator.get(options, tamper) });
    };
    const noUv = await assert({ userVerified: false });
    expect(noUv.status).toBe(401);
    expect(await errorCode(noUv)).toBe('invalid_passkey');
    // Someone else's passkey (registered while that session was fresh) proves nothing about this user.
    const other = await staleSession();
    const foreign = new SoftAuthenticator(FRONTEND);
    await post(other.c, '/auth/reauthenticate', { password: other.password });
    const options = (await (await post(other.c, '/auth/passkeys/options')).json()) as CreationOptions;
    expect((await post(other.c, '/auth/passkeys', { response: foreign.create(options) })).status).toBe(201);
    const notMine = await assert({}, foreign);
    expect(notMine.status).toBe(401);
    expect(await errorCode(notMine)).toBe('invalid_passkey');
    expect((await post(c, '/auth/passkeys/options')).status).toBe(403);
    expect((await assert({})).status).toBe(204);
    expect((await post(c, '/auth/passkeys/options')).status).toBe(200);
  });

  it('a passkey login without user verification is no proof for step-up (as at /auth/reauthenticate); with UV it is', async () => {
    const { email, device } = passkeyUser;
    const loginWith = async (tamper: { userVerified?: boolean }) => {
      const c = t.client();
      const options = (await (await post(c, '/auth/login/passkey/options')).json()) as RequestOptions;
      const res = await post(c, '/auth/login/passkey', { response: device.get(options, tamper) });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ user: { email } });
      return c;
    };
    const noUv = await loginWith({ userVerified: false });
    const refused = await post(noUv, '/auth/passkeys/options');
    expect(refused.status).toBe(403);
    expect(await errorCode(refused)).toBe('reauthentication_required');
    expect((await noUv.fetch('/auth/passkeys')).status).toBe(200);
    expect((await post(await loginWith({}), '/auth/passkeys/options')).status).toBe(200);
  });

  it('an admin granting admin, setting a password, deleting a user or adding or changing a webhook needs a fresh session; reading and renaming do not', async () => {
    const admin = await t.createUser({ admin: true });
    const c = t.client();
    expect((await c.login(admin.email, admin.password)).status).toBe(200);
    const target = await t.createUser();
    await sleep(FRESH_AGE * 1000 + 300);
    const stepUps: [string, string, unknown?][] = [
      ['POST', '/auth/users', { email: `new-admin-${Date.now()}@example.com`, password: 'a long password', isAdmin: true }],
      ['PATCH', `/auth/users/${target.id}`, { isAdmin: true }],
      ['PATCH', `/auth/users/${target.id}`, { password: 'a password the admin knows' }],
      ['PATCH', `/auth/users/${admin.id}`, { password: 'my own new password' }],
      ['DELETE', `/auth/users/${target.id}`],
      // A webhook endpoint receives every event it names, and its secret comes in the answer.
      ['POST', '/auth/webhooks', { url: 'https://hooks.example.com/svc', events: ['login.*'] }],
      ['PATCH', '/auth/webhooks/any-id', { url: 'https://elsewhere.example.com/svc' }],
    ];
    for (const [method, path, json] of stepUps) {
      const res = await c.fetch(path, { method, ...(json === undefined ? {} : { json }) });
      expect(res.status, `${method} ${path} ${JSON.stringify(json)}`).toBe(403);
      expect(await errorCode(res)).toBe('reauthentication_required');
    }
    const target2 = await t.instance.auth.users.get(target.id);
    expect(target2.tags).toEqual([]);
    expect((await t.client().login(target.email, target.password)).status).toBe(200);
    // What grants nothing stays open to the stale session.
    expect((await c.fetch(`/auth/users/${target.id}`)).status).toBe(200);
    expect((await c.fetch(`/auth/users/${target.id}`, { method: 'PATCH', json: { firstname: 'Renamed', isAdmin: false } })).status).toBe(200);
    expect((await c.fetch('/auth/users', { method: 'POST', json: { email: `plain-${Date.now()}@example.com`, password: 'a long password', isAdmin: false } })).status).toBe(201);
    // Once fresh, all of it works.
    expect((await post(c, '/auth/reauthenticate', { password: admin.password })).status).toBe(204);
    expect((await c.fetch(`/auth/users/${target.id}`, { method: 'PATCH', json: { isAdmin: true } })).status).toBe(200);
    expect((await c.fetch(`/auth/users/${target.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await c.fetch('/auth/webhooks', { method: 'POST', json: { url: 'https://hooks.example.com/svc', events: ['login.*'] } })).status).toBe(201);
  });

  it('bad input: 400 for no proof, two proofs, an unknown field or a malformed code; 401 without a session', async () => {
    for (const body of [{}, { password: 'x', code: '123456' }, { pin: '1234' }, { code: '12345' }, { password: '' }]) {
      const res = await post(stale.c, '/auth/reauthenticate', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await errorCode(res)).toBe('validation_failed');
    }
    // The message says what a body may be, not valibot's "Expected Object but received Object".
    const empty = (await (await post(stale.c, '/auth/reauthenticate', {})).json()) as { error: { message: string } };
    expect(empty.error.message).toBe('must be one of {"password"}, {"code"} or {"response"}');
    const anon = await post(t.client(), '/auth/reauthenticate', { password: 'whatever password' });
    expect(anon.status).toBe(401);
  });
});
