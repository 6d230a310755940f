// A user's access as an admin sees and ends it (issue 57, CONTRACT 16; the console's user page):
// GET /auth/users/:id/sessions, DELETE /auth/users/:id/sessions/:sessionId, DELETE /auth/users/:id/sessions
// and GET /auth/users/:id/ways-in. Admin only (an `auth:admin` key too), every refusal with its code,
// no secret in any answer (session id, store hash, password hash, passkey public key, TOTP secret).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSKEY_COLLECTION } from '../../src/auth/passkeys.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { ResponseLog, sha256hex } from '../support/auth.ts';

let t: TestApp;
let admin: TestClient;
let plain: TestClient;
const log = new ResponseLog();
const COOKIE = 'sid_app';

async function loggedIn(user: { email: string; password: string }): Promise<TestClient> {
  const c = log.wrap(t.client(), COOKIE);
  expect((await c.login(user.email, user.password)).status).toBe(200);
  return c;
}

const errorCode = async (res: Response) => ((await res.json()) as { error?: { code: string } }).error?.code;
const del = (c: TestClient, path: string) => c.fetch(path, { method: 'DELETE' });
const sessionsOf = async (userId: string) => ((await (await admin.fetch(`/auth/users/${userId}/sessions`)).json()) as { items: { id: string; createdAt: string }[] }).items;
const revokedOf = async (userId: string) => (await t.instance.auth.audit.query({ userId, type: 'session.revoked', limit: 50 })).items;

beforeAll(async () => {
  t = await createTestApp();
  admin = await loggedIn(await t.createUser({ admin: true }));
  plain = await loggedIn(await t.createUser());
});
afterAll(() => t?.close());

describe("GET/DELETE /auth/users/:id/sessions (admin)", () => {
  it("lists a user's sessions newest first, with the ids GET /auth/sessions gives the user; no cookie value, no store hash", async () => {
    const user = await t.createUser();
    const first = await loggedIn(user);
    await new Promise((r) => setTimeout(r, 5));
    const second = await loggedIn(user);
    const res = await admin.fetch(`/auth/users/${user.id}/sessions`);
    expect(res.status).toBe(200);
    const text = await res.text();
    const { items } = JSON.parse(text) as { items: Record<string, unknown>[] };
    expect(items).toHaveLength(2);
    for (const s of items) expect(Object.keys(s).sort()).toEqual(['createdAt', 'device', 'id', 'ip', 'lastSeenAt']);
    const own = ((await (await second.fetch('/auth/sessions')).json()) as { items: { id: string; current: boolean }[] }).items;
    expect(items.map((s) => s.id)).toEqual(own.map((s) => s.id));
    expect(own[0]!.current).toBe(true); // newest first: the second login
    for (const c of [first, second]) {
      const id = c.cookies.get(COOKIE)!;
      expect(text).not.toContain(id);
      expect(text).not.toContain(sha256hex(id));
    }
  });

  it('ends one session (204; the user is logged out there only), audited session.revoked by the admin; again -> 404 not_found', async () => {
    const user = await t.createUser();
    const older = await loggedIn(user);
    const newer = await loggedIn(user);
    const [, olderId] = (await sessionsOf(user.id)).map((s) => s.id);
    expect((await del(admin, `/auth/users/${user.id}/sessions/${olderId}`)).status).toBe(204);
    expect((await older.fetch('/auth/session')).status).toBe(401);
    expect((await newer.fetch('/auth/session')).status).toBe(200);
    expect(await revokedOf(user.id)).toEqual([expect.objectContaining({ sessionId: olderId, actor: expect.objectContaining({ type: 'admin' }), details: { reason: 'admin' } })]);
    const again = await del(admin, `/auth/users/${user.id}/sessions/${olderId}`);
    expect(again.status).toBe(404);
    expect(await errorCode(again)).toBe('not_found');
    // Another user's session id is not this user's: 404, and it lives on.
    const [plainId] = (await sessionsOf((await (await plain.fetch('/auth/session')).json()).userId)).map((s) => s.id);
    expect((await del(admin, `/auth/users/${user.id}/sessions/${plainId}`)).status).toBe(404);
    expect((await plain.fetch('/auth/session')).status).toBe(200);
  });

  it('ends every session (204), one session.revoked each; the epoch moves (a pending second step dies)', async () => {
    const user = await t.createUser();
    const a = await loggedIn(user);
    const b = await loggedIn(user);
    const ids = (await sessionsOf(user.id)).map((s) => s.id);
    const epoch = (await t.instance.auth.users.get(user.id)).epoch ?? 0;
    expect((await del(admin, `/auth/users/${user.id}/sessions`)).status).toBe(204);
    for (const c of [a, b]) expect((await c.fetch('/auth/session')).status).toBe(401);
    expect(await sessionsOf(user.id)).toEqual([]);
    expect((await revokedOf(user.id)).map((r) => r.sessionId).sort()).toEqual([...ids].sort());
    for (const r of await revokedOf(user.id)) expect(r.details).toEqual({ reason: 'admin' });
    expect((await t.instance.auth.users.get(user.id)).epoch ?? 0).toBe(epoch + 1);
    // Nothing left: still 204; the admin's own session is untouched.
    expect((await del(admin, `/auth/users/${user.id}/sessions`)).status).toBe(204);
    expect((await admin.fetch('/auth/session')).status).toBe(200);
  });
});

