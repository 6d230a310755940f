// Users and admins (CONTRACT sections 1, 3 and 4): the admin-only users API, the last-admin guard,
// the bootstrap admin, `global.requireAuthentication`, `authenticate` and the `can()` resolver
// chain as plugin authors use them. Embedded store, plus one Redis run of the main flow.

import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureAdmin } from '../../src/auth/bootstrap.ts';
import { UserService } from '../../src/auth/users.ts';
import { loadConfig } from '../../src/config/load.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import type { AppEnv } from '../../src/http/env.ts';
import { defineRoute, mountRoutes, type RouteDefinition } from '../../src/http/route.ts';
import { createApp } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { ResponseLog } from '../support/auth.ts';
import { startReadySvc } from '../support/spawn.ts';

const redisUrl = inject('redisUrl');
const USER_KEYS = ['email', 'email_verified', 'firstname', 'id', 'isAdmin', 'lastLoginAt', 'lastname', 'oauthAccounts', 'settings'];
const uniqueEmail = (tag = 'u') => `${tag}-${randomUUID().slice(0, 8)}@example.com`;

async function loggedIn(t: TestApp, opts: { admin?: boolean } = {}) {
  const user = await t.createUser(opts);
  const c = t.client();
  expect((await c.login(user.email, user.password)).status).toBe(200);
  return { user, c };
}

async function errorCode(res: Response): Promise<string | undefined> {
  return ((await res.json()) as { error?: { code: string } }).error?.code;
}

/** The flow an operator goes through; run on both stores. */
async function mainFlow(t: TestApp, admin: TestClient, log: ResponseLog) {
  log.wrap(admin, 'sid_app');
  const email = uniqueEmail('Main');
  const created = await admin.fetch('/auth/users', { method: 'POST', json: { email, password: 'first password', firstname: 'Ada', lastname: 'Lovelace' } });
  expect(created.status).toBe(201);
  let user = await created.json();
  expect(Object.keys(user).sort()).toEqual(USER_KEYS);
  expect(user).toMatchObject({ email: email.toLowerCase(), firstname: 'Ada', lastname: 'Lovelace', isAdmin: false, email_verified: false, oauthAccounts: [], lastLoginAt: null, settings: {} });

  // The new user logs in; the users API and the session agree on the user's shape.
  const u = log.wrap(t.client(), 'sid_app');
  expect((await u.login(email, 'first password')).status).toBe(200);
  const fromSession = (await (await u.fetch('/auth/session?expand=user')).json()).user;
  expect(fromSession).toStrictEqual({ ...user, lastLoginAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }); // the login is recorded
  user = fromSession;
  expect((await u.fetch('/auth/users')).status).toBe(403);

  const got = await admin.fetch(`/auth/users/${user.id}`);
  expect(got.status).toBe(200);
  expect(await got.json()).toStrictEqual(user);

  const listed = await admin.fetch(`/auth/users?email=${encodeURIComponent(email.toUpperCase())}`);
  expect(await listed.json()).toStrictEqual({ items: [user], offset: 0, limit: 50, total: 1 });

  const patched = await admin.fetch(`/auth/users/${user.id}`, { method: 'PATCH', json: { lastname: 'King', isAdmin: true } });
  expect(patched.status).toBe(200);
  expect(await patched.json()).toStrictEqual({ ...user, lastname: 'King', isAdmin: true });
  expect((await u.fetch('/auth/users')).status).toBe(200);

  const deleted = await admin.fetch(`/auth/users/${user.id}`, { method: 'DELETE' });
  expect(deleted.status).toBe(204);
  expect(await deleted.text()).toBe('');
  expect((await u.fetch('/auth/session')).status).toBe(401);
  const gone = await admin.fetch(`/auth/users/${user.id}`);
  expect(gone.status).toBe(404);
  expect(await errorCode(gone)).toBe('not_found');
  expect((await u.login(email, 'first password')).status).toBe(401);
}

for (const [storeName, url] of [['embedded store', undefined], ['Redis', redisUrl || null]] as const) {
  describe.skipIf(url === null)(`users API main flow (${storeName})`, () => {
    let t: TestApp;
    afterAll(() => t?.close());
    it('create, log in, read, list, patch, delete', async () => {
      t = await createTestApp({ redisUrl: url ?? undefined });
      const { c } = await loggedIn(t, { admin: true });
      const log = new ResponseLog();
      await mainFlow(t, c, log);
      expect(log.leaks()).toEqual([]);
    });
  });
}

