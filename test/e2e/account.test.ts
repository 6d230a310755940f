// Account self-service (CONTRACT section 10, issue 21 parts 1-2): a signed-in user lists and ends
// their own sessions and changes their own password. Two instances share one Redis where it matters.

import { afterAll, afterEach, describe, expect, inject, it, vi } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createTestApp, type TestApp, type TestAppOptions, type TestClient } from '../support/app.ts';
import { ResponseLog, sessionCookie, setCookies, sha256hex } from '../support/auth.ts';
import type { OwnSession } from '../../packages/client/src/routes.ts';

const redisUrl = inject('redisUrl');
const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0';
const SAFARI = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';

const apps: TestApp[] = [];
const log = new ResponseLog();
async function app(opts: TestAppOptions = {}): Promise<TestApp> {
  const a = await createTestApp({ redisUrl: redisUrl || undefined, ...opts });
  apps.push(a);
  return a;
}
afterAll(async () => {
  for (const a of apps) await a.close();
});

/** One entry of `GET /auth/sessions`: the typed client's own description of it. */
type SessionItem = OwnSession;

/** A client of `a` logged in as `user` with a given User-Agent (and X-Forwarded-For, trusted below). */
async function loginAs(a: TestApp, user: { email: string; password: string }, ua = FIREFOX, ip = '203.0.113.10'): Promise<TestClient> {
  const c = log.wrap(a.client(), 'sid_app');
  const inner = c.fetch.bind(c);
  c.fetch = (path, init = {}) => inner(path, { ...init, headers: { 'user-agent': ua, 'x-forwarded-for': ip, ...(init.headers as Record<string, string>) } });
  expect((await c.login(user.email, user.password)).status).toBe(200);
  return c;
}

const sessions = async (c: TestClient) => {
  const res = await c.fetch('/auth/sessions');
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: SessionItem[] }).items;
};

describe('GET/DELETE /auth/sessions', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('lists the live sessions newest first: opaque id, times, creation address, device label, which is current', async () => {
    const a = await app({ config: { server: { trustProxy: 1 } } });
    const user = await a.createUser();
    const laptop = await loginAs(a, user, FIREFOX, '203.0.113.10');
    const phone = await loginAs(a, user, SAFARI, '2001:db8::7');
    const items = await sessions(laptop);
    expect(items).toHaveLength(2);
    expect(items.map((i) => i.device)).toEqual(['Safari 17 on iOS', 'Firefox 132 on Linux']);
    expect(items.map((i) => i.ip)).toEqual(['2001:db8::7', '203.0.113.10']);
    expect(items.map((i) => i.current)).toEqual([false, true]);
    for (const item of items) {
      expect(Object.keys(item).sort()).toEqual(['createdAt', 'current', 'device', 'id', 'ip', 'lastSeenAt']);
      expect(item.id).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(Date.parse(item.lastSeenAt)).toBeGreaterThanOrEqual(Date.parse(item.createdAt));
    }
    // Neither the cookie value nor its store hash appears anywhere in the answer.
    const text = JSON.stringify(items);
    for (const c of [laptop, phone]) {
      const id = sessionCookie(a, c)!;
      expect(text).not.toContain(id);
      expect(text).not.toContain(sha256hex(id));
    }
    // Another user sees only their own.
    const other = await loginAs(a, await a.createUser());
    expect(await sessions(other)).toHaveLength(1);
  });

  it('lastSeenAt follows use, written at most once a minute', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const a = await createTestApp({}); // embedded store: on the same fake clock
    apps.push(a);
    const user = await a.createUser();
    const c = await loginAs(a, user);
    const [first] = await sessions(c);
    vi.setSystemTime(Date.now() + 3 * 60_000);
    expect((await c.fetch('/auth/session')).status).toBe(200);
    const [later] = await sessions(c);
    expect(Date.parse(later!.lastSeenAt) - Date.parse(first!.createdAt)).toBeGreaterThanOrEqual(3 * 60_000);
  });

  it('DELETE ends another session at once (also on a second instance); ending the current one clears the cookie', async () => {
    const a = await app();
    const b = redisUrl ? await app({ config: { auth: { store: { keyPrefix: a.keyPrefix } } } }) : a;
    const user = await a.createUser();
    const one = await loginAs(a, user);
    const two = await loginAs(a, user);
    // `two`'s cookie, used against the second instance.
    const twoOnB = b.client();
    twoOnB.cookies.set('sid_app', sessionCookie(a, two)!);
    expect((await twoOnB.fetch('/auth/session')).status).toBe(200);

    const target = (await sessions(one)).find((s) => !s.current)!;
    const del = await one.fetch(`/auth/sessions/${target.id}`, { method: 'DELETE' });
    expect(del.status).toBe(204);
    // This session goes on: its cookie is at most refreshed (sliding), never cleared.
    expect(setCookies(del, 'sid_app').map((c) => c.attrs.get('max-age'))).not.toContain('0');
    expect((await twoOnB.fetch('/auth/session')).status).toBe(401);
    expect((await two.fetch('/auth/session')).status).toBe(401);

    const self = (await sessions(one))[0]!;
    expect(self.current).toBe(true);
    const out = await one.fetch(`/auth/sessions/${self.id}`, { method: 'DELETE' });
    expect(out.status).toBe(204);
    expect(setCookies(out, 'sid_app')[0]!.attrs.get('max-age')).toBe('0');
    expect((await one.fetch('/auth/session')).status).toBe(401);
  });

  it('bad input: 401 anonymous; 404 for a malformed id, an unknown id or another user\'s session (none is one of yours); 400 past 128 characters', async () => {
    const a = await app();
    const alice = await loginAs(a, await a.createUser());
    const bob = await loginAs(a, await a.createUser());
    expect((await a.fetch('/auth/sessions')).status).toBe(401);
    expect((await a.fetch('/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA', { method: 'DELETE' })).status).toBe(401);
    for (const id of ['not-an-id', '00000000-0000-4000-8000-000000000000', 'x'.repeat(43)]) {
      const malformed = await alice.fetch(`/auth/sessions/${id}`, { method: 'DELETE' });
      expect(malformed.status, id).toBe(404);
      expect(await malformed.json()).toMatchObject({ error: { code: 'not_found' } });
    }
    const huge = await alice.fetch(`/auth/sessions/${'x'.repeat(129)}`, { method: 'DELETE' });
    expect(huge.status).toBe(400);
    expect(await huge.json()).toMatchObject({ error: { code: 'validation_failed', details: [{ path: 'id' }] } });
    const unknown = await alice.fetch('/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA', { method: 'DELETE' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: 'not_found' } });
    const bobs = (await sessions(bob))[0]!.id;
    expect((await alice.fetch(`/auth/sessions/${bobs}`, { method: 'DELETE' })).status).toBe(404);
    expect((await bob.fetch('/auth/session')).status).toBe(200);
  });
});

