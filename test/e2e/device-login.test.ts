// Device login (RFC 8628, CONTRACT 15, issue 55 step 3): a tool asks for a code, the signed-in user
// approves it (step-up) or denies it, the tool's poll gets an API key once. Polling too fast slows
// down, wrong user codes count per session, decisions and claims are single-use on every instance.

import { afterAll, describe, expect, inject, it } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { UnavailableError } from '../../src/http/errors.ts';
import { createTestApp, type TestApp, type TestAppOptions, type TestClient } from '../support/app.ts';
import { sha256hex, sleep } from '../support/auth.ts';

const redisUrl = inject('redisUrl') || undefined;
const FRONTEND = 'https://app.example.test';
const USER_CODE_RE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;

const apps: TestApp[] = [];
async function app(opts: TestAppOptions = {}): Promise<TestApp> {
  const a = await createTestApp({ redisUrl, env: { SVC_FRONTEND_URLS: FRONTEND }, ...opts });
  apps.push(a);
  return a;
}
afterAll(async () => {
  for (const a of apps) await a.close();
});

interface Code {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

const post = (a: TestApp, path: string, json: unknown, headers: Record<string, string> = {}) =>
  a.fetch(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(json) });

async function start(a: TestApp, body: Record<string, unknown> = {}): Promise<Code> {
  const res = await post(a, '/auth/device/code', { name: 'my-cli on laptop', scopes: ['svc__todo:read'], ...body });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Code;
}

const poll = async (a: TestApp, deviceCode: string) => {
  const res = await post(a, '/auth/device/token', { device_code: deviceCode });
  return { status: res.status, body: (await res.json()) as Record<string, string>, headers: res.headers };
};

async function loggedIn(a: TestApp, opts: { admin?: boolean } = {}): Promise<{ client: TestClient; user: { id: string; email: string; password: string } }> {
  const user = await a.createUser(opts);
  const client = a.client();
  expect((await client.login(user.email, user.password)).status).toBe(200);
  return { client, user };
}

const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

