// Security review (issue 24): each test reproduces one finding as an attacker or an unlucky admin
// would meet it, against the real app on Redis (and the embedded store where timing allows).
// OAuth findings 1, 2 and 7 live in oauth.test.ts (they need the identity provider); findings 5, 6,
// 10 and 14 in http-hardening.test.ts; finding 15 in the provider admin tests.

import { afterAll, afterEach, describe, expect, inject, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { createTestApp, type TestApp, type TestAppOptions, type TestClient } from '../support/app.ts';
import { dumpStore, sessionCookie, setCookies, sleep } from '../support/auth.ts';

const redisUrl = inject('redisUrl');
const FRONTEND = 'http://localhost:5173';

const apps: TestApp[] = [];
async function app(opts: TestAppOptions = {}): Promise<TestApp> {
  const a = await createTestApp({ redisUrl: redisUrl || undefined, ...opts, env: { SVC_FRONTEND_URLS: FRONTEND, ...opts.env } });
  apps.push(a);
  return a;
}
afterAll(async () => {
  for (const a of apps) await a.close();
});

async function adminClient(a: TestApp): Promise<TestClient> {
  const admin = await a.createUser({ admin: true });
  const c = a.client();
  expect((await c.login(admin.email, admin.password)).status).toBe(200);
  return c;
}

/**
 * Two loops of logins for one user; `act` runs once three logins succeeded, and the loops go on
 * for three more attempts each after it. Returns the session ids that logins handed out; the
 * caller checks which of them still work.
 */
async function loginLoopsAround(a: TestApp, email: string, password: string, act: () => Promise<void>): Promise<string[]> {
  const ids: string[] = [];
  let acted = false;
  const loop = async () => {
    let after = 0;
    while (after < 3) {
      const c = a.client();
      const res = await c.login(email, password);
      if (res.status === 200) ids.push(sessionCookie(a, c)!);
      if (acted) after++;
    }
  };
  const loops = [loop(), loop()];
  while (ids.length < 3) await sleep(5);
  await act();
  acted = true;
  await Promise.all(loops);
  return ids;
}

const sessionOf = (a: TestApp, id: string, path = '/auth/session') => a.fetch(path, { headers: { cookie: `sid_app=${id}` } });

describe.skipIf(!redisUrl)('finding 3: a login in progress survives no password change, demotion or deletion', () => {
  it('demotion: no session made by a login racing the demotion keeps admin rights', async () => {
    const a = await app();
    const admin = await adminClient(a);
    const target = await a.createUser({ admin: true });
    const ids = await loginLoopsAround(a, target.email, target.password, async () => {
      expect((await admin.fetch(`/auth/users/${target.id}`, { method: 'PATCH', json: { isAdmin: false } })).status).toBe(200);
    });
    expect(ids.length).toBeGreaterThan(2);
    const statuses = await Promise.all(ids.map(async (id) => (await sessionOf(a, id, '/auth/users')).status));
    expect(statuses.filter((s) => s === 200)).toEqual([]);
  });

  it('password change: no session made with the old password survives it', async () => {
    const a = await app();
    const admin = await adminClient(a);
    const target = await a.createUser();
    const ids = await loginLoopsAround(a, target.email, target.password, async () => {
      expect((await admin.fetch(`/auth/users/${target.id}`, { method: 'PATCH', json: { password: 'a brand new password' } })).status).toBe(200);
    });
    expect(ids.length).toBeGreaterThan(2);
    const alive = (await Promise.all(ids.map(async (id) => (await sessionOf(a, id)).status))).filter((s) => s === 200);
    expect(alive).toEqual([]);
  });

  it('deletion: no session of the deleted user survives it', async () => {
    const a = await app();
    const admin = await adminClient(a);
    const target = await a.createUser();
    const ids = await loginLoopsAround(a, target.email, target.password, async () => {
      expect((await admin.fetch(`/auth/users/${target.id}`, { method: 'DELETE' })).status).toBe(204);
    });
    expect(ids.length).toBeGreaterThan(2);
    const alive = (await Promise.all(ids.map(async (id) => (await sessionOf(a, id)).status))).filter((s) => s === 200);
    expect(alive).toEqual([]);
  });
});

describe.skipIf(!redisUrl)('finding 4: login limits hold under a burst', () => {
  const xff = (ip: string) => ({ 'x-forwarded-for': ip });
  const wrongLogin = (a: TestApp, email: string, ip: string) =>
    a.fetch('/auth/login', { method: 'POST', headers: { 'content-type': 'application/json', ...xff(ip) }, body: JSON.stringify({ email, password: 'wrong password' }) });

  it('80 parallel wrong logins from one address: at most 50 reach the password check, the rest get 429 with Retry-After', async () => {
    const a = await app({ config: { server: { trustProxy: 1 } } });
    const results = await Promise.all(Array.from({ length: 80 }, (_, i) => wrongLogin(a, `burst-${i}@example.com`, '203.0.113.7')));
    const counts = { 401: 0, 429: 0 } as Record<number, number>;
    for (const r of results) counts[r.status] = (counts[r.status] ?? 0) + 1;
    expect(counts[401]).toBeLessThanOrEqual(50);
    expect(counts[401]! + counts[429]!).toBe(80);
    // Each refusal says when to retry: the per-IP limit, or the bounded hash queue when it is full.
    const refused = results.filter((r) => r.status === 429);
    for (const r of refused) expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    const codes = await Promise.all(refused.map(async (r) => ((await r.json()) as { error: { code: string } }).error.code));
    expect(codes).toContain('too_many_attempts');
    expect(new Set(codes)).toEqual(new Set(codes.filter((code) => code === 'too_many_attempts' || code === 'too_many_requests')));
  });

  it('IPv6 clients count per /64: other addresses of the same /64 share the limit, another /64 does not', async () => {
    const a = await app({ config: { server: { trustProxy: 1 } } });
    for (let i = 0; i < 50; i++) expect((await wrongLogin(a, `v6-${i}@example.com`, `2001:db8:1:2::${(i + 1).toString(16)}`)).status).toBe(401);
    const same64 = await wrongLogin(a, 'v6-next@example.com', '2001:db8:1:2:ffff:ffff:ffff:fffe');
    expect(same64.status).toBe(429);
    expect((await wrongLogin(a, 'v6-other@example.com', '2001:db8:1:3::1')).status).toBe(401);
    // IPv4-mapped IPv6 is the IPv4 address it maps.
    for (let i = 0; i < 50; i++) await wrongLogin(a, `v4-${i}@example.com`, '198.51.100.9');
    expect((await wrongLogin(a, 'v4-next@example.com', '::ffff:198.51.100.9')).status).toBe(429);
  });

  it('a forwarded address with a port (as some proxies write it) counts as the bare address', async () => {
    const a = await app({ config: { server: { trustProxy: 1 } } });
    for (let i = 0; i < 25; i++) expect((await wrongLogin(a, `port4-${i}@example.com`, `203.0.113.7:${40000 + i}`)).status).toBe(401);
    for (let i = 0; i < 25; i++) expect((await wrongLogin(a, `port6-${i}@example.com`, `[2001:db8:9::${i + 1}]:${40000 + i}`)).status).toBe(401);
    expect((await wrongLogin(a, 'port4-next@example.com', '203.0.113.7')).status).toBe(401);
    for (let i = 0; i < 24; i++) await wrongLogin(a, `bare4-${i}@example.com`, '203.0.113.7');
    // 50 failures of 203.0.113.7 in all, whatever port each came with: the IP's limit.
    expect((await wrongLogin(a, 'port4-last@example.com', '203.0.113.7:1')).status).toBe(429);
    for (let i = 0; i < 25; i++) await wrongLogin(a, `bare6-${i}@example.com`, '2001:db8:9::ff');
    expect((await wrongLogin(a, 'port6-last@example.com', '[2001:db8:9::1]')).status).toBe(429);
  });

  it('the queue of password checks is bounded: past it a login is refused at once with 429 and Retry-After', async () => {
    const a = await app({ config: { server: { trustProxy: 1 } } });
    const user = await a.createUser();
    const burst = Array.from({ length: 150 }, (_, i) => wrongLogin(a, `queue-${i}@example.com`, `192.0.2.${i}`));
    const legit = a.fetch('/auth/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...xff('198.51.100.200') },
      body: JSON.stringify({ email: user.email, password: user.password }),
    });
    const results = await Promise.all(burst);
    const busy = results.filter((r) => r.status === 429);
    expect(busy.length).toBeGreaterThan(0);
    const body = (await busy[0]!.json()) as { error: { code: string } };
    expect(body.error.code).toBe('too_many_requests');
    expect(Number(busy[0]!.headers.get('retry-after'))).toBeGreaterThan(0);
    // The legitimate login either got through or was told when to retry; it never waits behind 150 hashes.
    expect([200, 429]).toContain((await legit).status);
  });
});

