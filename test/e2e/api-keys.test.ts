// API keys (CONTRACT 15, issue 55 steps 1-2): made with step-up, shown once, stored as SHA-256 only,
// scoped, expiring, listed without the key, revoked by the credentials epoch, resolved by the session
// hook into the same `authUser`, refused by routes that take no key, limited per key across instances.
// Two instances share one Redis for revocation and the rate limit.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { INVALID_PER_IP } from '../../src/auth/api-keys.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { UnavailableError } from '../../src/http/errors.ts';
import { createTestApp, type TestApp, type TestAppOptions, type TestClient } from '../support/app.ts';
import { dumpStore, sha256hex, sleep } from '../support/auth.ts';
import { startSmtp, type TestSmtp } from '../support/smtp.ts';

const redisUrl = inject('redisUrl') || undefined;
const KEY_RE = /^svc_[A-Za-z0-9_-]{43}$/;

const apps: TestApp[] = [];
async function app(opts: TestAppOptions = {}): Promise<TestApp> {
  const a = await createTestApp({ redisUrl, ...opts });
  apps.push(a);
  return a;
}
let smtp: TestSmtp;
beforeAll(async () => {
  smtp = await startSmtp();
});
afterAll(async () => {
  for (const a of apps) await a.close();
  await smtp?.close();
});

interface Made {
  id: string;
  name: string;
  key: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
}

async function loggedIn(a: TestApp, opts: { admin?: boolean } = {}): Promise<{ client: TestClient; user: { id: string; email: string; password: string } }> {
  const user = await a.createUser(opts);
  const client = a.client();
  expect((await client.login(user.email, user.password)).status).toBe(200);
  return { client, user };
}

async function makeKey(client: TestClient, body: Record<string, unknown> = {}): Promise<Made> {
  const res = await client.fetch('/auth/api-keys', { method: 'POST', json: { name: 'ci', scopes: ['svc__todo:read'], ...body } });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as Made;
}

/** The per-key limit counts in minutes of the clock: a burst that must land in one waits for the next minute when this one ends in 3 s. */
async function clearOfMinuteEnd(): Promise<void> {
  // A burst of INVALID_PER_IP requests takes about a second, three on a busy machine: five times that.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 15_000) await sleep(left + 50);
}

const STORE_METHODS = ['get', 'getEx', 'set', 'getDel', 'del', 'expire', 'ttl', 'incr', 'incrWindow', 'getAndIncrWindow', 'decr', 'sAdd', 'sRem', 'sMembers', 'publish'] as const;

/** The names of the store methods `a`'s session store is asked for from now on, in order. */
function countStoreCalls(a: TestApp): string[] {
  const calls: string[] = [];
  const store = a.instance.stores.forRole('sessions') as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of STORE_METHODS) {
    const original = store[name]!.bind(store);
    store[name] = (...args: unknown[]) => {
      calls.push(name);
      return original(...args);
    };
  }
  return calls;
}

const withKey = (key: string, headers: Record<string, string> = {}) => ({ headers: { authorization: `Bearer ${key}`, ...headers } });
const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