describe("an admin's own sessions through the admin routes", () => {
  it('ending the current one works like a logout (cookie cleared); ending all ends the caller too', async () => {
    const me = await t.createUser({ admin: true });
    const c = await loggedIn(me);
    const [current] = (await sessionsOf(me.id)).map((s) => s.id);
    const res = await del(c, `/auth/users/${me.id}/sessions/${current}`);
    expect(res.status).toBe(204);
    expect(res.headers.get('set-cookie')).toMatch(/sid_app=;.*Max-Age=0/i);
    expect((await c.fetch('/auth/session')).status).toBe(401);
    const again = await loggedIn(me);
    expect((await del(again, `/auth/users/${me.id}/sessions`)).headers.get('set-cookie')).toMatch(/Max-Age=0/i);
    expect((await again.fetch('/auth/session')).status).toBe(401);
  });
});

describe('GET /auth/users/:id/ways-in (admin)', () => {
  it('password and TOTP as booleans, passkeys and connected accounts without secrets', async () => {
    const user = await t.createUser();
    let res = await admin.fetch(`/auth/users/${user.id}/ways-in`);
    expect(res.status).toBe(200);
    expect(await res.json()).toStrictEqual({ password: true, totp: false, passkeys: [], providers: [] });

    const oauthOnly = await t.instance.auth.users.create({ email: 'oauth-only@example.com', createdVia: 'oauth' });
    await t.instance.auth.accounts.link(oauthOnly._id, 'github', '4242', 'oauth-only@example.com');
    await t.instance.auth.users.users.updateOne({ _id: oauthOnly._id }, { $set: { totp: { secret: 'JBSWY3DPEHPK3PXPSECRET' } } });
    const passkeys = await t.instance.db.collection<{ _id: string } & Record<string, unknown>>(PASSKEY_COLLECTION);
    const createdAt = new Date().toISOString();
    await passkeys.insertOne({ _id: 'pk-1', userId: oauthOnly._id, credentialId: 'Y3JlZC1pZA', publicKey: 'cHVibGljLWtleS1ieXRlcw', counter: 0, transports: [], deviceType: 'singleDevice', backedUp: false, name: 'Laptop', createdAt, lastUsedAt: null });
    res = await admin.fetch(`/auth/users/${oauthOnly._id}/ways-in`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(JSON.parse(text)).toStrictEqual({
      password: false,
      totp: true,
      passkeys: [{ id: 'pk-1', name: 'Laptop', createdAt, lastUsedAt: null }],
      providers: [{ provider: 'github', providerAccountId: '4242', email: 'oauth-only@example.com', linkedAt: expect.any(String) }],
    });
    for (const secret of ['JBSWY3DP', 'cHVibGljLWtleS1ieXRlcw', 'Y3JlZC1pZA', 'argon2', 'passwordHash']) expect(text).not.toContain(secret);
  });
});

describe('refusals', () => {
  const routes = (id: string, sessionId = 'x'.repeat(22)) =>
    [
      ['GET', `/auth/users/${id}/sessions`],
      ['DELETE', `/auth/users/${id}/sessions/${sessionId}`],
      ['DELETE', `/auth/users/${id}/sessions`],
      ['GET', `/auth/users/${id}/ways-in`],
    ] as const;

  it('an unknown user -> 404 not_found on each route', async () => {
    for (const [method, path] of routes('no-such-user')) {
      const res = await admin.fetch(path, { method });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await errorCode(res)).toBe('not_found');
    }
  });

  it('an id or session id longer than 128 characters -> 400 validation_failed naming it', async () => {
    const user = await t.createUser();
    for (const [method, path] of [...routes('u'.repeat(129)), ['DELETE', `/auth/users/${user.id}/sessions/${'s'.repeat(129)}`] as const]) {
      const res = await admin.fetch(path, { method });
      expect(res.status, `${method} ${path}`).toBe(400);
      const body = (await res.json()) as { error: { code: string; details: { path: string }[] } };
      expect(body.error.code).toBe('validation_failed');
      expect(['id', 'sessionId']).toContain(body.error.details[0]!.path);
    }
  });

  it('a non-admin -> 403 forbidden, no session -> 401 unauthenticated; nothing ends', async () => {
    const user = await t.createUser();
    const c = await loggedIn(user);
    const [sessionId] = (await sessionsOf(user.id)).map((s) => s.id);
    for (const [method, path] of routes(user.id, sessionId)) {
      const refused = await plain.fetch(path, { method });
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(await errorCode(refused)).toBe('forbidden');
      const anonymous = await t.fetch(path, { method });
      expect(anonymous.status, `${method} ${path}`).toBe(401);
      expect(await errorCode(anonymous)).toBe('unauthenticated');
    }
    expect((await c.fetch('/auth/session')).status).toBe(200);
  });

  it('an admin API key works with auth:admin only (else 403 insufficient_scope)', async () => {
    const user = await t.createUser();
    const make = async (scopes: string[]) => {
      const res = await admin.fetch('/auth/api-keys', { method: 'POST', json: { name: `k${scopes.length}`, scopes } });
      expect(res.status, await res.clone().text()).toBe(201);
      return ((await res.json()) as { key: string }).key;
    };
    const withKey = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });
    const adminKey = await make(['auth:admin']);
    const otherKey = await make(['svc__todo:read']);
    expect((await t.fetch(`/auth/users/${user.id}/ways-in`, withKey(adminKey))).status).toBe(200);
    expect((await t.fetch(`/auth/users/${user.id}/sessions`, { method: 'DELETE', ...withKey(adminKey) })).status).toBe(204);
    const refused = await t.fetch(`/auth/users/${user.id}/sessions`, withKey(otherKey));
    expect(refused.status).toBe(403);
    expect(await errorCode(refused)).toBe('insufficient_scope');
  });

  it('the four routes are in /openapi.json; no answer held a session id or a password hash', async () => {
    const paths = ((await (await t.fetch('/openapi.json')).json()) as { paths: Record<string, Record<string, unknown>> }).paths;
    expect(Object.keys(paths['/auth/users/{id}/sessions'] ?? {}).sort()).toEqual(['delete', 'get']);
    expect(Object.keys(paths['/auth/users/{id}/sessions/{sessionId}'] ?? {})).toEqual(['delete']);
    expect(Object.keys(paths['/auth/users/{id}/ways-in'] ?? {})).toEqual(['get']);
    expect(log.leaks()).toEqual([]);
  });
});
