// Sessions (CONTRACT section 3, SPEC.md "Session" and "Authentication" rules 1-3): the cookie, what
// the store holds, login/logout/logout-all, GET /auth/session, sliding/absolute TTL, maxLifetime,
// the one-store-command hot path, forged cookies, and how user changes reach live sessions.
// Every suite runs against the embedded store and against Redis.

import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestApp, type TestApp, type TestAppOptions, type TestClient } from '../support/app.ts';
import {
  commandCalls,
  dumpStore,
  indexKey,
  ISO_RE,
  ResponseLog,
  SESSION_ID_RE,
  sessionCookie,
  sessionKey,
  sessionsStore,
  setCookies,
  sha256hex,
  sleep,
  startPrivateRedis,
} from '../support/auth.ts';

const redisUrl = inject('redisUrl');
const DAY = 86400;

for (const [storeName, url] of [['embedded store', undefined], ['Redis', redisUrl || null]] as const) {
  describe.skipIf(url === null)(`sessions (${storeName})`, () => {
    const log = new ResponseLog();
    const apps: TestApp[] = [];
    let t: TestApp;

    async function app(opts: Omit<TestAppOptions, 'redisUrl'> = {}): Promise<TestApp> {
      const a = await createTestApp({ redisUrl: url ?? undefined, ...opts });
      apps.push(a);
      return a;
    }
    const client = (a: TestApp = t): TestClient => log.wrap(a.client(), a.instance.auth.cookieName);

    async function loggedIn(a: TestApp = t, opts: { admin?: boolean } = {}) {
      const user = await a.createUser(opts);
      const c = client(a);
      const res = await c.login(user.email, user.password);
      expect(res.status).toBe(200);
      return { user, c, id: sessionCookie(a, c)! };
    }
    const status = async (c: TestClient, path = '/auth/session') => (await c.fetch(path)).status;
    /** A request carrying exactly this cookie value (no jar). */
    const withCookie = async (a: TestApp, value: string, path = '/auth/session') => {
      const res = await a.fetch(path, { headers: { cookie: `${a.instance.auth.cookieName}=${value}` } });
      await log.record(path, res, a.instance.auth.cookieName);
      return res;
    };

    beforeAll(async () => {
      t = await app();
    });
    afterAll(async () => {
      await Promise.all(apps.map((a) => a.close()));
    });

    describe('login', () => {
      it('answers exactly {user:{id,email,firstname,lastname,isAdmin},expiresAt} and sets a 43-char session cookie', async () => {
        const user = await t.createUser();
        const c = client();
        const before = Date.now();
        const res = await c.login(user.email, user.password);
        expect(res.status).toBe(200);
        const body = await res.json();
        expect(Object.keys(body).sort()).toEqual(['expiresAt', 'user']);
        expect(body.user).toStrictEqual({ id: user.id, email: user.email, firstname: '', lastname: '', isAdmin: false });
        expect(body.expiresAt).toMatch(ISO_RE);
        const expiresAt = Date.parse(body.expiresAt);
        expect(expiresAt).toBeGreaterThanOrEqual(before + DAY * 1000 - 1000);
        expect(expiresAt).toBeLessThanOrEqual(Date.now() + DAY * 1000 + 1000);

        const cookies = setCookies(res, 'sid_app');
        expect(cookies).toHaveLength(1);
        const [cookie] = cookies;
        expect(cookie!.value).toMatch(SESSION_ID_RE);
        expect(Buffer.from(cookie!.value, 'base64url')).toHaveLength(32);
        expect([...cookie!.attrs.keys()].sort()).toEqual(['httponly', 'max-age', 'path', 'samesite', 'secure']);
        expect(cookie!.attrs.get('path')).toBe('/');
        expect(cookie!.attrs.get('samesite')).toBe('Strict');
        expect(cookie!.attrs.get('max-age')).toBe(String(DAY));
        expect(cookie!.attrs.has('domain')).toBe(false);
      });

      it('reports an admin as admin', async () => {
        const admin = await t.createUser({ admin: true });
        const res = await client().login(admin.email, admin.password);
        expect((await res.json()).user.isAdmin).toBe(true);
      });

      it('follows auth.cookie: name, secure, sameSite, domain, and Max-Age = auth.session.ttl', async () => {
        const a = await app({ config: { auth: { session: { ttl: 3600 }, cookie: { secure: false, sameSite: 'lax', domain: 'example.test', name: 'sid_x' } } } });
        const { c, id } = await loggedIn(a);
        expect(c.cookies.get('sid_x')).toBe(id);
        expect(c.cookies.has('sid_app')).toBe(false);
        const res = await c.fetch('/auth/session');
        expect(res.status).toBe(200);

        const u = await a.createUser();
        const ok = await client(a).login(u.email, u.password);
        const [cookie] = setCookies(ok, 'sid_x');
        expect(cookie).toBeDefined();
        expect(cookie!.attrs.has('secure')).toBe(false);
        expect(cookie!.attrs.get('samesite')).toBe('Lax');
        expect(cookie!.attrs.get('domain')).toBe('example.test');
        expect(cookie!.attrs.get('max-age')).toBe('3600');
        expect(cookie!.attrs.has('httponly')).toBe(true);
        expect(cookie!.attrs.get('path')).toBe('/');

        // Logout clears the cookie with the same Domain, or the browser would keep the domain cookie.
        const out = await c.fetch('/auth/logout', { method: 'POST' });
        const [cleared] = setCookies(out, 'sid_x');
        expect(cleared!.attrs.get('max-age')).toBe('0');
        expect(cleared!.attrs.get('domain')).toBe('example.test');
        expect(cleared!.attrs.get('path')).toBe('/');
      });

      it('sameSite "none" comes with Secure', async () => {
        const a = await app({ config: { auth: { cookie: { sameSite: 'none' } } } });
        const u = await a.createUser();
        const [cookie] = setCookies(await client(a).login(u.email, u.password), 'sid_app');
        expect(cookie!.attrs.get('samesite')).toBe('None');
        expect(cookie!.attrs.has('secure')).toBe(true);
      });

      it('SVC_AUTH_COOKIE_NAME overrides auth.cookie.name, for setting and for reading the cookie', async () => {
        const a = await app({ config: { auth: { cookie: { name: 'sid_x' } } }, env: { SVC_AUTH_COOKIE_NAME: 'sid_env' } });
        const u = await a.createUser();
        const c = client(a);
        const res = await c.login(u.email, u.password);
        expect(setCookies(res, 'sid_env')).toHaveLength(1);
        expect(setCookies(res, 'sid_x')).toHaveLength(0);
        const id = c.cookies.get('sid_env')!;
        expect((await a.fetch('/auth/session', { headers: { cookie: `sid_env=${id}` } })).status).toBe(200);
        expect((await a.fetch('/auth/session', { headers: { cookie: `sid_x=${id}` } })).status).toBe(401);
      });

      it('gives a new id on every login and destroys the session whose cookie was sent along', async () => {
        const store = sessionsStore(t);
        const { user, c, id: first } = await loggedIn();
        const again = await c.login(user.email, user.password);
        expect(again.status).toBe(200);
        const second = sessionCookie(t, c)!;
        expect(second).toMatch(SESSION_ID_RE);
        expect(second).not.toBe(first);
        expect((await withCookie(t, first)).status).toBe(401);
        expect(await store.get(sessionKey(t, first))).toBeNull();
        expect(await store.sMembers(indexKey(t, user.id))).toEqual([sha256hex(second)]);
        expect(await status(c)).toBe(200);

        // Logging in as someone else with A's cookie in the jar ends A's session as well.
        const other = await t.createUser();
        expect((await c.login(other.email, other.password)).status).toBe(200);
        expect((await withCookie(t, second)).status).toBe(401);
        expect(await store.sMembers(indexKey(t, user.id))).toEqual([]);
        expect((await (await c.fetch('/auth/session')).json()).userId).toBe(other.id);
      });

      it('serves the same routes under /api', async () => {
        const user = await t.createUser();
        const c = client();
        expect((await c.fetch('/api/auth/login', { method: 'POST', json: { email: user.email, password: user.password } })).status).toBe(200);
        expect(await status(c, '/api/auth/session')).toBe(200);
        expect((await c.fetch('/api/auth/logout', { method: 'POST' })).status).toBe(204);
        expect(await status(c, '/api/auth/session')).toBe(401);
      });
    });

    describe('what the store holds', () => {
      it('only auth:session:<sha256 of the id> with {userId,isAdmin,provider,createdAt,expiresAt}, and the hash in the user index', async () => {
        const a = await app();
        const store = sessionsStore(a);
        const { user, id } = await loggedIn(a, { admin: true });
        const hash = sha256hex(id);

        const raw = await store.get(`${a.keyPrefix}session:${hash}`);
        expect(raw).not.toBeNull();
        const record = JSON.parse(raw!);
        expect(Object.keys(record).sort()).toEqual(['createdAt', 'expiresAt', 'isAdmin', 'provider', 'userId']);
        expect(record).toMatchObject({ userId: user.id, isAdmin: true, provider: 'password' });
        expect(new Date(record.expiresAt).getTime() - new Date(record.createdAt).getTime()).toBe(DAY * 1000);
        expect(Math.abs(new Date(record.createdAt).getTime() - Date.now())).toBeLessThan(5000);
        const ttl = await store.ttl(`${a.keyPrefix}session:${hash}`);
        expect(ttl).toBeGreaterThan(DAY - 10);
        expect(ttl).toBeLessThanOrEqual(DAY);

        expect(await store.get(`${a.keyPrefix}session:${id}`)).toBeNull();
        expect(await store.sMembers(`${a.keyPrefix}user-sessions:${user.id}`)).toEqual([hash]);

        // Everything under the prefix: a session key, the index, where the session came from (for
        // GET /auth/sessions), the user's known devices (CONTRACT 14: SHA-256 of device ids), nothing
        // else; the raw id nowhere.
        const dump = await dumpStore(a, url ?? undefined);
        expect([...dump.keys()].sort()).toEqual(
          [`${a.keyPrefix}session:${hash}`, `${a.keyPrefix}user-sessions:${user.id}`, `${a.keyPrefix}session-origin:${hash}`, `${a.keyPrefix}known-devices:${user.id}`].sort(),
        );
        expect(JSON.parse(dump.get(`${a.keyPrefix}known-devices:${user.id}`)!)).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/)]);
        // Where it came from: the IP, the browser, and the SHA-256 of its device id (the one on the known list), for not-me.
        const origin = JSON.parse(dump.get(`${a.keyPrefix}session-origin:${hash}`)!) as Record<string, string>;
        expect(Object.keys(origin).sort()).toEqual(['device', 'deviceHash', 'ip']);
        expect(JSON.parse(dump.get(`${a.keyPrefix}known-devices:${user.id}`)!)).toEqual([origin.deviceHash]);
        for (const [key, value] of dump) {
          expect(key).not.toContain(id);
          expect(value).not.toContain(id);
        }
      });

      it('keeps no raw id in any key or value after several logins, logouts and a failed login', async () => {
        const a = await app();
        const ids: string[] = [];
        const user = await a.createUser();
        for (let i = 0; i < 3; i++) {
          const c = client(a);
          await c.login(user.email, user.password);
          ids.push(sessionCookie(a, c)!);
          if (i === 0) await c.fetch('/auth/logout', { method: 'POST' });
        }
        await client(a).login(user.email, 'wrong password!');
        const dump = await dumpStore(a, url ?? undefined);
        const sessionKeys = [...dump.keys()].filter((k) => k.startsWith(`${a.keyPrefix}session:`));
        expect(sessionKeys.sort()).toEqual(ids.slice(1).map((id) => `${a.keyPrefix}session:${sha256hex(id)}`).sort());
        for (const k of sessionKeys) expect(k).toMatch(new RegExp(`^${a.keyPrefix}session:[0-9a-f]{64}$`));
        for (const [key, value] of dump) {
          for (const id of ids) {
            expect(key).not.toContain(id);
            expect(value).not.toContain(id);
          }
        }
      });
    });

    describe('logout and logout-all', () => {
      it('logout: 204, the cookie cleared with Max-Age=0, the session gone from the store and the index', async () => {
        const store = sessionsStore(t);
        const { user, c, id } = await loggedIn();
        const res = await c.fetch('/auth/logout', { method: 'POST' });
        expect(res.status).toBe(204);
        expect(await res.text()).toBe('');
        const [cleared] = setCookies(res, 'sid_app');
        expect(cleared).toBeDefined();
        expect(cleared!.value).toBe('');
        expect(cleared!.attrs.get('max-age')).toBe('0');
        expect(cleared!.attrs.get('path')).toBe('/');
        expect(cleared!.attrs.get('samesite')).toBe('Strict'); // as it was set (CONTRACT 3)
        expect(cleared!.attrs.has('httponly')).toBe(true);
        expect(await store.get(sessionKey(t, id))).toBeNull();
        expect(await store.sMembers(indexKey(t, user.id))).toEqual([]);
        expect((await withCookie(t, id)).status).toBe(401);
      });

      it('logout without a session (none, forged, or already ended) is 204 as well', async () => {
        expect((await client().fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
        const forged = randomBytes(32).toString('base64url');
        expect((await t.fetch('/auth/logout', { method: 'POST', headers: { cookie: `sid_app=${forged}` } })).status).toBe(204);
        const { c, id } = await loggedIn();
        await c.fetch('/auth/logout', { method: 'POST' });
        const again = await t.fetch('/auth/logout', { method: 'POST', headers: { cookie: `sid_app=${id}` } });
        expect(again.status).toBe(204);
      });

      it('logout-all ends every session of that user and no other user\'s', async () => {
        const store = sessionsStore(t);
        const a = await t.createUser();
        const a1 = client();
        const a2 = client();
        await a1.login(a.email, a.password);
        await a2.login(a.email, a.password);
        const { c: b, user: bUser } = await loggedIn();
        const a2id = sessionCookie(t, a2)!;

        const res = await a1.fetch('/auth/logout-all', { method: 'POST' });
        expect(res.status).toBe(204);
        expect(setCookies(res, 'sid_app')[0]!.attrs.get('max-age')).toBe('0');
        expect(await status(a2)).toBe(401);
        expect((await withCookie(t, a2id)).status).toBe(401);
        expect(await store.sMembers(indexKey(t, a.id))).toEqual([]);
        expect(await status(b)).toBe(200);
        expect(await store.sMembers(indexKey(t, bUser.id))).toHaveLength(1);
      });

      it('logout-all without a session is 401 unauthenticated', async () => {
        const res = await client().fetch('/auth/logout-all', { method: 'POST' });
        expect(res.status).toBe(401);
        expect((await res.json()).error.code).toBe('unauthenticated');
      });
    });

    describe('GET /auth/session', () => {
      it('answers exactly {userId,isAdmin,provider,createdAt,expiresAt} and totp (CONTRACT 10)', async () => {
        const before = Date.now();
        const { user, c } = await loggedIn();
        const res = await c.fetch('/auth/session');
        expect(res.status).toBe(200);
        const body = await res.json();
        expect(Object.keys(body).sort()).toEqual(['createdAt', 'expiresAt', 'isAdmin', 'provider', 'totp', 'userId']);
        expect(body).toMatchObject({ userId: user.id, isAdmin: false, provider: 'password', totp: false });
        expect(body.createdAt).toMatch(ISO_RE);
        expect(body.expiresAt).toMatch(ISO_RE);
        expect(Date.parse(body.createdAt)).toBeGreaterThanOrEqual(before - 1000);
        expect(Date.parse(body.expiresAt)).toBeGreaterThanOrEqual(Date.parse(body.createdAt) + DAY * 1000 - 1000);
      });

      it('?expand=user adds exactly the contract\'s user fields', async () => {
        const { user, c } = await loggedIn(t, { admin: true });
        const res = await c.fetch('/auth/session?expand=user');
        expect(res.status).toBe(200);
        const body = await res.json();
        expect(Object.keys(body).sort()).toEqual(['createdAt', 'expiresAt', 'isAdmin', 'provider', 'totp', 'user', 'userId']);
        expect(body.user).toStrictEqual({
          id: user.id,
          email: user.email,
          firstname: '',
          lastname: '',
          email_verified: false,
          isAdmin: true,
          oauthAccounts: [],
          lastLoginAt: expect.stringMatching(ISO_RE), // the password login of `loggedIn`
          settings: {},
        });
      });

      it('?expand=<anything else> is 400 validation_failed', async () => {
        const { c } = await loggedIn();
        const res = await c.fetch('/auth/session?expand=bogus');
        expect(res.status).toBe(400);
        const body = await res.json();
        expect(body.error.code).toBe('validation_failed');
        expect(body.error.details.map((d: { path: string }) => d.path)).toContain('expand');
      });

      it('is 401 unauthenticated without a session', async () => {
        const res = await client().fetch('/auth/session');
        expect(res.status).toBe(401);
        expect(await res.json()).toMatchObject({ error: { code: 'unauthenticated' } });
      });
    });

    describe('lifetime', () => {
      it('sliding mode: each authenticated request resets the TTL in the store and moves expiresAt', async () => {
        const store = sessionsStore(t);
        const { c, id } = await loggedIn();
        const key = sessionKey(t, id);
        await store.expire(key, 100);
        expect(await store.ttl(key)).toBeLessThanOrEqual(100);
        const first = await (await c.fetch('/auth/session')).json();
        expect(await store.ttl(key)).toBeGreaterThan(DAY - 10);
        await store.expire(key, 100);
        await sleep(1100);
        const second = await (await c.fetch('/auth/session')).json();
        expect(await store.ttl(key)).toBeGreaterThan(DAY - 10);
        expect(Date.parse(second.expiresAt)).toBeGreaterThanOrEqual(Date.parse(first.expiresAt) + 1000);
        expect(second.createdAt).toBe(first.createdAt);
      });

      it('absolute mode: requests do not reset the TTL and expiresAt stays fixed', async () => {
        const a = await app({ config: { auth: { session: { ttlMode: 'absolute', ttl: 3600 } } } });
        const store = sessionsStore(a);
        const user = await a.createUser();
        const c = client(a);
        const login = await (await c.login(user.email, user.password)).json();
        const key = sessionKey(a, sessionCookie(a, c)!);
        expect(await store.ttl(key)).toBeGreaterThan(3590);
        await store.expire(key, 100);
        await sleep(1100);
        const s = await (await c.fetch('/auth/session')).json();
        await c.fetch('/auth/session');
        expect(await store.ttl(key)).toBeLessThanOrEqual(100);
        expect(s.expiresAt).toBe(login.expiresAt);
      });

      it('absolute mode: a session that is in use still ends at its fixed expiry', async () => {
        const a = await app({ config: { auth: { session: { ttlMode: 'absolute', ttl: 2 } } } });
        const { c } = await loggedIn(a);
        await sleep(1000);
        expect(await status(c)).toBe(200);
        await sleep(1300);
        expect(await status(c)).toBe(401);
      });

      it('an expired session is 401 (ttl 1 s, unused)', async () => {
        const a = await app({ config: { auth: { session: { ttl: 1 } } } });
        const { c, id } = await loggedIn(a);
        expect(await status(c)).toBe(200);
        await sleep(1400);
        expect(await status(c)).toBe(401);
        expect(await sessionsStore(a).get(sessionKey(a, id))).toBeNull();
      });

      it('maxLifetime caps a sliding session that is in use', async () => {
        const a = await app({ config: { auth: { session: { ttl: 60, maxLifetime: 2 } } } });
        const { c, id } = await loggedIn(a);
        const created = Date.now();
        await sleep(700);
        expect(await status(c)).toBe(200);
        await sleep(700);
        const mid = await c.fetch('/auth/session');
        expect(mid.status).toBe(200);
        // expiresAt never promises more than the cap.
        const body = await mid.json();
        expect(Date.parse(body.expiresAt)).toBeLessThanOrEqual(Date.parse(body.createdAt) + 2000);
        await sleep(Math.max(0, created + 2300 - Date.now()));
        expect(await status(c)).toBe(401);
        expect(await sessionsStore(a).get(sessionKey(a, id))).toBeNull();
      });

      it('sliding mode re-issues the cookie on every request with Max-Age = the time left, so the browser keeps it while in use', async () => {
        const a = await app({ config: { auth: { session: { ttl: 2 } } } });
        const { c } = await loggedIn(a);
        await sleep(1200);
        const res = await c.fetch('/auth/session');
        expect(res.status).toBe(200);
        const [cookie] = setCookies(res, 'sid_app');
        expect(cookie?.value).toBe(sessionCookie(a, c));
        expect(cookie?.attrs.get('max-age')).toBe('2');
        await sleep(1200);
        expect(await status(c)).toBe(200); // still alive: each request reset the 2 s TTL
      });
    });

    describe('cookies that are not a live session', () => {
      it('a random 43-char id, wrong lengths, garbage and the stored hash itself are 401', async () => {
        const { id } = await loggedIn();
        const values = [
          randomBytes(32).toString('base64url'),
          id.slice(0, 42),
          `${id}A`,
          `${id.slice(0, 42)}${id.endsWith('A') ? 'B' : 'A'}`,
          sha256hex(id),
          '!!!garbage!!!',
          'a%20b',
          '',
        ];
        for (const v of values) {
          const res = await withCookie(t, v);
          expect(res.status, `cookie ${JSON.stringify(v)}`).toBe(401);
          expect((await res.json()).error.code).toBe('unauthenticated');
        }
        expect((await withCookie(t, id)).status).toBe(200);
      });

      it('a deleted user\'s cookie is 401 (deleted through the API)', async () => {
        const { c: admin } = await loggedIn(t, { admin: true });
        const { user, c } = await loggedIn();
        expect(await status(c)).toBe(200);
        expect((await admin.fetch(`/auth/users/${user.id}`, { method: 'DELETE' })).status).toBe(204);
        expect(await status(c)).toBe(401);
        expect(await sessionsStore(t).sMembers(indexKey(t, user.id))).toEqual([]);
      });

      it('a user removed behind the API\'s back: expand=user is 401 and ends the session', async () => {
        const { user, c } = await loggedIn();
        await t.instance.auth.users.delete(user.id);
        const res = await c.fetch('/auth/session?expand=user');
        expect(res.status).toBe(401);
        expect(await status(c)).toBe(401);
      });

      it('expand=user with a session whose user this app does not know ends that session only (another app may share the store)', async () => {
        const { user, c } = await loggedIn();
        const other = client();
        expect((await other.login(user.email, user.password)).status).toBe(200);
        // A second app on the same store and key prefix, with its own database.
        const b = await app({ config: { auth: { store: { keyPrefix: t.keyPrefix } } } });
        const res = await b.fetch('/auth/session?expand=user', { headers: { cookie: `sid_app=${sessionCookie(t, c)}` } });
        expect(res.status).toBe(401);
        expect(await status(other)).toBe(200);
      });
    });

    describe('user changes reach live sessions', () => {
      it('a password change by an admin ends all of that user\'s sessions; the new password works, the old does not', async () => {
        const { c: admin } = await loggedIn(t, { admin: true });
        const user = await t.createUser();
        const u1 = client();
        const u2 = client();
        await u1.login(user.email, user.password);
        await u2.login(user.email, user.password);
        const res = await admin.fetch(`/auth/users/${user.id}`, { method: 'PATCH', json: { password: 'a brand new password' } });
        expect(res.status).toBe(200);
        expect(await status(u1)).toBe(401);
        expect(await status(u2)).toBe(401);
        expect(await status(admin)).toBe(200);
        expect((await client().login(user.email, user.password)).status).toBe(401);
        expect((await client().login(user.email, 'a brand new password')).status).toBe(200);
      });

      it('changing one\'s own password keeps the current session and ends the others', async () => {
        const me = await t.createUser({ admin: true });
        const here = client();
        const elsewhere = client();
        await here.login(me.email, me.password);
        await elsewhere.login(me.email, me.password);
        const res = await here.fetch(`/auth/users/${me.id}`, { method: 'PATCH', json: { password: 'my next password' } });
        expect(res.status).toBe(200);
        expect(await status(here)).toBe(200);
        expect(await status(elsewhere)).toBe(401);
      });

      it('removing isAdmin takes admin rights away on the very next request; granting gives them', async () => {
        const store = sessionsStore(t);
        const { c: admin } = await loggedIn(t, { admin: true });
        const { user: other, c: otherClient, id } = await loggedIn(t, { admin: true });
        expect(await status(otherClient, '/auth/users')).toBe(200);

        const demote = await admin.fetch(`/auth/users/${other.id}`, { method: 'PATCH', json: { isAdmin: false } });
        expect(demote.status).toBe(200);
        expect((await demote.json()).isAdmin).toBe(false);
        // The record was rewritten in place: it keeps its expiry (read before the user's next request
        // would reset it).
        const ttl = await store.ttl(sessionKey(t, id));
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(DAY);
        const refused = await otherClient.fetch('/auth/users');
        expect(refused.status).toBe(403);
        expect((await refused.json()).error.code).toBe('forbidden');
        expect((await (await otherClient.fetch('/auth/session')).json()).isAdmin).toBe(false);

        const promote = await admin.fetch(`/auth/users/${other.id}`, { method: 'PATCH', json: { isAdmin: true } });
        expect(promote.status).toBe(200);
        expect(await status(otherClient, '/auth/users')).toBe(200);
        expect((await (await otherClient.fetch('/auth/session')).json()).isAdmin).toBe(true);
      });

      it('a plain user made admin gets admin rights in a session opened before', async () => {
        const { c: admin } = await loggedIn(t, { admin: true });
        const { user, c } = await loggedIn();
        expect(await status(c, '/auth/users')).toBe(403);
        await admin.fetch(`/auth/users/${user.id}`, { method: 'PATCH', json: { isAdmin: true } });
        expect(await status(c, '/auth/users')).toBe(200);
      });
    });

    describe('provider token blobs end with their session', () => {
      const blob = { access: 'provider-access-token', refresh: null, expiresAt: null };
      const blobOf = (a: TestApp, id: string) => a.instance.auth.getProviderTokenBlob('test_ns', sha256hex(id));

      it('logout deletes the blob of that session only', async () => {
        const { user, c, id } = await loggedIn();
        const other = client();
        await other.login(user.email, user.password);
        const otherId = sessionCookie(t, other)!;
        await t.instance.auth.setProviderTokenBlob('test_ns', sha256hex(id), blob);
        await t.instance.auth.setProviderTokenBlob('test_ns', sha256hex(otherId), blob);
        expect(await blobOf(t, id)).toEqual(blob);
        expect((await c.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
        expect(await blobOf(t, id)).toBeNull();
        expect(await blobOf(t, otherId)).toEqual(blob);
      });

      it('logout-all and a password change delete the blobs of every ended session', async () => {
        const user = await t.createUser();
        const ids: string[] = [];
        for (let i = 0; i < 2; i++) {
          const c = client();
          await c.login(user.email, user.password);
          ids.push(sessionCookie(t, c)!);
          await t.instance.auth.setProviderTokenBlob('test_ns', sha256hex(ids[i]!), blob);
        }
        expect((await withCookie(t, ids[0]!, '/auth/session')).status).toBe(200);
        const res = await t.fetch('/auth/logout-all', { method: 'POST', headers: { cookie: `sid_app=${ids[0]}` } });
        expect(res.status).toBe(204);
        for (const id of ids) expect(await blobOf(t, id)).toBeNull();

        const { c: admin } = await loggedIn(t, { admin: true });
        const c = client();
        await c.login(user.email, user.password);
        const id = sessionCookie(t, c)!;
        await t.instance.auth.setProviderTokenBlob('test_ns', sha256hex(id), blob);
        await admin.fetch(`/auth/users/${user.id}`, { method: 'PATCH', json: { password: 'yet another password' } });
        expect(await blobOf(t, id)).toBeNull();
      });

      it('a session ended because its user vanished loses its blob too', async () => {
        const { user, c, id } = await loggedIn();
        await t.instance.auth.setProviderTokenBlob('test_ns', sha256hex(id), blob);
        await t.instance.auth.users.delete(user.id);
        expect((await c.fetch('/auth/session?expand=user')).status).toBe(401);
        expect(await blobOf(t, id)).toBeNull();
      });
    });

    describe('index cleanup', () => {
      it('cleanup() prunes index entries whose session expired and keeps live ones', async () => {
        const a = await app();
        const store = sessionsStore(a);
        const user = await a.createUser();
        const c1 = client(a);
        const c2 = client(a);
        await c1.login(user.email, user.password);
        await c2.login(user.email, user.password);
        const dead = sha256hex(sessionCookie(a, c1)!);
        const live = sha256hex(sessionCookie(a, c2)!);
        await store.expire(`${a.keyPrefix}session:${dead}`, 1);
        await sleep(1300);
        expect((await store.sMembers(indexKey(a, user.id))).sort()).toEqual([dead, live].sort());
        await a.instance.auth.sessions.cleanup();
        expect(await store.sMembers(indexKey(a, user.id))).toEqual([live]);
        expect(await status(c2)).toBe(200);
        expect(await status(c1)).toBe(401);
      });
    });

    it('no response body of this suite contained a password hash or a session id', () => {
      expect(log.bodies.length).toBeGreaterThan(60);
      expect(log.sessionIds.size).toBeGreaterThan(20);
      expect(log.leaks()).toEqual([]);
    });
  });
}

describe.skipIf(!redisUrl)('one store command per authenticated request (private Redis)', () => {
  let redis: Awaited<ReturnType<typeof startPrivateRedis>>;
  let probe: Redis;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    redis = await startPrivateRedis();
    probe = new Redis(redis.url);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    probe?.disconnect();
    await redis?.stop();
  });

  /**
   * What each instance's own timers send on connections of their own, whatever the requests: the webhook
   * queue's tick every 5 s (src/webhooks/redis-queue.ts: the EVALSHA that moves due jobs, with the
   * ZRANGEBYSCORE it runs, XCLAIM, XAUTOCLAIM, XPENDING, XINFO) and its blocking XREADGROUP, and socket.io's
   * adapter's blocking XREAD. None is a session command; a tick that fell inside a window failed a CI run
   * (`{ xautoclaim: 1 }` where `{}` was expected).
   */
  const BACKGROUND = ['evalsha', 'zrangebyscore', 'xclaim', 'xautoclaim', 'xpending', 'xinfo|consumers', 'xreadgroup', 'xread'];

  /** Commands the app sent while `run` ran (the probe's own INFO/CONFIG calls and BACKGROUND left out). */
  async function commandsDuring(run: () => Promise<void>): Promise<Map<string, number>> {
    await probe.config('RESETSTAT');
    await run();
    const calls = await commandCalls(probe);
    for (const name of ['info', 'config|resetstat', 'config', ...BACKGROUND]) calls.delete(name);
    return calls;
  }

  const N = 25;

  // Besides the one read per request, "last seen" (GET /auth/sessions) is written at most once per
  // session per minute per instance: here, once.
  it('sliding: N authenticated requests send exactly N GETEX, and one last-seen SET', async () => {
    const a = await createTestApp({ redisUrl: redis.url });
    apps.push(a);
    const admin = await a.createUser({ admin: true });
    const c = a.client();
    await c.login(admin.email, admin.password);
    const calls = await commandsDuring(async () => {
      for (let i = 0; i < N; i++) expect((await c.fetch(i % 2 ? '/auth/session' : '/auth/users')).status).toBe(200);
    });
    expect(Object.fromEntries(calls)).toEqual({ getex: N, set: 1 });
  });

  it('absolute: N authenticated requests send exactly N GET, and one last-seen SET', async () => {
    const a = await createTestApp({ redisUrl: redis.url, config: { auth: { session: { ttlMode: 'absolute' } } } });
    apps.push(a);
    const user = await a.createUser();
    const c = a.client();
    await c.login(user.email, user.password);
    const calls = await commandsDuring(async () => {
      for (let i = 0; i < N; i++) expect((await c.fetch('/auth/session')).status).toBe(200);
    });
    expect(Object.fromEntries(calls)).toEqual({ get: N, set: 1 });
  });

  it('a malformed cookie costs no store command; an unknown well-formed one costs one', async () => {
    const a = await createTestApp({ redisUrl: redis.url });
    apps.push(a);
    const calls = await commandsDuring(async () => {
      for (const v of ['garbage', 'x'.repeat(44)]) expect((await a.fetch('/auth/session', { headers: { cookie: `sid_app=${v}` } })).status).toBe(401);
    });
    expect(Object.fromEntries(calls)).toEqual({});
    const one = await commandsDuring(async () => {
      expect((await a.fetch('/auth/session', { headers: { cookie: `sid_app=${randomBytes(32).toString('base64url')}` } })).status).toBe(401);
    });
    expect(Object.fromEntries(one)).toEqual({ getex: 1 });
  });
});