describe('users API (embedded store)', () => {
  let t: TestApp;
  let admin: TestClient;
  let plain: TestClient;
  const log = new ResponseLog();

  beforeAll(async () => {
    t = await createTestApp();
    admin = log.wrap((await loggedIn(t, { admin: true })).c, 'sid_app');
    plain = log.wrap((await loggedIn(t)).c, 'sid_app');
  });
  afterAll(() => t?.close());

  const post = (body: unknown, c = admin) => c.fetch('/auth/users', { method: 'POST', json: body });

  describe('POST /auth/users', () => {
    it('201 with the expand=user shape; isAdmin and names as given', async () => {
      const email = uniqueEmail('New');
      const res = await post({ email, password: '12345678', isAdmin: true, firstname: ' Grace ', lastname: 'Hopper' });
      expect(res.status).toBe(201);
      const body = await res.json();
      expect(Object.keys(body).sort()).toEqual(USER_KEYS);
      expect(body).toMatchObject({ email: email.toLowerCase(), isAdmin: true, firstname: 'Grace', lastname: 'Hopper' });
      expect(typeof body.id).toBe('string');
      expect((await t.client().login(email, '12345678')).status).toBe(200);
    });

    it('201 for 8 characters that take more UTF-16 units (emoji, accents), and for names in any script', async () => {
      const res = await post({ email: uniqueEmail('chars'), password: '😀😀😀😀😀😀😀😀', firstname: 'Zoë', lastname: '山田' });
      expect(res.status).toBe(201);
      expect(await res.json()).toMatchObject({ firstname: 'Zoë', lastname: '山田' });
    });

    it('409 user_exists for an existing email, in any casing', async () => {
      const email = uniqueEmail('dup');
      expect((await post({ email, password: 'password1' })).status).toBe(201);
      for (const again of [email, email.toUpperCase(), ` ${email} `]) {
        const res = await post({ email: again, password: 'password2' });
        expect(res.status, again).toBe(409);
        expect(await errorCode(res)).toBe('user_exists');
      }
      expect((await (await admin.fetch(`/auth/users?email=${email}`)).json()).total).toBe(1);
    });

    it.each([
      ['a 7-character password', { password: '1234567' }, 'password'],
      ['a bad email', { email: 'not an email' }, 'email'],
      ['an email without a domain', { email: 'someone@' }, 'email'],
      ['an unknown field', { role: 'admin' }, 'role'],
      ['a missing password', { password: undefined }, 'password'],
      ['a missing email', { email: undefined }, 'email'],
      ['isAdmin that is not a boolean', { isAdmin: 'yes' }, 'isAdmin'],
      ['a password that is not a string', { password: 12345678 }, 'password'],
      ['a password of 4 emoji (8 UTF-16 units, 4 characters)', { password: '😀😀😀😀' }, 'password'],
      ['a name with a line break', { firstname: 'Ann\r\nBcc: x' }, 'firstname'],
      ['a name with a NUL', { lastname: 'Ann\u0000' }, 'lastname'],
      ['a name with half a surrogate pair', { firstname: 'Ann\ud800' }, 'firstname'],
    ])('400 validation_failed for %s', async (_name, change, path) => {
      const body = { email: uniqueEmail('bad'), password: 'password1', ...change };
      const res = await post(JSON.parse(JSON.stringify(body)));
      expect(res.status).toBe(400);
      const json = await res.json();
      expect(json.error.code).toBe('validation_failed');
      expect(json.error.details.map((d: { path: string }) => d.path)).toContain(path);
      expect(new Set(json.error.details.map((d: { path: string }) => d.path)).size, 'one detail per problem').toBe(json.error.details.length);
      if (typeof body.email === 'string' && body.email.includes('@example.com')) {
        expect((await (await admin.fetch(`/auth/users?email=${body.email}`)).json()).total).toBe(0);
      }
    });
  });

  describe('GET /auth/users', () => {
    beforeAll(async () => {
      // Password-less users are cheap (no hashing): enough of them to fill more than one page.
      for (let i = 0; i < 55; i++) await t.instance.auth.users.create({ email: uniqueEmail(`bulk${i}`), createdVia: 'admin' });
    });

    it('answers {items,offset,limit,total} with limit 50 by default', async () => {
      const res = await admin.fetch('/auth/users');
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(Object.keys(body).sort()).toEqual(['items', 'limit', 'offset', 'total']);
      expect(body.offset).toBe(0);
      expect(body.limit).toBe(50);
      expect(body.items).toHaveLength(50);
      expect(body.total).toBeGreaterThanOrEqual(57);
      for (const item of body.items) expect(Object.keys(item).sort()).toEqual(USER_KEYS);
    });

    it('accepts limit up to 500 and refuses 501, 0 and non-numbers', async () => {
      const max = await (await admin.fetch('/auth/users?limit=500')).json();
      expect(max.limit).toBe(500);
      expect(max.items).toHaveLength(max.total);
      for (const q of ['limit=501', 'limit=0', 'limit=abc', 'limit=-1', 'offset=-1', 'offset=x', 'email=nope', 'sort=email']) {
        const res = await admin.fetch(`/auth/users?${q}`);
        expect(res.status, q).toBe(400);
        expect(await errorCode(res)).toBe('validation_failed');
      }
    });

    it('pages with offset and limit: pages do not overlap and cover every user', async () => {
      const all = await (await admin.fetch('/auth/users?limit=500')).json();
      const seen: string[] = [];
      for (let offset = 0; offset < all.total; offset += 7) {
        const page = await (await admin.fetch(`/auth/users?offset=${offset}&limit=7`)).json();
        expect(page.offset).toBe(offset);
        expect(page.limit).toBe(7);
        expect(page.total).toBe(all.total);
        expect(page.items.length).toBe(Math.min(7, all.total - offset));
        seen.push(...page.items.map((u: { id: string }) => u.id));
      }
      expect(new Set(seen).size).toBe(all.total);
      expect(seen).toEqual(all.items.map((u: { id: string }) => u.id));
      const past = await (await admin.fetch(`/auth/users?offset=${all.total + 5}`)).json();
      expect(past.items).toEqual([]);
      expect(past.total).toBe(all.total);
    });

    it('filters by email (case-insensitive); an unknown email lists nothing', async () => {
      const target = await t.createUser({ email: uniqueEmail('filter') });
      const res = await (await admin.fetch(`/auth/users?email=${encodeURIComponent(target.email.toUpperCase())}`)).json();
      expect(res.total).toBe(1);
      expect(res.items.map((u: { id: string }) => u.id)).toEqual([target.id]);
      const none = await (await admin.fetch(`/auth/users?email=${uniqueEmail('none')}`)).json();
      expect(none).toEqual({ items: [], offset: 0, limit: 50, total: 0 });
    });
  });

  describe('GET, PATCH, DELETE /auth/users/:id', () => {
    it('GET 200 user; PATCH 200 with the change kept; DELETE 204', async () => {
      const u = await t.createUser();
      const got = await admin.fetch(`/auth/users/${u.id}`);
      expect(got.status).toBe(200);
      const body = await got.json();
      expect(Object.keys(body).sort()).toEqual(USER_KEYS);
      expect(body.email).toBe(u.email);

      const patched = await admin.fetch(`/auth/users/${u.id}`, { method: 'PATCH', json: { firstname: 'Fi', lastname: 'La' } });
      expect(patched.status).toBe(200);
      expect(await patched.json()).toStrictEqual({ ...body, firstname: 'Fi', lastname: 'La' });
      expect((await (await admin.fetch(`/auth/users/${u.id}`)).json()).firstname).toBe('Fi');

      const del = await admin.fetch(`/auth/users/${u.id}`, { method: 'DELETE' });
      expect(del.status).toBe(204);
      expect((await admin.fetch(`/auth/users/${u.id}`)).status).toBe(404);
    });

    it('PATCH refuses unknown fields, a short password and the email (not patchable)', async () => {
      const u = await t.createUser();
      // `[]` too: valibot's object check let an array through as an empty change (200).
      for (const body of [{ role: 'x' }, { password: '1234567' }, { email: uniqueEmail() }, { isAdmin: 'true' }, [], [{ firstname: 'x' }]]) {
        const res = await admin.fetch(`/auth/users/${u.id}`, { method: 'PATCH', json: body });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(await errorCode(res)).toBe('validation_failed');
      }
      expect((await t.client().login(u.email, u.password)).status).toBe(200);
    });

    it('404 not_found for an unknown id on GET, PATCH and DELETE', async () => {
      const id = randomUUID();
      for (const [method, json] of [['GET'], ['PATCH', { firstname: 'x' }], ['DELETE']] as const) {
        const res = await admin.fetch(`/auth/users/${id}`, { method, ...(json ? { json } : {}) });
        expect(res.status, method).toBe(404);
        expect(await errorCode(res)).toBe('not_found');
      }
    });

    it('DELETE ends the user\'s sessions', async () => {
      const u = await t.createUser();
      const c1 = t.client();
      const c2 = t.client();
      await c1.login(u.email, u.password);
      await c2.login(u.email, u.password);
      expect((await admin.fetch(`/auth/users/${u.id}`, { method: 'DELETE' })).status).toBe(204);
      expect((await c1.fetch('/auth/session')).status).toBe(401);
      expect((await c2.fetch('/auth/session')).status).toBe(401);
      expect(await t.instance.stores.forRole('sessions').sMembers(`${t.keyPrefix}user-sessions:${u.id}`)).toEqual([]);
    });
  });

  describe('access', () => {
    const routes = (id: string) =>
      [
        ['POST', '/auth/users', { email: uniqueEmail('acc'), password: 'password1' }],
        ['GET', '/auth/users', undefined],
        ['GET', `/auth/users/${id}`, undefined],
        ['PATCH', `/auth/users/${id}`, { firstname: 'Hacked' }],
        ['DELETE', `/auth/users/${id}`, undefined],
      ] as const;

    it('a non-admin gets 403 forbidden on every users route, and nothing changes', async () => {
      const victim = await t.createUser();
      for (const [method, path, json] of routes(victim.id)) {
        const res = await plain.fetch(path, { method, ...(json ? { json } : {}) });
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(await errorCode(res)).toBe('forbidden');
      }
      const still = await (await admin.fetch(`/auth/users/${victim.id}`)).json();
      expect(still.firstname).toBe('');
    });

    it('an anonymous caller gets 401 unauthenticated on every users route', async () => {
      const victim = await t.createUser();
      for (const [method, path, json] of routes(victim.id)) {
        const res = await t.client().fetch(path, { method, ...(json ? { json } : {}) });
        expect(res.status, `${method} ${path}`).toBe(401);
        expect(await errorCode(res)).toBe('unauthenticated');
      }
      expect((await admin.fetch(`/auth/users/${victim.id}`)).status).toBe(200);
    });
  });

  it('no response of this suite contained a password hash or a session id', () => {
    expect(log.bodies.length).toBeGreaterThan(40);
    expect(log.leaks()).toEqual([]);
  });
});