describe('finding 8: the sliding cookie lives exactly as long as the session, never past the hard cap', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('each request re-issues the cookie with Max-Age = time left, capped by maxLifetime', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    // The embedded store runs on the same (fake) clock as the sessions.
    const a = await createTestApp({ config: { auth: { session: { ttl: 100, maxLifetime: 150 } } } });
    apps.push(a);
    const user = await a.createUser();
    const c = a.client();
    const login = await c.login(user.email, user.password);
    expect(setCookies(login, 'sid_app')[0]!.attrs.get('max-age')).toBe('100');
    // Early in the session: the browser must not drop the cookie while the server keeps the session.
    vi.setSystemTime(Date.now() + 40_000);
    const early = await c.fetch('/auth/session');
    expect(early.status).toBe(200);
    expect(setCookies(early, 'sid_app')[0]?.attrs.get('max-age')).toBe('100');
    // Near the cap: never past it.
    vi.setSystemTime(Date.now() + 30_000);
    const late = await c.fetch('/auth/session');
    expect(setCookies(late, 'sid_app')[0]?.attrs.get('max-age')).toBe('80');
    vi.setSystemTime(Date.now() + 81_000);
    expect((await c.fetch('/auth/session')).status).toBe(401);
  });

  it('absolute mode: the login cookie already ends with the session; requests do not re-issue it', async () => {
    const a = await app({ config: { auth: { session: { ttl: 100, ttlMode: 'absolute' } } } });
    const user = await a.createUser();
    const c = a.client();
    expect(setCookies(await c.login(user.email, user.password), 'sid_app')[0]!.attrs.get('max-age')).toBe('100');
    expect(setCookies(await c.fetch('/auth/session'), 'sid_app')).toEqual([]);
  });
});

