// The deployment self-check (issue 58, CONTRACT 17): GET /auth/diagnostics tells an admin what svc sees
// of the request (through server.trustProxy), the cookie it sets and the frontends it trusts, and names
// each wrong setting; each finding here is produced by a deliberately wrong config. Forged forwarded
// headers change nothing when no proxy is trusted.

import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { doctorUrl } from '../../src/doctor-url.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';

interface Diagnostics {
  seen: { scheme: string; host: string; clientIp: string; forwarded: boolean };
  cookie: { name: string; secure: boolean; sameSite: string; domain: string | null; partitioned: boolean };
  frontendOrigins: string[];
  findings: { code: string; message: string }[];
}

const apps: TestApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
});

async function adminOf(opts: Parameters<typeof createTestApp>[0]): Promise<{ t: TestApp; admin: TestClient }> {
  const t = await createTestApp(opts);
  apps.push(t);
  const user = await t.createUser({ admin: true });
  const admin = t.client();
  expect((await admin.login(user.email, user.password)).status).toBe(200);
  return { t, admin };
}

async function diagnostics(admin: TestClient, headers: Record<string, string> = {}): Promise<Diagnostics> {
  const res = await admin.fetch('/auth/diagnostics', { headers });
  expect(res.status).toBe(200);
  return (await res.json()) as Diagnostics;
}
const codes = (d: Diagnostics) => d.findings.map((f) => f.code).sort();