describe('the last administrator', () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it('cannot be demoted or deleted (409 last_admin) until another admin exists', async () => {
    t = await createTestApp();
    const { user: only, c } = await loggedIn(t, { admin: true });
    for (const [method, json] of [['PATCH', { isAdmin: false }], ['DELETE', undefined]] as const) {
      const res = await c.fetch(`/auth/users/${only.id}`, { method, ...(json ? { json } : {}) });
      expect(res.status, method).toBe(409);
      expect(await errorCode(res)).toBe('last_admin');
    }
    expect((await (await c.fetch(`/auth/users/${only.id}`)).json()).isAdmin).toBe(true);
    expect((await c.fetch('/auth/users')).status).toBe(200);

    // Non-admins are not guarded; a second admin lifts the guard for the first.
    const plain = await t.createUser();
    expect((await c.fetch(`/auth/users/${plain.id}`, { method: 'PATCH', json: { isAdmin: false } })).status).toBe(200);
    const second = await c.fetch('/auth/users', { method: 'POST', json: { email: uniqueEmail('second'), password: 'password1', isAdmin: true } });
    const secondId = (await second.json()).id;
    expect((await c.fetch(`/auth/users/${only.id}`, { method: 'PATCH', json: { isAdmin: false } })).status).toBe(200);
    // Now the second one is the last admin; the first is no longer an admin.
    expect((await c.fetch('/auth/users')).status).toBe(403);
    const c2 = t.client();
    await c2.login((await t.instance.auth.users.get(secondId)).email, 'password1');
    const res = await c2.fetch(`/auth/users/${secondId}`, { method: 'DELETE' });
    expect(res.status).toBe(409);
    expect(await errorCode(res)).toBe('last_admin');
  });
});