describe('finding 11: the last administrator cannot be removed by two admins at once', () => {
  it('two simultaneous demotions of the last two admins leave one admin', async () => {
    const a = await app();
    for (let round = 0; round < 5; round++) {
      const one = await adminClient(a);
      const two = await adminClient(a);
      const ids = await Promise.all([one, two].map(async (c) => ((await (await c.fetch('/auth/session')).json()) as { userId: string }).userId));
      // Everybody else stops being an admin first, one at a time (allowed while two remain).
      for (const other of (await a.instance.auth.users.users.find({ tags: 'ADMIN' })).filter((u) => !ids.includes(u._id))) {
        await a.instance.auth.updateUser(other._id, { isAdmin: false });
      }
      const [r1, r2] = await Promise.all([
        one.fetch(`/auth/users/${ids[1]}`, { method: 'PATCH', json: { isAdmin: false } }),
        two.fetch(`/auth/users/${ids[0]}`, { method: 'PATCH', json: { isAdmin: false } }),
      ]);
      expect([r1.status, r2.status].sort()).toContain(409);
      expect(await a.instance.auth.users.countAdmins()).toBeGreaterThanOrEqual(1);
    }
  });

  it('deleting the last two admins at once leaves one', async () => {
    const a = await app();
    const one = await adminClient(a);
    const two = await adminClient(a);
    const ids = await Promise.all([one, two].map(async (c) => ((await (await c.fetch('/auth/session')).json()) as { userId: string }).userId));
    const [r1, r2] = await Promise.all([
      one.fetch(`/auth/users/${ids[1]}`, { method: 'DELETE' }),
      two.fetch(`/auth/users/${ids[0]}`, { method: 'DELETE' }),
    ]);
    // One or both are refused (both, when each saw the other's demotion): never none left.
    expect([r1.status, r2.status]).toContain(409);
    expect(await a.instance.auth.users.countAdmins()).toBeGreaterThanOrEqual(1);
  });
});