describe('GET /auth/diagnostics', () => {
  it('defaults over plain http: what svc sees, the cookie it sets, and cookie_secure_over_http', async () => {
    const { admin } = await adminOf({ env: { SVC_FRONTEND_URLS: 'http://localhost:5173' } });
    const d = await diagnostics(admin);
    expect(d.seen).toMatchObject({ scheme: 'http', host: 'localhost', forwarded: false });
    expect(d.cookie).toEqual({ name: 'sid_app', secure: true, sameSite: 'strict', domain: null, partitioned: false });
    expect(d.frontendOrigins).toEqual(['http://localhost:5173']);
    expect(codes(d)).toEqual(['cookie_secure_over_http']);
    expect(d.findings[0]!.message).toMatch(/X-Forwarded-Proto|https/);
  });

  it('behind one trusted proxy: the forwarded scheme, host and client address count, and https clears the finding', async () => {
    const { admin } = await adminOf({ config: { server: { trustProxy: 1 } } });
    const d = await diagnostics(admin, { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.test', 'x-forwarded-for': '198.51.100.7, 203.0.113.9' });
    expect(d.seen).toEqual({ scheme: 'https', host: 'api.example.test', clientIp: '203.0.113.9', forwarded: true });
    expect(codes(d)).toEqual([]);
  });

  it('trustProxy 0: forged X-Forwarded-* change neither scheme, host nor client IP, and proxy_not_trusted is named', async () => {
    const { admin } = await adminOf({});
    const plain = await diagnostics(admin);
    const forged = await diagnostics(admin, { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example', 'x-forwarded-for': '203.0.113.66' });
    expect(forged.seen).toEqual({ ...plain.seen, forwarded: true });
    expect(forged.seen.clientIp).not.toBe('203.0.113.66');
    expect(codes(forged)).toEqual(['cookie_secure_over_http', 'proxy_not_trusted']);
  });

  it('a frontend outside the cookie Domain, and one on another site with SameSite strict, are named', async () => {
    const { admin } = await adminOf({
      config: { server: { trustProxy: 1 }, auth: { cookie: { domain: 'example.test' } } },
      env: { SVC_FRONTEND_URLS: 'https://app.example.test,https://shop.other.example' },
    });
    const d = await diagnostics(admin, { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.test', 'x-forwarded-for': '203.0.113.9' });
    expect(d.cookie.domain).toBe('example.test');
    expect(codes(d)).toEqual(['cookie_domain_mismatch', 'cross_site_without_none']);
    for (const f of d.findings) expect(f.message).toContain('https://shop.other.example');
  });

  it('sameSite "none" without secure starts (with a warning) and is named samesite_none_without_secure', async () => {
    const { admin } = await adminOf({ config: { auth: { cookie: { sameSite: 'none', secure: false } } } });
    const d = await diagnostics(admin);
    expect(d.cookie).toMatchObject({ sameSite: 'none', secure: false });
    expect(codes(d)).toEqual(['samesite_none_without_secure']);
  });

  it('auth.cookie.partitioned: the session cookie carries Partitioned; without sameSite "none" and secure, start-up refuses', async () => {
    const t = await createTestApp({ config: { auth: { cookie: { sameSite: 'none', partitioned: true } } } });
    apps.push(t);
    const user = await t.createUser({ admin: true });
    const admin = t.client();
    const login = await admin.login(user.email, user.password);
    const cookie = login.headers.getSetCookie().find((c) => c.startsWith('sid_app='))!;
    expect(cookie).toMatch(/; Partitioned/i);
    expect(cookie).toMatch(/; Secure/i);
    expect((await diagnostics(admin)).cookie.partitioned).toBe(true);
    // The cookies of half-finished flows too (a passkey login's challenge): a cross-site frontend's fetch gets them back.
    const options = await t.fetch('/auth/login/passkey/options', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const challenge = options.headers.getSetCookie().find((c) => c.startsWith('svc_passkey'));
    expect(challenge).toMatch(/SameSite=None/i);
    expect(challenge).toMatch(/; Partitioned/i);
    await expect(createTestApp({ config: { auth: { cookie: { sameSite: 'lax', partitioned: true } } } })).rejects.toThrow(/partitioned/);
  });

  it("a provider whose redirect URI is on another origin than the request's and SVC_SERVER_BASE_URL's is named", async () => {
    const { admin } = await adminOf({ config: { auth: { cookie: { secure: false } } }, env: { SVC_SERVER_BASE_URL: 'http://localhost' } });
    const create = (providerId: string, redirectUri?: string) =>
      admin.fetch('/auth/providers', { method: 'POST', json: { providerId, type: 'arctic', clientId: 'c', clientSecret: 's', ...(redirectUri ? { redirectUri } : {}) } });
    expect((await create('github')).status).toBe(201);
    expect(codes(await diagnostics(admin))).toEqual([]);
    expect((await create('discord', 'https://old.example.test/api/auth/oauth/discord/callback')).status).toBe(201);
    const d = await diagnostics(admin);
    expect(codes(d)).toEqual(['redirect_uri_origin_mismatch']);
    expect(d.findings[0]!.message).toContain('discord');
  });

  it('admins only: 401 without a session, 403 for a user', async () => {
    const t = await createTestApp({});
    apps.push(t);
    expect((await t.fetch('/auth/diagnostics')).status).toBe(401);
    const user = await t.createUser();
    const c = t.client();
    await c.login(user.email, user.password);
    const res = await c.fetch('/auth/diagnostics');
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('forbidden');
  });
});

describe('svc doctor --url', () => {
  it('asks the running svc with an auth:admin key and prints what it sees and each finding (exit 1); no key or a wrong URL: exit 2', async () => {
    const { t, admin } = await adminOf({ config: { server: { trustProxy: 0 } } });
    const server = serve({ fetch: t.app.fetch, hostname: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const created = await admin.fetch('/auth/api-keys', { method: 'POST', json: { name: 'doctor', scopes: ['auth:admin'] } });
      expect(created.status).toBe(201);
      const { key } = (await created.json()) as { key: string };
      const lines: string[] = [];
      expect(await doctorUrl(base, { SVC_API_KEY: key }, (l) => lines.push(l))).toBe(1);
      const text = lines.join('\n');
      expect(text).toContain(`sees: http://127.0.0.1:`);
      expect(text).toContain('session cookie: sid_app; Secure; SameSite=strict');
      expect(text).toMatch(/^FAIL cookie_secure_over_http: /m);
      expect(text).not.toContain(key);

      const quiet: string[] = [];
      expect(await doctorUrl(base, {}, (l) => quiet.push(l))).toBe(2);
      expect(quiet.join('\n')).toMatch(/SVC_API_KEY/);
      expect(await doctorUrl('ftp://example.test', { SVC_API_KEY: key }, (l) => quiet.push(l))).toBe(2);
      expect(await doctorUrl(`${base}/nowhere`, { SVC_API_KEY: key }, (l) => quiet.push(l))).toBe(2);
      expect(quiet.at(-1)).toMatch(/answered 404/);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