describe('POST /auth/password', () => {
  const change = (c: TestClient, json: unknown) => c.fetch('/auth/password', { method: 'POST', json });

  it('changes the password and ends every other session of the user, on every instance; this one stays', async () => {
    // Two instances: one Redis, one database.
    const db = EmbeddedDatabase.inMemory();
    const a = await app({ db });
    const b = redisUrl ? await app({ db, config: { auth: { store: { keyPrefix: a.keyPrefix } } } }) : a;
    const user = await a.createUser();
    const here = await loginAs(a, user);
    const elsewhere = b.client();
    expect((await elsewhere.login(user.email, user.password)).status).toBe(200);

    expect((await change(here, { currentPassword: user.password, newPassword: 'a much better password' })).status).toBe(204);
    expect((await here.fetch('/auth/session')).status).toBe(200);
    expect((await elsewhere.fetch('/auth/session')).status).toBe(401);
    expect((await a.client().login(user.email, user.password)).status).toBe(401);
    expect((await a.client().login(user.email, 'a much better password')).status).toBe(200);
  });

  it('a wrong current password is 401 invalid_credentials and counts like a failed login (429 after 5)', async () => {
    const a = await app();
    const user = await a.createUser();
    const c = await loginAs(a, user);
    for (let i = 0; i < 5; i++) {
      const res = await change(c, { currentPassword: 'not my password', newPassword: 'whatever password' });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ error: { code: 'invalid_credentials' } });
    }
    const limited = await change(c, { currentPassword: user.password, newPassword: 'whatever password' });
    expect(limited.status).toBe(429);
    expect(await limited.json()).toMatchObject({ error: { code: 'too_many_attempts' } });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('a user without a password (OAuth only) gets 409 no_password', async () => {
    const a = await app();
    const doc = await a.instance.auth.users.create({ email: `${Date.now()}-oauth@example.com`, createdVia: 'oauth' });
    const { id } = await a.instance.auth.sessions.create({ userId: doc._id, isAdmin: false, provider: 'acme' });
    const res = await a.fetch('/auth/password', {
      method: 'POST',
      headers: { cookie: `sid_app=${id}`, 'content-type': 'application/json' },
      body: JSON.stringify({ currentPassword: 'anything at all', newPassword: 'a new password here' }),
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: { code: 'no_password' } });
  });

  it('bad input: 401 anonymous, 400 naming the field for a weak, missing or extra field', async () => {
    const a = await app();
    const user = await a.createUser();
    const c = await loginAs(a, user);
    expect((await a.fetch('/auth/password', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(401);
    for (const [body, path] of [
      [{ currentPassword: user.password, newPassword: 'short' }, 'newPassword'],
      [{ currentPassword: user.password }, 'newPassword'],
      [{ newPassword: 'long enough password' }, 'currentPassword'],
      [{ currentPassword: user.password, newPassword: 'long enough password', extra: 1 }, 'extra'],
    ] as const) {
      const res = await change(c, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const json = (await res.json()) as { error: { code: string; details: { path: string }[] } };
      expect(json.error.code).toBe('validation_failed');
      expect(json.error.details.map((d) => d.path)).toContain(path);
    }
    expect((await a.client().login(user.email, user.password)).status).toBe(200);
  });
});

it('no response of this file contained a password hash or a session id', () => {
  expect(log.bodies.length).toBeGreaterThan(20);
  expect(log.leaks()).toEqual([]);
});