describe('bootstrap admin (ensureAdmin)', () => {
  function capture() {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        cb();
      },
    });
    return { lines, logger: createLogger('info', stream) };
  }
  const config = async (env: Record<string, string> = {}) => (await loadConfig({ SVC_APP_PATH: '/tmp', ...env }, { raw: {} })).config;
  const apps: TestApp[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
  });

  it('embedded db without an admin: creates admin@localhost and logs its password once, not again', async () => {
    const db = EmbeddedDatabase.inMemory();
    const users = await UserService.open(db);
    const { lines, logger } = capture();
    await ensureAdmin(users, await config(), 'embedded', logger);
    const admin = await users.findByEmail('admin@localhost');
    expect(admin?.tags).toContain('ADMIN');
    const line = lines.find((l) => l.includes('admin@localhost') && /password/i.test(l));
    expect(line).toBeDefined();
    const password = /password (\S+)/.exec(JSON.parse(line!).msg)?.[1];
    expect(password).toBeDefined();
    expect(password!.length).toBeGreaterThanOrEqual(16);
    expect(lines.filter((l) => l.includes(password!))).toHaveLength(1);

    await ensureAdmin(users, await config(), 'embedded', logger);
    expect(lines.filter((l) => l.includes(password!))).toHaveLength(1);
    expect(await users.countAdmins()).toBe(1);

    // The printed password logs in as an admin.
    const t = await createTestApp({ db });
    apps.push(t);
    const c = t.client();
    const res = await c.login('admin@localhost', password!);
    expect(res.status).toBe(200);
    expect((await res.json()).user.isAdmin).toBe(true);
  });

  it('LOG_LEVEL=error (the real process): the bootstrap password, the one chance to learn it, still reaches stderr, and logs in', async () => {
    const svc = await startReadySvc({ env: { LOG_LEVEL: 'error', SVC_ADMIN_EMAIL: undefined, SVC_ADMIN_PASSWORD: undefined } });
    try {
      const password = /^svc: bootstrap admin created: email admin@localhost password (\S+) \(shown once/m.exec(svc.stderr())?.[1];
      expect(password, svc.output()).toBeDefined();
      const res = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'admin@localhost', password }) });
      expect(res.status).toBe(200);
      // The peer's address as the runtime's server reports it (on Bun, asked for only when read).
      const cookie = res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
      const diag = await fetch(`${svc.url}/auth/diagnostics`, { headers: { cookie } });
      expect(diag.status).toBe(200);
      expect(((await diag.json()) as { seen: unknown }).seen).toMatchObject({ clientIp: '127.0.0.1', forwarded: false });
    } finally {
      await svc.stop();
    }
  });

  it('SVC_ADMIN_EMAIL + SVC_ADMIN_PASSWORD create that admin, and its password is never logged', async () => {
    const db = EmbeddedDatabase.inMemory();
    const users = await UserService.open(db);
    const { lines, logger } = capture();
    const password = `boot-${randomUUID()}`;
    await ensureAdmin(users, await config({ SVC_ADMIN_EMAIL: 'Ops@Example.com', SVC_ADMIN_PASSWORD: password }), 'embedded', logger);
    expect(await users.findByEmail('admin@localhost')).toBeNull();
    expect((await users.findByEmail('ops@example.com'))?.tags).toContain('ADMIN');
    expect(lines.join('\n')).not.toContain(password);
    const t = await createTestApp({ db });
    apps.push(t);
    expect((await t.client().login('ops@example.com', password)).status).toBe(200);
  });

  it('SVC_ADMIN_EMAIL naming an existing user promotes that user', async () => {
    const db = EmbeddedDatabase.inMemory();
    const users = await UserService.open(db);
    const existing = await users.create({ email: 'boss@example.com', password: 'keep this password', createdVia: 'cli' });
    await ensureAdmin(users, await config({ SVC_ADMIN_EMAIL: 'boss@example.com', SVC_ADMIN_PASSWORD: 'another password' }), 'embedded', capture().logger);
    expect((await users.get(existing._id)).tags).toContain('ADMIN');
    expect(await users.checkPassword('boss@example.com', 'keep this password')).not.toBeNull();
    await db.close();
  });

  it('does nothing when an admin exists; on MongoDB without the variables it only warns', async () => {
    const db = EmbeddedDatabase.inMemory();
    const users = await UserService.open(db);
    const { lines, logger } = capture();
    await ensureAdmin(users, await config(), 'mongo', logger);
    expect(await users.countAdmins()).toBe(0);
    expect(lines.some((l) => /SVC_ADMIN_EMAIL/.test(l))).toBe(true);
    await users.create({ email: 'existing-admin@example.com', isAdmin: true, createdVia: 'cli' });
    await ensureAdmin(users, await config(), 'embedded', logger);
    expect(await users.findByEmail('admin@localhost')).toBeNull();
    expect(await users.countAdmins()).toBe(1);
    await db.close();
  });

  it('refuses a SVC_ADMIN_PASSWORD shorter than 8 characters', async () => {
    const db = EmbeddedDatabase.inMemory();
    const users = await UserService.open(db);
    await expect(ensureAdmin(users, await config({ SVC_ADMIN_EMAIL: 'a@example.com', SVC_ADMIN_PASSWORD: 'short' }), 'embedded', capture().logger)).rejects.toThrow(
      /SVC_ADMIN_PASSWORD/,
    );
    expect(await users.countAdmins()).toBe(0);
    await db.close();
  });
});