describe('POST /auth/device/code', () => {
  it('answers RFC 8628 section 3.2: device code, user code XXXX-XXXX of BCDFGHJKLMNPQRSTVWXZ, the device page, 600 s, 5 s', async () => {
    const a = await app();
    const code = await start(a);
    expect(Object.keys(code).sort()).toEqual(['device_code', 'expires_in', 'interval', 'user_code', 'verification_uri', 'verification_uri_complete']);
    expect(code.device_code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(code.user_code).toMatch(USER_CODE_RE);
    expect(code.verification_uri).toBe(`${FRONTEND}/device`);
    expect(code.verification_uri_complete).toBe(`${FRONTEND}/device?user_code=${code.user_code}`);
    expect(code.expires_in).toBe(600);
    expect(code.interval).toBe(5);
    const codes = await Promise.all(Array.from({ length: 10 }, () => start(a)));
    expect(new Set(codes.map((c) => c.user_code)).size).toBe(10);
  });

  it('auth.deviceFlow.ttl and auth.email.paths.device set expires_in and the page', async () => {
    const a = await app({ config: { auth: { deviceFlow: { ttl: 120 }, email: { paths: { device: '/cli-login' } } } } });
    const code = await start(a);
    expect(code.expires_in).toBe(120);
    expect(code.verification_uri).toBe(`${FRONTEND}/cli-login`);
  });

  it('bad input: unknown scopes, no name, wrong types -> 400 validation_failed', async () => {
    const a = await app();
    for (const body of [{ name: 'x', scopes: ['svc__nope:read'] }, { scopes: [] }, { name: 'x', scopes: 'svc__todo:read' }, { name: '', scopes: [] }, { name: 'x', scopes: [], extra: 1 }]) {
      const res = await post(a, '/auth/device/code', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await errorCode(res)).toBe('validation_failed');
    }
  });
});

describe('POST /auth/device/token', () => {
  it('pending: the first poll may come at once; sooner than the interval -> slow_down, and the interval grows by 5 s', async () => {
    const a = await app();
    const code = await start(a);
    const first = await poll(a, code.device_code);
    expect(first).toMatchObject({ status: 400, body: { error: 'authorization_pending' } });
    expect(first.headers.get('cache-control')).toBe('no-store');
    expect((await poll(a, code.device_code)).body.error).toBe('slow_down');
    // 5.5 s later: enough for the first interval, not for the grown one (10 s)
    await sleep(5500);
    expect((await poll(a, code.device_code)).body.error).toBe('slow_down');
  }, 20_000);

  it('unknown, malformed, missing device codes', async () => {
    const a = await app();
    expect((await poll(a, 'A'.repeat(43))).body).toMatchObject({ error: 'invalid_grant' });
    expect((await poll(a, 'nope')).body).toEqual({ error: 'invalid_grant' });
    expect((await poll(a, 'A'.repeat(5000))).body).toEqual({ error: 'invalid_grant' });
    expect((await post(a, '/auth/device/token', {})).status).toBe(400);
    expect((await post(a, '/auth/device/token', { device_code: 'x', grant_type: 'password' })).status).toBe(400);
    const code = await start(a);
    const rfc = await post(a, '/auth/device/token', { device_code: code.device_code, grant_type: 'urn:ietf:params:oauth:grant-type:device_code', client_id: 'my-cli' });
    expect(((await rfc.json()) as { error: string }).error).toBe('authorization_pending');
  });

  it('an expired code -> expired_token; its user code is gone', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const code = await start(a);
    const store = a.instance.stores.forRole('sessions');
    const key = `${a.keyPrefix}device:${sha256hex(code.device_code)}`;
    const record = JSON.parse((await store.get(key))!) as { expiresAt: number };
    await store.set(key, JSON.stringify({ ...record, expiresAt: Date.now() - 1 }), { keepTtl: true });
    expect((await poll(a, code.device_code)).body).toMatchObject({ error: 'expired_token' });
    expect((await client.fetch(`/auth/device?user_code=${code.user_code}`)).status).toBe(404);
  });

  it('an approved code polled after it expired -> expired_token, no key', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const code = await start(a);
    expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(204);
    const store = a.instance.stores.forRole('sessions');
    const key = `${a.keyPrefix}device:${sha256hex(code.device_code)}`;
    const record = JSON.parse((await store.get(key))!) as { expiresAt: number };
    await store.set(key, JSON.stringify({ ...record, expiresAt: Date.now() - 1 }), { keepTtl: true });
    expect((await poll(a, code.device_code)).body).toEqual({ error: 'expired_token' });
    expect(await a.instance.auth.apiKeys.list(user.id)).toHaveLength(0);
  });
});