describe('POST/GET/DELETE /auth/api-keys', () => {
  it('makes a key shown once: svc_ + 32 bytes, its prefix, scopes, times; only its SHA-256 is kept', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client, { name: 'laptop script', scopes: ['svc__todo:read', 'svc__todo:write'] });
    expect(Object.keys(made).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'key', 'name', 'prefix', 'scopes']);
    expect(made.key).toMatch(KEY_RE);
    expect(made.key.startsWith(made.prefix)).toBe(true);
    expect(made.prefix).toMatch(/^svc_.{8}$/);
    expect(made).toMatchObject({ name: 'laptop script', scopes: ['svc__todo:read', 'svc__todo:write'], expiresAt: null });
    const doc = await a.instance.auth.apiKeys.docs.findOne({ _id: made.id });
    expect(doc).toMatchObject({ userId: user.id, hash: sha256hex(made.key) });
    expect(JSON.stringify(doc)).not.toContain(made.key);
    const store = await dumpStore(a, redisUrl);
    for (const [k, v] of store) expect(`${k} ${v}`).not.toContain(made.key.slice(4));

    const list = await client.fetch('/auth/api-keys');
    expect(list.status).toBe(200);
    const { items } = (await list.json()) as { items: Record<string, unknown>[] };
    expect(items).toEqual([{ id: made.id, name: 'laptop script', prefix: made.prefix, scopes: made.scopes, createdAt: made.createdAt, expiresAt: null, lastUsedAt: null }]);
  });

  it('DELETE revokes one of the caller\'s keys (401 afterwards); others\' ids and unknown ids are 404', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const other = await loggedIn(a);
    const made = await makeKey(client);
    const theirs = await makeKey(other.client);
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(200);
    expect((await client.fetch(`/auth/api-keys/${theirs.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await client.fetch('/auth/api-keys/nope', { method: 'DELETE' })).status).toBe(404);
    expect((await client.fetch(`/auth/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await client.fetch(`/auth/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(404);
    const res = await a.fetch('/auth/session', withKey(made.key));
    expect(res.status).toBe(401);
    expect(await errorCode(res)).toBe('invalid_api_key');
    expect((await a.fetch('/auth/session', withKey(theirs.key))).status).toBe(200);
  });

  it('needs a session and step-up: a session older than auth.session.freshAge gets 403 reauthentication_required', async () => {
    const a = await app({ config: { auth: { session: { freshAge: 1 } } } });
    expect((await a.fetch('/auth/api-keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"x","scopes":[]}' })).status).toBe(401);
    const { client, user } = await loggedIn(a);
    await sleep(1100);
    const res = await client.fetch('/auth/api-keys', { method: 'POST', json: { name: 'x', scopes: [] } });
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe('reauthentication_required');
    expect((await client.fetch('/auth/reauthenticate', { method: 'POST', json: { password: user.password } })).status).toBe(204);
    await makeKey(client, { scopes: [] });
  });

  it('bad input: unknown scopes, auth:admin for a non-admin, a past or malformed expiry, a bad name -> 400 validation_failed, nothing made', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const bodies: unknown[] = [
      { name: 'x', scopes: ['svc__nothing:read'] },
      { name: 'x', scopes: ['svc__todo:delete'] },
      { name: 'x', scopes: ['auth:admin'] },
      { name: 'x', scopes: ['svc__todo:read'], expiresAt: new Date(Date.now() - 1000).toISOString() },
      { name: 'x', scopes: ['svc__todo:read'], expiresAt: 'tomorrow' },
      { name: '', scopes: [] },
      { name: 'a\nb', scopes: [] },
      { name: 'x'.repeat(65), scopes: [] },
      { name: 'x', scopes: 'svc__todo:read' },
      { name: 'x', scopes: [1] },
      { name: 'x' },
      { name: 'x', scopes: [], extra: true },
      [],
    ];
    for (const json of bodies) {
      const res = await client.fetch('/auth/api-keys', { method: 'POST', json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(await errorCode(res)).toBe('validation_failed');
    }
    expect((await client.fetch('/auth/api-keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":' })).status).toBe(400);
    expect(await a.instance.auth.apiKeys.list(user.id)).toEqual([]);
  });

  it('an admin may ask for auth:admin; a key expiring later keeps its expiresAt', async () => {
    const a = await app();
    const { client } = await loggedIn(a, { admin: true });
    const at = new Date(Date.now() + 3600_000).toISOString();
    const made = await makeKey(client, { scopes: ['auth:admin', 'svc__todo:read'], expiresAt: at });
    expect(made.scopes).toEqual(['auth:admin', 'svc__todo:read']);
    expect(made.expiresAt).toBe(at);
  });

  it('at most auth.apiKeys.maxPerUser keys -> 409 too_many_keys, also when asked in parallel; a revoked one frees its place', async () => {
    const a = await app({ config: { auth: { apiKeys: { maxPerUser: 3 } } } });
    const { client, user } = await loggedIn(a);
    const answers = await Promise.all(Array.from({ length: 6 }, () => client.fetch('/auth/api-keys', { method: 'POST', json: { name: 'x', scopes: [] } })));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    for (const r of answers.filter((r) => r.status === 409)) expect(await errorCode(r)).toBe('too_many_keys');
    while ((await a.instance.auth.apiKeys.list(user.id)).length < 3) await makeKey(client, { scopes: [] });
    const res = await client.fetch('/auth/api-keys', { method: 'POST', json: { name: 'x', scopes: [] } });
    expect(res.status).toBe(409);
    expect(await errorCode(res)).toBe('too_many_keys');
    const [first] = await a.instance.auth.apiKeys.list(user.id);
    expect((await client.fetch(`/auth/api-keys/${first!.id}`, { method: 'DELETE' })).status).toBe(204);
    await makeKey(client, { scopes: [] });
  });

  it("the per-user lock goes only while it is its maker's: a lock another call took after its TTL ran out stays", async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const store = a.instance.stores.forRole('sessions');
    const lock = `${a.keyPrefix}api-key-lock:${user.id}`;
    const docs = a.instance.auth.apiKeys.docs;
    const insertOne = docs.insertOne.bind(docs);
    // While the key is made, the lock is taken over (as by another instance once its 10 s are up).
    docs.insertOne = async (doc) => {
      expect(await store.get(lock)).not.toBeNull();
      await store.set(lock, 'another maker', { ttl: 10 });
      return insertOne(doc);
    };
    try {
      await makeKey(client);
    } finally {
      docs.insertOne = insertOne;
    }
    expect(await store.get(lock)).toBe('another maker');
    await store.del(lock);
    await makeKey(client); // its own lock goes when it is done
    expect(await store.get(lock)).toBeNull();
  });

  it('audit: api_key.created and api_key.revoked name the key id, never the key', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client);
    expect((await client.fetch(`/auth/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(204);
    const page = await a.instance.auth.audit.query({ userId: user.id, limit: 50 });
    const created = page.items.find((r) => r.type === 'api_key.created');
    const revoked = page.items.find((r) => r.type === 'api_key.revoked');
    expect(created).toMatchObject({ actor: { type: 'user', id: user.id }, subject: { userId: user.id }, details: { keyId: made.id, scopes: ['svc__todo:read'] } });
    expect(revoked).toMatchObject({ subject: { userId: user.id }, details: { keyId: made.id } });
    expect(JSON.stringify(page.items)).not.toContain(made.key.slice(4));
  });

  it('admin: GET /auth/users/:id/api-keys lists a user\'s keys, DELETE /auth/users/:id/api-keys/:keyId revokes one; others 403, unknown 404', async () => {
    const a = await app();
    const admin = await loggedIn(a, { admin: true });
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client);
    const list = await admin.client.fetch(`/auth/users/${user.id}/api-keys`);
    expect(list.status).toBe(200);
    expect(((await list.json()) as { items: { id: string; key?: string }[] }).items.map((i) => [i.id, i.key])).toEqual([[made.id, undefined]]);
    expect((await client.fetch(`/auth/users/${user.id}/api-keys`)).status).toBe(403);
    expect((await admin.client.fetch('/auth/users/nobody/api-keys')).status).toBe(404);
    expect((await admin.client.fetch(`/auth/users/${user.id}/api-keys/nope`, { method: 'DELETE' })).status).toBe(404);
    expect((await admin.client.fetch(`/auth/users/${admin.user.id}/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await admin.client.fetch(`/auth/users/${user.id}/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(401);
    const page = await a.instance.auth.audit.query({ userId: user.id, type: 'api_key.revoked', limit: 10 });
    expect(page.items[0]).toMatchObject({ actor: { type: 'admin', id: admin.user.id }, details: { keyId: made.id } });
  });
});

describe('Authorization: Bearer svc_...', () => {
  it('GET /auth/session answers as the key: provider api_key, apiKey {id, scopes}', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client, { scopes: ['svc__todo:read'] });
    const res = await a.fetch('/auth/session', withKey(made.key));
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toBeNull();
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ userId: user.id, isAdmin: false, provider: 'api_key', apiKey: { id: made.id, scopes: ['svc__todo:read'] }, createdAt: made.createdAt, expiresAt: null });
    const expanded = await a.fetch('/auth/session?expand=user', withKey(made.key));
    expect(expanded.status).toBe(200);
    expect(((await expanded.json()) as { user: { email: string } }).user.email).toBe(user.email);
    // `bearer` in any case
    expect((await a.fetch('/auth/session', { headers: { authorization: `bearer ${made.key}` } })).status).toBe(200);
  });

  it('plugin routes with scopes: a key with the scope passes, without it 403 insufficient_scope', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const reader = await makeKey(client, { scopes: ['svc__todo:read'] });
    const writer = await makeKey(client, { scopes: ['svc__todo:read', 'svc__todo:write'] });
    const created = await a.fetch('/svc__todo/todo', { method: 'POST', ...withKey(writer.key, { 'content-type': 'application/json' }), body: JSON.stringify({ name: 'from a key' }) });
    expect(created.status).toBe(201);
    const refused = await a.fetch('/svc__todo/todo', { method: 'POST', ...withKey(reader.key, { 'content-type': 'application/json' }), body: JSON.stringify({ name: 'no' }) });
    expect(refused.status).toBe(403);
    expect(await errorCode(refused)).toBe('insufficient_scope');
    const all = await a.fetch('/svc__todo/all', withKey(reader.key));
    expect(all.status).toBe(200);
    expect(((await all.json()) as { data: { name: string }[] }).data.map((t) => t.name)).toEqual(['from a key']);
    // the session sees what the key made: the same user
    expect(((await (await client.fetch('/svc__todo/all')).json()) as { data: unknown[] }).data).toHaveLength(1);
  });

  it('routes without scopes and every credential-changing route refuse keys: 403 api_key_not_allowed', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const made = await makeKey(client, { scopes: ['svc__todo:read', 'svc__todo:write'] });
    const refused: [string, string, unknown?][] = [
      ['GET', '/auth/sessions'],
      ['POST', '/auth/logout-all'],
      ['POST', '/auth/logout'],
      ['GET', '/auth/account/activity'],
      ['POST', '/auth/password', { currentPassword: 'x', newPassword: 'y'.repeat(12) }],
      ['POST', '/auth/totp/enroll'],
      ['DELETE', '/auth/totp', { code: '123456' }],
      ['GET', '/auth/passkeys'],
      ['POST', '/auth/passkeys/options'],
      ['GET', '/auth/api-keys'],
      ['POST', '/auth/api-keys', { name: 'x', scopes: [] }],
      ['DELETE', `/auth/api-keys/${made.id}`],
      ['GET', '/auth/account/providers'],
      ['DELETE', '/auth/account/providers/github/1'],
      ['POST', '/auth/reauthenticate', { password: 'x' }],
      ['POST', '/auth/asset-token', { assetId: 'x' }],
    ];
    for (const [method, path, json] of refused) {
      const res = await a.fetch(path, { method, ...withKey(made.key, json ? { 'content-type': 'application/json' } : {}), ...(json ? { body: JSON.stringify(json) } : {}) });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(await errorCode(res), `${method} ${path}`).toBe('api_key_not_allowed');
    }
    // nothing happened: the key and the session live
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(200);
    expect((await client.fetch('/auth/session')).status).toBe(200);
    // public routes are declared without scopes too: no key (CONTRACT 15), for reads as for writes;
    // without the key they answer; unknown paths stay 404
    for (const [method, path] of [['GET', '/health'], ['GET', '/openapi.json'], ['HEAD', '/health'], ['POST', '/auth/login']] as const) {
      const res = await a.fetch(path, { method, ...withKey(made.key, method === 'POST' ? { 'content-type': 'application/json' } : {}), ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(res.status, `${method} ${path}`).toBe(403);
      if (method !== 'HEAD') expect(await errorCode(res), `${method} ${path}`).toBe('api_key_not_allowed');
    }
    expect((await a.fetch('/health')).status).toBe(200);
    expect((await a.fetch('/openapi.json')).status).toBe(200);
    expect((await a.fetch('/auth/nothing-here', withKey(made.key))).status).toBe(404);
  });

  it('auth:admin lets an admin\'s key reach the admin routes; without it 403 insufficient_scope; step-up actions stay for sessions', async () => {
    const a = await app();
    const admin = await loggedIn(a, { admin: true });
    const adminKey = await makeKey(admin.client, { scopes: ['auth:admin'] });
    const plainKey = await makeKey(admin.client, { scopes: ['svc__todo:read'] });
    const { client, user } = await loggedIn(a);
    const userKey = await makeKey(client, { scopes: ['svc__todo:read'] });
    for (const path of ['/auth/users', `/auth/users/${user.id}`, '/auth/providers', '/auth/work-sessions', '/auth/audit', '/auth/webhooks', `/auth/users/${user.id}/api-keys`, '/svc__cache/cacheInstances']) {
      const ok = await a.fetch(path, withKey(adminKey.key));
      expect(ok.status, path).not.toBeGreaterThanOrEqual(400);
      for (const key of [plainKey.key, userKey.key]) {
        const res = await a.fetch(path, withKey(key));
        expect(res.status, path).toBe(403);
        expect(await errorCode(res), path).toBe('insufficient_scope');
      }
    }
    expect(((await (await a.fetch('/auth/session', withKey(adminKey.key))).json()) as { isAdmin: boolean }).isAdmin).toBe(true);
    expect(((await (await a.fetch('/auth/session', withKey(plainKey.key))).json()) as { isAdmin: boolean }).isAdmin).toBe(false);
    // names change with the key; deleting a user or granting admin needs step-up, which only a session has
    const renamed = await a.fetch(`/auth/users/${user.id}`, { method: 'PATCH', ...withKey(adminKey.key, { 'content-type': 'application/json' }), body: JSON.stringify({ firstname: 'Keyed' }) });
    expect(renamed.status).toBe(200);
    const own = await a.fetch(`/auth/users/${admin.user.id}`, { method: 'PATCH', ...withKey(adminKey.key, { 'content-type': 'application/json' }), body: JSON.stringify({ lastname: 'Self' }) });
    expect(own.status).toBe(200);
    const deleted = await a.fetch(`/auth/users/${user.id}`, { method: 'DELETE', ...withKey(adminKey.key) });
    expect(deleted.status).toBe(403);
    expect(await errorCode(deleted)).toBe('api_key_not_allowed');
    const promoted = await a.fetch(`/auth/users/${user.id}`, { method: 'PATCH', ...withKey(adminKey.key, { 'content-type': 'application/json' }), body: JSON.stringify({ isAdmin: true }) });
    expect(promoted.status).toBe(403);
    expect((await a.instance.auth.users.get(user.id)).tags).not.toContain('ADMIN');
  });

  it('bad Bearer values: svc_ values that are not a live key -> 401 invalid_api_key, others keep legacy_token, never 500', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const made = await makeKey(client);
    const invalid = ['svc_', 'svc_short', `${made.key}x`, made.key.slice(0, -1), `svc_${'A'.repeat(43)}`, `${made.key} extra`, `svc_${'!'.repeat(43)}`, `svc_${'é'.repeat(43)}`, `SVC_${made.key.slice(4)}`.replace('SVC_', 'svc_') + '=='];
    for (const value of invalid) {
      const res = await a.fetch('/auth/session', { headers: { authorization: `Bearer ${value}` } });
      expect(res.status, value).toBe(401);
      expect(await errorCode(res), value).toBe('invalid_api_key');
      const todo = await a.fetch('/svc__todo/all', { headers: { authorization: `Bearer ${value}` } });
      expect(todo.status, value).toBe(401);
    }
    for (const value of ['Bearer abc.def.ghi', `Bearer ${made.key.slice(4)}`, 'Bearer SVC_x', `Token ${made.key}`]) {
      const res = await a.fetch('/auth/session', { headers: { authorization: value } });
      expect(res.status, value).toBe(401);
      expect(await errorCode(res), value).toBe(/^bearer\s/i.test(value) ? 'legacy_token' : 'unauthenticated');
    }
    const basic = await a.fetch('/auth/session', { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    expect(await errorCode(basic)).toBe('unauthenticated');
  });

  it('a key sent with another user\'s cookie: the key wins, the cookie is ignored and stays alive', async () => {
    const a = await app();
    const owner = await loggedIn(a);
    const made = await makeKey(owner.client, { scopes: ['svc__todo:read', 'svc__todo:write'] });
    const other = await loggedIn(a);
    const both = await other.client.fetch('/auth/session', withKey(made.key));
    expect(both.status).toBe(200);
    expect(both.headers.get('set-cookie')).toBeNull();
    expect(((await both.json()) as { userId: string }).userId).toBe(owner.user.id);
    const todo = await other.client.fetch('/svc__todo/todo', { method: 'POST', ...withKey(made.key), json: { name: 'owner\'s' } });
    expect(todo.status).toBe(201);
    expect(((await (await other.client.fetch('/svc__todo/all')).json()) as { data: unknown[] }).data).toEqual([]);
    // a route the key may not use is refused, not answered for the cookie's user
    const sessions = await other.client.fetch('/auth/sessions', withKey(made.key));
    expect(sessions.status).toBe(403);
    const logout = await other.client.fetch('/auth/logout-all', { method: 'POST', ...withKey(made.key) });
    expect(logout.status).toBe(403);
    expect((await other.client.fetch('/auth/session')).status).toBe(200);
    // a dead key with a live cookie is still refused
    expect((await owner.client.fetch(`/auth/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(204);
    const dead = await other.client.fetch('/auth/session', withKey(made.key));
    expect(dead.status).toBe(401);
    expect(await errorCode(dead)).toBe('invalid_api_key');
  });

  it('key requests skip the Origin check (no cookie rides along); cookie requests keep it', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const made = await makeKey(client, { scopes: ['svc__todo:write'] });
    const evil = { origin: 'https://evil.example', 'content-type': 'application/json' };
    const keyed = await a.fetch('/svc__todo/todo', { method: 'POST', ...withKey(made.key, evil), body: JSON.stringify({ name: 'x' }) });
    expect(keyed.status).toBe(201);
    const cookie = await client.fetch('/svc__todo/todo', { method: 'POST', headers: evil, body: JSON.stringify({ name: 'x' }) });
    expect(cookie.status).toBe(403);
    expect(await errorCode(cookie)).toBe('csrf_failed');
  });

  it('an expired key -> 401 invalid_api_key', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const made = await makeKey(client, { expiresAt: new Date(Date.now() + 1500).toISOString() });
    expect((await a.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
    await sleep(1600);
    const res = await a.fetch('/svc__todo/all', withKey(made.key));
    expect(res.status).toBe(401);
    expect(await errorCode(res)).toBe('invalid_api_key');
  });

  it('a key whose record left the store is read back from the database; a revoked one is not', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client);
    const store = a.instance.stores.forRole('sessions');
    await store.del(`${a.keyPrefix}api-key:${sha256hex(made.key)}`);
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(200);
    expect(await store.get(`${a.keyPrefix}api-key:${sha256hex(made.key)}`)).not.toBeNull();
    await a.instance.auth.apiKeys.revoke(user.id, made.id);
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(401);
  });

  it('lastUsedAt is written after use, at most once a minute', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client);
    expect((await a.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
    let first: string | null = null;
    for (let i = 0; i < 50 && !first; i++) {
      first = (await a.instance.auth.apiKeys.get(user.id, made.id))!.lastUsedAt;
      if (!first) await sleep(20);
    }
    expect(first).not.toBeNull();
    await sleep(20);
    expect((await a.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
    await sleep(100);
    expect((await a.instance.auth.apiKeys.get(user.id, made.id))!.lastUsedAt).toBe(first);
  });
});

describe('revocation when the store fails', () => {
  it('a DELETE cut short by the store is 503 and leaves the key listed; its retry revokes it for good', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const made = await makeKey(client);
    expect((await a.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
    const store = a.instance.stores.forRole('sessions');
    const del = store.del.bind(store);
    store.del = () => Promise.reject(new UnavailableError('store'));
    try {
      expect((await client.fetch(`/auth/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(503);
    } finally {
      store.del = del;
    }
    const listed = (await (await client.fetch('/auth/api-keys')).json()) as { items: { id: string }[] };
    expect(listed.items.map((k) => k.id)).toEqual([made.id]);
    expect((await client.fetch(`/auth/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(204);
    const res = await a.fetch('/svc__todo/all', withKey(made.key));
    expect(res.status).toBe(401);
    expect(await errorCode(res)).toBe('invalid_api_key');
  });
});

describe('revocation by lifecycle events', () => {
  it('a user\'s deletion revokes their keys', async () => {
    const a = await app();
    const admin = await loggedIn(a, { admin: true });
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client);
    expect((await admin.client.fetch(`/auth/users/${user.id}`, { method: 'DELETE' })).status).toBe(204);
    const res = await a.fetch('/svc__todo/all', withKey(made.key));
    expect(res.status).toBe(401);
    expect(await errorCode(res)).toBe('invalid_api_key');
    expect(await a.instance.auth.apiKeys.docs.count({ userId: user.id })).toBe(0);
  });

  it('a password reset revokes every key; a password change and logout-all revoke none', async () => {
    const a = await app({ env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: 'https://app.example.test' } });
    const { client, user } = await loggedIn(a);
    const made = await makeKey(client);
    const newPassword = 'another correct horse';
    expect((await client.fetch('/auth/password', { method: 'POST', json: { currentPassword: user.password, newPassword } })).status).toBe(204);
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(200);
    expect((await client.fetch('/auth/logout-all', { method: 'POST' })).status).toBe(204);
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(200);
    const doc = await a.instance.auth.users.get(user.id);
    const token = await a.instance.auth.email.tokens.issue('reset', { userId: user.id, email: user.email, epoch: doc.epoch ?? 0 });
    expect((await a.fetch('/auth/password/reset', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, newPassword: 'yet another horse battery' }) })).status).toBe(204);
    expect((await a.fetch('/auth/session', withKey(made.key))).status).toBe(401);
    const page = await a.instance.auth.audit.query({ userId: user.id, type: 'api_key.revoked', limit: 10 });
    expect(page.items[0]).toMatchObject({ details: { keyId: made.id, reason: 'password_reset' } });
  });

  it('a demotion revokes the keys holding auth:admin, and only those', async () => {
    const a = await app();
    const root = await loggedIn(a, { admin: true });
    const admin = await loggedIn(a, { admin: true });
    const adminKey = await makeKey(admin.client, { scopes: ['auth:admin', 'svc__todo:read'] });
    const todoKey = await makeKey(admin.client, { scopes: ['svc__todo:read'] });
    expect((await root.client.fetch(`/auth/users/${admin.user.id}`, { method: 'PATCH', json: { isAdmin: false } })).status).toBe(200);
    expect((await a.fetch('/auth/users', withKey(adminKey.key))).status).toBe(401);
    expect((await a.fetch('/svc__todo/all', withKey(adminKey.key))).status).toBe(401);
    expect((await a.fetch('/svc__todo/all', withKey(todoKey.key))).status).toBe(200);
  });
});

describe.runIf(redisUrl)('two instances on one Redis', () => {
  async function pair(config: Record<string, unknown> = {}) {
    const db = EmbeddedDatabase.inMemory();
    const a = await app({ db, config });
    const b = await app({ db, config: { ...config, auth: { ...(config.auth as object), store: { keyPrefix: a.keyPrefix } } } });
    return { a, b };
  }

  for (const localCache of [false, true]) {
    it(`a DELETE on one instance is seen on the other within 1 s (localCache: ${localCache})`, async () => {
      const { a, b } = await pair({ auth: { session: { localCache } } });
      const { client } = await loggedIn(a);
      const made = await makeKey(client);
      for (let i = 0; i < 3; i++) expect((await b.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
      expect((await client.fetch(`/auth/api-keys/${made.id}`, { method: 'DELETE' })).status).toBe(204);
      const deleted = Date.now();
      let status = 200;
      while (status === 200 && Date.now() - deleted < 3000) {
        status = (await b.fetch('/svc__todo/all', withKey(made.key))).status;
        if (status === 200) await sleep(20);
      }
      expect(status).toBe(401);
      expect(Date.now() - deleted).toBeLessThan(1000);
    });
  }

  for (const localCache of [false, true]) {
    it(`the rate limit counts on both instances together: 429 rate_limited with Retry-After (localCache: ${localCache})`, async () => {
      const { a, b } = await pair({ auth: { apiKeys: { rateLimit: 10 }, session: { localCache } } });
      const { client } = await loggedIn(a);
      const made = await makeKey(client);
      const other = await makeKey(client);
      await clearOfMinuteEnd();
      // With the local cache, the first requests read the record with the count (one script) and the
      // later ones count alone (one INCR): both count in the same counter.
      const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 ? a : b).fetch('/svc__todo/all', withKey(made.key))));
      const statuses = answers.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      expect(statuses.filter((s) => s === 429)).toHaveLength(6);
      const refused = answers.find((r) => r.status === 429)!;
      expect(await errorCode(refused)).toBe('rate_limited');
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      // per key: another key of the same user is not limited
      expect((await b.fetch('/svc__todo/all', withKey(other.key))).status).toBe(200);
    });
  }

  it('unknown keys count per client address on both instances together: past INVALID_PER_IP a minute 429 rate_limited without the database; valid keys and other addresses go on', async () => {
    const { a, b } = await pair({ server: { trustProxy: 1 } });
    const { client } = await loggedIn(a);
    const made = await makeKey(client);
    const lookups: string[] = [];
    for (const x of [a, b]) {
      const docs = x.instance.auth.apiKeys.docs;
      const findOne = docs.findOne.bind(docs);
      docs.findOne = (filter, ...rest) => {
        lookups.push(JSON.stringify(filter));
        return findOne(filter, ...rest);
      };
    }
    await clearOfMinuteEnd();
    const from = (ip: string) => ({ 'x-forwarded-for': ip });
    const random = () => `svc_${randomBytes(32).toString('base64url')}`;
    const extra = 8;
    const answers = await Promise.all(Array.from({ length: INVALID_PER_IP + extra }, (_, i) => (i % 2 ? a : b).fetch('/svc__todo/all', withKey(random(), from('203.0.113.7')))));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(INVALID_PER_IP);
    expect(statuses.filter((s) => s === 429)).toHaveLength(extra);
    // counted before the database is asked: one lookup per 401, none per 429
    expect(lookups).toHaveLength(INVALID_PER_IP);
    // the address's counter, and no counter per unknown key: random keys cannot fill the store
    const keys = [...(await dumpStore(a, redisUrl)).keys()];
    expect(keys.filter((k) => k.includes('api-key-rate:'))).toEqual([]);
    if (redisUrl) expect(keys.filter((k) => k.includes('api-key-invalid:'))).toHaveLength(1);
    const refused = answers.find((r) => r.status === 429)!;
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('rate_limited');
    expect(body.error.message).toMatch(/unknown API keys/);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // a valid key from that address is served (its record is in the store: the address is not asked)
    expect((await a.fetch('/svc__todo/all', withKey(made.key, from('203.0.113.7')))).status).toBe(200);
    expect((await b.fetch('/svc__todo/all', withKey(made.key, from('203.0.113.7')))).status).toBe(200);
    // another address is not held back
    const other = await b.fetch('/svc__todo/all', withKey(random(), from('198.51.100.2')));
    expect(other.status).toBe(401);
    expect(await errorCode(other)).toBe('invalid_api_key');
    // a key made now works at once from the held-back address: nothing caches "unknown"
    const fresh = await makeKey(client);
    expect((await b.fetch('/svc__todo/all', withKey(fresh.key, from('203.0.113.7')))).status).toBe(200);
  });

  it('a valid key read back from the database (its record left the store) gives its count back', async () => {
    const { a } = await pair();
    const { client } = await loggedIn(a);
    const made = await makeKey(client);
    const store = a.instance.stores.forRole('sessions');
    await clearOfMinuteEnd();
    for (let i = 0; i < INVALID_PER_IP + 3; i++) {
      await store.del(`${a.keyPrefix}api-key:${sha256hex(made.key)}`);
      expect((await a.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
    }
  });

  for (const localCache of [false, true]) {
    it(`a key request asks the store once: its record and its count in one script, or the count alone from the local cache (localCache: ${localCache})`, async () => {
      const a = await app({ config: { auth: { session: { localCache } } } });
      const { client } = await loggedIn(a);
      const made = await makeKey(client);
      const calls = countStoreCalls(a);
      // The first request writes lastUsedAt (after the answer); the local cache turns on once Redis tracks keys.
      const deadline = Date.now() + 3000;
      for (;;) {
        calls.length = 0;
        expect((await a.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
        await sleep(10);
        if (calls.join() === (localCache ? 'incrWindow' : 'getAndIncrWindow')) break;
        if (Date.now() > deadline) throw new Error(`a key request asked the store for ${calls.join(', ')}`);
      }
      calls.length = 0;
      for (let i = 0; i < 20; i++) expect((await a.fetch('/svc__todo/all', withKey(made.key))).status).toBe(200);
      expect(calls).toEqual(Array.from({ length: 20 }, () => (localCache ? 'incrWindow' : 'getAndIncrWindow')));
    });
  }
});

describe('/openapi.json', () => {
  it('has a bearerAuth scheme and each key-taking route\'s scopes', async () => {
    const a = await app();
    const doc = (await (await a.fetch('/openapi.json')).json()) as {
      components: { securitySchemes: Record<string, { type: string; scheme?: string }> };
      paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>>;
    };
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.paths['/svc__todo/todo']!.post!.security).toEqual([{ sessionCookie: [] }, { bearerAuth: ['svc__todo:write'] }]);
    expect(doc.paths['/svc__todo/all']!.get!.security).toEqual([{ sessionCookie: [] }, { bearerAuth: ['svc__todo:read'] }]);
    expect(doc.paths['/auth/session']!.get!.security).toEqual([{ sessionCookie: [] }, { bearerAuth: [] }]);
    expect(doc.paths['/auth/users']!.get!.security).toEqual([{ sessionCookie: [] }, { bearerAuth: ['auth:admin'] }]);
    expect(doc.paths['/auth/sessions']!.get!.security).toBeUndefined();
  });
});