describe('middleware for plugin authors', () => {
  let t: TestApp;
  const apps: TestApp[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
  });
  beforeAll(async () => {
    t = await createTestApp();
    apps.push(t);
  });

  /**
   * The real app of an instance with one fixture plugin mounted at `/fixture`, as the plugin loader
   * mounts plugins: its routes mounted the one way (`mountRoutes`), plus a plain Hono route.
   */
  function withPlugin(app: TestApp, routes: RouteDefinition[]) {
    const plugin = new Hono<AppEnv>();
    mountRoutes(plugin, routes);
    plugin.get('/plain', (c) => c.json({ plain: true }));
    const hono = createApp(app.instance, [{ key: 'fixture', prefix: '/fixture', source: 'test fixture', app: plugin }]);
    return async (path: string, client?: TestClient, headers: Record<string, string> = {}) => {
      const cookie: Record<string, string> = client?.cookies.size ? { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {};
      return hono.request(path, { headers: { ...cookie, ...headers } });
    };
  }

  const whoami = (path: string, extra: Pick<RouteDefinition, 'onRequest' | 'config'> = {}) =>
    defineRoute({
      method: 'GET',
      path,
      schema: { summary: `fixture ${path}` },
      handler: (c) => c.json({ authUser: c.get('authUser') ?? null }),
      ...extra,
    }) as RouteDefinition;

  it('global.requireAuthentication defaults to true: /health stays public, users routes need a session', async () => {
    expect((await t.fetch('/health')).status).toBe(200);
    expect((await t.fetch('/auth/users')).status).toBe(401);
  });

  it('with requireAuthentication, a plugin route not marked public refuses anonymous callers with 401', async () => {
    const request = withPlugin(t, [whoami('/private'), whoami('/open', { config: { public: true } })]);
    for (const path of ['/fixture/private', '/fixture/plain', '/api/fixture/private']) {
      const anon = await request(path);
      expect(anon.status, path).toBe(401);
      expect(await errorCode(anon)).toBe('unauthenticated');
    }
    expect(await errorCode(await request('/fixture/private', undefined, { authorization: 'Bearer old' }))).toBe('legacy_token');
    const open = await request('/fixture/open');
    expect(open.status).toBe(200);
    expect(await open.json()).toEqual({ authUser: null });
    expect((await request('/fixture/no-such-route')).status).toBe(404);

    const { user, c } = await loggedIn(t);
    const res = await request('/fixture/private', c);
    expect(res.status).toBe(200);
    // c.get('authUser') is exactly {userId,isAdmin,provider}.
    expect(await res.json()).toStrictEqual({ authUser: { userId: user.id, isAdmin: false, provider: 'password' } });
    expect((await request('/fixture/plain', c)).status).toBe(200);
  });

  it('with global.requireAuthentication false, anonymous callers reach such routes', async () => {
    const open = await createTestApp({ config: { global: { requireAuthentication: false } } });
    apps.push(open);
    const request = withPlugin(open, [whoami('/private')]);
    expect((await request('/fixture/private')).status).toBe(200);
    expect((await request('/fixture/plain')).status).toBe(200);
    // Routes with their own authenticate hook still need a session.
    expect((await open.fetch('/auth/users')).status).toBe(401);
  });

  it('authenticate(): 401 anonymous; authenticate({admin:true}): 403 forbidden for non-admins, 200 for admins', async () => {
    const request = withPlugin(t, [
      whoami('/any', { onRequest: t.instance.auth.authenticate(), config: { public: true } }),
      whoami('/admin', { onRequest: t.instance.auth.authenticate({ admin: true }), config: { public: true } }),
    ]);
    const { c: user } = await loggedIn(t);
    const { c: admin } = await loggedIn(t, { admin: true });
    expect(await errorCode(await request('/fixture/any'))).toBe('unauthenticated');
    expect((await request('/fixture/any', user)).status).toBe(200);
    expect((await request('/fixture/admin')).status).toBe(401);
    const refused = await request('/fixture/admin', user);
    expect(refused.status).toBe(403);
    expect(await errorCode(refused)).toBe('forbidden');
    expect((await request('/fixture/admin', admin)).status).toBe(200);
  });

  it('can(): resolvers run in order, the first non-undefined answer wins; all abstain -> admins true, others false', async () => {
    const a = await createTestApp();
    apps.push(a);
    const calls: string[] = [];
    a.instance.auth.registerPermissionResolver((p) => {
      calls.push(`r1:${p}`);
      return p === 'first' ? true : undefined;
    });
    a.instance.auth.registerPermissionResolver(async (p, c) => {
      calls.push(`r2:${p}`);
      await new Promise((r) => setTimeout(r, 1));
      if (p === 'second') return false;
      if (p === 'own-only') return c.get('authUser')?.isAdmin === false ? true : undefined;
      return undefined;
    });
    a.instance.auth.registerPermissionResolver((p) => {
      calls.push(`r3:${p}`);
      return p === 'second' || p === 'third' ? true : undefined;
    });
    const request = withPlugin(a, [
      defineRoute({
        method: 'GET',
        path: '/can/:perm',
        config: { public: true },
        schema: { summary: 'fixture: can()' },
        handler: async (c) => c.json({ allowed: await c.get('can')(c.req.param('perm') ?? '') }),
      }) as RouteDefinition,
    ]);
    const { c: user } = await loggedIn(a);
    const { c: admin } = await loggedIn(a, { admin: true });
    const allowed = async (perm: string, who?: TestClient) => {
      calls.length = 0;
      const res = await request(`/fixture/can/${perm}`, who);
      expect(res.status).toBe(200);
      return ((await res.json()) as { allowed: boolean }).allowed;
    };

    expect(await allowed('first', user)).toBe(true);
    expect(calls).toEqual(['r1:first']);
    expect(await allowed('second', admin)).toBe(false);
    expect(calls).toEqual(['r1:second', 'r2:second']);
    expect(await allowed('third', user)).toBe(true);
    expect(calls).toEqual(['r1:third', 'r2:third', 'r3:third']);
    expect(await allowed('own-only', user)).toBe(true);
    expect(await allowed('own-only', admin)).toBe(true); // r2 abstains for admins, nobody decides: admin default

    expect(await allowed('nobody-decides', admin)).toBe(true);
    expect(calls).toEqual(['r1:nobody-decides', 'r2:nobody-decides', 'r3:nobody-decides']);
    expect(await allowed('nobody-decides', user)).toBe(false);
    expect(await allowed('nobody-decides')).toBe(false);
  });
});