describe('the user side', () => {
  it('GET /auth/device shows name, scopes and time, for the code in any case and with or without the hyphen; unknown -> 404', async () => {
    const a = await app();
    const { client } = await loggedIn(a);
    const code = await start(a, { scopes: ['svc__todo:read', 'svc__todo:write'] });
    for (const typed of [code.user_code, code.user_code.toLowerCase(), code.user_code.replace('-', ''), ` ${code.user_code.toLowerCase().replace('-', ' ')} `]) {
      const res = await client.fetch(`/auth/device?user_code=${encodeURIComponent(typed)}`);
      expect(res.status, typed).toBe(200);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toEqual({ name: 'my-cli on laptop', scopes: ['svc__todo:read', 'svc__todo:write'], createdAt: expect.stringMatching(/Z$/) });
    }
    expect((await client.fetch('/auth/device?user_code=BBBB-BBBB')).status).toBe(404);
    expect((await client.fetch('/auth/device?user_code=AAAA-AAAA')).status).toBe(404);
    expect((await client.fetch('/auth/device')).status).toBe(400);
    expect((await a.fetch(`/auth/device?user_code=${code.user_code}`)).status).toBe(401);
  });

  it('wrong user codes count per session: 10 per 15 minutes, then 429 too_many_attempts even for the right one; another session is not held back', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const code = await start(a);
    // right codes do not count
    for (let i = 0; i < 3; i++) expect((await client.fetch(`/auth/device?user_code=${code.user_code}`)).status).toBe(200);
    const wrong = await Promise.all(Array.from({ length: 10 }, (_, i) => client.fetch(`/auth/device?user_code=BBBB-BBB${'BCDFGHJKLM'[i]}`)));
    expect(wrong.map((r) => r.status)).toEqual(Array(10).fill(404));
    const refused = await client.fetch(`/auth/device?user_code=${code.user_code}`);
    expect(refused.status).toBe(429);
    expect(await errorCode(refused)).toBe('too_many_attempts');
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(429);
    const other = a.client();
    expect((await other.login(user.email, user.password)).status).toBe(200);
    expect((await other.fetch(`/auth/device?user_code=${code.user_code}`)).status).toBe(200);
  });

  it('approve (step-up) -> the next poll gets a key named after the request, once; audited', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const code = await start(a, { scopes: ['svc__todo:read', 'svc__todo:write'] });
    expect((await poll(a, code.device_code)).body.error).toBe('authorization_pending');
    expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code.toLowerCase() } })).status).toBe(204);
    // decided: the user code is used up
    expect((await client.fetch(`/auth/device?user_code=${code.user_code}`)).status).toBe(404);
    expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(404);
    expect((await client.fetch('/auth/device/deny', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(404);
    const got = await poll(a, code.device_code);
    expect(got.status).toBe(200);
    expect(got.headers.get('cache-control')).toBe('no-store');
    expect(got.body).toEqual({ access_token: expect.stringMatching(/^svc_[A-Za-z0-9_-]{43}$/), token_type: 'Bearer', scope: 'svc__todo:read svc__todo:write' });
    expect((await poll(a, code.device_code)).body).toMatchObject({ error: 'invalid_grant' });
    const key = got.body.access_token!;
    const todo = await a.fetch('/svc__todo/todo', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'from the cli' }) });
    expect(todo.status).toBe(201);
    const keys = await a.instance.auth.apiKeys.list(user.id);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ name: 'my-cli on laptop', scopes: ['svc__todo:read', 'svc__todo:write'], prefix: key.slice(0, 12) });
    const page = await a.instance.auth.audit.query({ userId: user.id, limit: 50 });
    const types = page.items.map((r) => r.type);
    expect(types).toEqual(expect.arrayContaining(['device.approved', 'api_key.created', 'login.succeeded']));
    expect(page.items.find((r) => r.type === 'login.succeeded' && r.details.method === 'device')).toMatchObject({ actor: { type: 'user', id: user.id }, details: { method: 'device', keyId: keys[0]!.id } });
    expect(page.items.find((r) => r.type === 'device.approved')).toMatchObject({ actor: { type: 'user', id: user.id }, details: { name: 'my-cli on laptop' } });
    expect(JSON.stringify(page.items)).not.toContain(key.slice(4));
    expect(JSON.stringify(page.items)).not.toContain(code.device_code);
    expect(JSON.stringify(page.items)).not.toContain(code.user_code);
  });

  it('approving needs step-up and a session: a stale session -> 403 reauthentication_required, a key -> 403 api_key_not_allowed', async () => {
    const a = await app({ config: { auth: { session: { freshAge: 1 } } } });
    const { client, user } = await loggedIn(a);
    const made = (await (await client.fetch('/auth/api-keys', { method: 'POST', json: { name: 'k', scopes: ['svc__todo:read'] } })).json()) as { key: string };
    const code = await start(a);
    const keyed = await post(a, '/auth/device/approve', { user_code: code.user_code }, { authorization: `Bearer ${made.key}` });
    expect(keyed.status).toBe(403);
    expect(await errorCode(keyed)).toBe('api_key_not_allowed');
    await sleep(1100);
    const stale = await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } });
    expect(stale.status).toBe(403);
    expect(await errorCode(stale)).toBe('reauthentication_required');
    expect((await client.fetch('/auth/reauthenticate', { method: 'POST', json: { password: user.password } })).status).toBe(204);
    expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(204);
  });

  it('deny -> the next poll gets access_denied, later ones invalid_grant; audited', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const code = await start(a);
    expect((await client.fetch('/auth/device/deny', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(204);
    expect((await poll(a, code.device_code)).body).toMatchObject({ error: 'access_denied' });
    expect((await poll(a, code.device_code)).body).toMatchObject({ error: 'invalid_grant' });
    expect(await a.instance.auth.apiKeys.list(user.id)).toEqual([]);
    const page = await a.instance.auth.audit.query({ userId: user.id, type: 'device.denied', limit: 5 });
    expect(page.items).toHaveLength(1);
  });

  it('auth:admin: a non-admin cannot approve it (400 validation_failed), an admin can', async () => {
    const a = await app();
    const plain = await loggedIn(a);
    const admin = await loggedIn(a, { admin: true });
    const code = await start(a, { scopes: ['auth:admin'] });
    const refused = await plain.client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } });
    expect(refused.status).toBe(400);
    expect(await errorCode(refused)).toBe('validation_failed');
    expect((await admin.client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(204);
    const got = await poll(a, code.device_code);
    expect(got.body.scope).toBe('auth:admin');
    expect((await a.fetch('/auth/users', { headers: { authorization: `Bearer ${got.body.access_token}` } })).status).toBe(200);
  });

  it('too many keys: approving -> 409 too_many_keys, nothing decided', async () => {
    const a = await app({ config: { auth: { apiKeys: { maxPerUser: 1 } } } });
    const { client } = await loggedIn(a);
    expect((await client.fetch('/auth/api-keys', { method: 'POST', json: { name: 'k', scopes: [] } })).status).toBe(201);
    const code = await start(a);
    const res = await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } });
    expect(res.status).toBe(409);
    expect(await errorCode(res)).toBe('too_many_keys');
    expect((await client.fetch(`/auth/device?user_code=${code.user_code}`)).status).toBe(200);
    expect((await poll(a, code.device_code)).body.error).toBe('authorization_pending');
  });

  it('a password reset between the approval and the poll: access_denied, no key', async () => {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const code = await start(a);
    expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(204);
    await a.instance.auth.users.advanceEpoch(user.id);
    expect((await poll(a, code.device_code)).body).toMatchObject({ error: 'access_denied' });
    expect(await a.instance.auth.apiKeys.list(user.id)).toEqual([]);
  });
});