describe('finding 12: a session whose index write fails is not left behind', () => {
  it('login answers 503 and no session exists when the per-user index cannot be written', async () => {
    const a = await app();
    const user = await a.createUser();
    const store = a.instance.stores.forRole('sessions');
    const sAdd = store.sAdd.bind(store);
    store.sAdd = () => Promise.reject(Object.assign(new Error('index write refused'), { code: 'unavailable' }));
    try {
      const res = await a.client().login(user.email, user.password);
      expect(res.status).toBeGreaterThanOrEqual(500);
    } finally {
      store.sAdd = sAdd;
    }
    const keys = [...(await dumpStore(a, redisUrl || undefined)).keys()].filter((k) => k.startsWith(`${a.keyPrefix}session:`));
    expect(keys).toEqual([]);
  });
});

describe('finding 13: optional __Host- cookie name', () => {
  it('auth.cookie.hostPrefix: the cookie is __Host-<name>, Secure, Path=/, no Domain, and it works', async () => {
    const a = await app({ config: { auth: { cookie: { hostPrefix: true } } } });
    const user = await a.createUser();
    const c = a.client();
    const res = await c.login(user.email, user.password);
    const [cookie] = setCookies(res, '__Host-sid_app');
    expect(cookie).toBeDefined();
    expect(cookie!.attrs.has('secure')).toBe(true);
    expect(cookie!.attrs.get('path')).toBe('/');
    expect(cookie!.attrs.has('domain')).toBe(false);
    expect((await c.fetch('/auth/session')).status).toBe(200);
  });

  it('issue 39 finding 7: with hostPrefix the flow cookies are __Host- too (svc_mfa, svc_passkey, svc_oauth_rt_csrf), and they work', async () => {
    const a = await app({ config: { auth: { cookie: { hostPrefix: true } } } });
    const hostOnly = (res: Response, name: string) => {
      const [cookie] = setCookies(res, `__Host-${name}`);
      expect(cookie, name).toBeDefined();
      expect(cookie!.attrs.has('secure')).toBe(true);
      expect(cookie!.attrs.get('path')).toBe('/');
      expect(cookie!.attrs.has('domain')).toBe(false);
      expect(setCookies(res, name)).toEqual([]);
    };
    const c = a.client();
    hostOnly(await c.fetch('/auth/login/passkey/options', { method: 'POST' }), 'svc_passkey');
    hostOnly(await c.fetch('/auth/oauth/return-to/csrf'), 'svc_oauth_rt_csrf');
    // A login waiting for its code: the __Host- cookie carries it; a planted plain svc_mfa does not.
    const user = await a.createUser();
    await a.instance.auth.users.users.updateOne({ _id: user.id }, { $set: { totp: { secret: 'sealed' } } });
    const first = await c.login(user.email, user.password);
    expect(await first.json()).toEqual({ mfaRequired: true });
    hostOnly(first, 'svc_mfa');
    const planted = a.client();
    planted.cookies.set('svc_mfa', c.cookies.get('__Host-svc_mfa')!);
    const refused = await planted.fetch('/auth/login/totp', { method: 'POST', json: { code: '123456' } });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('mfa_expired');
  });

  it('hostPrefix with a domain or without secure stops start-up naming the key', async () => {
    // An app root that is not the checkout (the working directory): npm test reads none of its files (issue 53).
    const env = { SVC_APP_PATH: '/nonexistent-app' };
    await expect(loadConfig(env, { raw: { auth: { cookie: { hostPrefix: true, domain: 'example.com' } } } })).rejects.toThrow(/auth\.cookie\.hostPrefix: a __Host- cookie needs/);
    await expect(loadConfig(env, { raw: { auth: { cookie: { hostPrefix: true, secure: false } } } })).rejects.toThrow(/auth\.cookie\.hostPrefix: a __Host- cookie needs/);
  });
});