describe('a failure while the key of an approval is made', () => {
  /** Approves a fresh code for a signed-in user; returns the app, the user and the code. */
  async function approved() {
    const a = await app();
    const { client, user } = await loggedIn(a);
    const code = await start(a);
    expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(204);
    return { a, user, code };
  }

  /** Runs `poll` while `target[name]` fails (once, or always); puts it back after. */
  async function failing<T extends object>(target: T, name: keyof T, once: boolean, run: () => Promise<void>): Promise<void> {
    const original = (target[name] as (...args: unknown[]) => unknown).bind(target);
    let failed = 0;
    (target as Record<keyof T, unknown>)[name] = (...args: unknown[]) => {
      if (once && failed > 0) return original(...args);
      failed++;
      return Promise.reject(new UnavailableError('db'));
    };
    try {
      await run();
    } finally {
      (target as Record<keyof T, unknown>)[name] = original;
    }
    expect(failed).toBeGreaterThan(0);
  }

  const keysOf = async (a: TestApp, userId: string) => a.instance.auth.apiKeys.docs.find({ userId });

  it('the database refuses the key: 503, no key, and the next poll gets one (the approval is not lost)', async () => {
    const { a, user, code } = await approved();
    const docs = a.instance.auth.apiKeys.docs;
    await failing(docs, 'insertOne', true, async () => {
      const res = await post(a, '/auth/device/token', { device_code: code.device_code });
      expect(res.status).toBe(503);
      expect(await errorCode(res)).toBe('unavailable');
    });
    expect(await keysOf(a, user.id)).toEqual([]);
    const got = await poll(a, code.device_code);
    expect(got.status).toBe(200);
    expect(got.body.access_token).toMatch(/^svc_/);
    expect(await keysOf(a, user.id)).toHaveLength(1);
    expect((await poll(a, code.device_code)).body).toEqual({ error: 'invalid_grant' });
  });

  it('the store refuses the key\'s record: 503, the document made for it is taken back, the next poll gets a key', async () => {
    const { a, user, code } = await approved();
    const store = a.instance.stores.forRole('sessions');
    const set = store.set.bind(store);
    let refused = 0;
    store.set = (key, value, opts) => {
      if (key.startsWith(`${a.keyPrefix}api-key:`) && refused++ === 0) return Promise.reject(new UnavailableError('store'));
      return set(key, value, opts);
    };
    try {
      expect((await post(a, '/auth/device/token', { device_code: code.device_code })).status).toBe(503);
    } finally {
      store.set = set;
    }
    expect(refused).toBe(1);
    expect(await keysOf(a, user.id)).toEqual([]);
    const got = await poll(a, code.device_code);
    expect(got.status).toBe(200);
    expect((await a.fetch('/auth/session', { headers: { authorization: `Bearer ${got.body.access_token}` } })).status).toBe(200);
    expect(await keysOf(a, user.id)).toHaveLength(1);
  });

  it('reading the user again fails, or using the code up does: 503, the key made is taken back, the next poll gets one', async () => {
    for (const part of ['users', 'getDel'] as const) {
      const { a, user, code } = await approved();
      const target = part === 'users' ? a.instance.auth.users : a.instance.stores.forRole('sessions');
      const name = part === 'users' ? 'findById' : 'getDel';
      // findById: the poll reads the user before the key, issueApiKey again after it: fail the second read
      let calls = 0;
      const original = (target as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[name]!.bind(target);
      (target as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => (++calls === (part === 'users' ? 2 : 1) ? Promise.reject(new UnavailableError(part === 'users' ? 'db' : 'store')) : original(...args));
      try {
        expect((await post(a, '/auth/device/token', { device_code: code.device_code })).status, part).toBe(503);
      } finally {
        (target as unknown as Record<string, unknown>)[name] = original;
      }
      expect(await keysOf(a, user.id), part).toEqual([]);
      const got = await poll(a, code.device_code);
      expect(got.status, part).toBe(200);
      expect(await keysOf(a, user.id), part).toHaveLength(1);
      const page = await a.instance.auth.audit.query({ userId: user.id, limit: 50 });
      expect(page.items.filter((r) => r.type === 'login.succeeded' && r.details.method === 'device'), part).toHaveLength(1);
    }
  });
});

describe.runIf(redisUrl)('two instances on one Redis', () => {
  it('two polls racing after the approval, one on each instance, give one key', async () => {
    const db = EmbeddedDatabase.inMemory();
    const a = await app({ db });
    const b = await app({ db, config: { auth: { store: { keyPrefix: a.keyPrefix } } } });
    const { client, user } = await loggedIn(a);
    for (let round = 0; round < 5; round++) {
      const code = await start(a);
      expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } })).status).toBe(204);
      const [x, y] = await Promise.all([poll(a, code.device_code), poll(b, code.device_code)]);
      expect([x.status, y.status].sort()).toEqual([200, 400]);
      // the other poll came while the key was being made (slow_down) or after (used: invalid_grant)
      expect(['slow_down', 'invalid_grant']).toContain([x, y].find((r) => r.status === 400)!.body.error);
      expect((await poll(b, code.device_code)).body).toEqual({ error: 'invalid_grant' });
    }
    expect(await a.instance.auth.apiKeys.list(user.id)).toHaveLength(5);
  });

  it('an approval and a denial racing on two instances: one decision wins', async () => {
    const db = EmbeddedDatabase.inMemory();
    const a = await app({ db });
    const b = await app({ db, config: { auth: { store: { keyPrefix: a.keyPrefix } } } });
    const { user } = await loggedIn(a);
    const onA = a.client();
    const onB = b.client();
    expect((await onA.login(user.email, user.password)).status).toBe(200);
    expect((await onB.login(user.email, user.password)).status).toBe(200);
    const code = await start(a);
    const [x, y] = await Promise.all([
      onA.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code.user_code } }),
      onB.fetch('/auth/device/deny', { method: 'POST', json: { user_code: code.user_code } }),
    ]);
    expect([x.status, y.status].sort()).toEqual([204, 404]);
    const got = await poll(b, code.device_code);
    expect(got.status === 200 ? 'approved' : got.body.error).toBe(x.status === 204 ? 'approved' : 'access_denied');
  });
});
