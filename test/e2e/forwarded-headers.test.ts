// Forged forwarded headers (issue 58): with server.trustProxy 0, X-Forwarded-For/Host/Proto change neither
// rate-limit keys, audit IPs, redirects nor cookie attributes; with 1, only the hop the proxy wrote (the
// last one) counts, whatever the client put before it.

import { afterAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';

const apps: TestApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
});
async function app(trustProxy: number): Promise<TestApp> {
  const t = await createTestApp({ config: { server: { trustProxy } }, env: { SVC_SERVER_BASE_URL: 'http://localhost' } });
  apps.push(t);
  return t;
}

const login = (t: TestApp, body: { email: string; password: string }, headers: Record<string, string>) =>
  t.fetch('/auth/login', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

async function auditIps(t: TestApp, email: string): Promise<string[]> {
  const admin = await t.createUser({ admin: true });
  const c = t.client();
  await c.login(admin.email, admin.password);
  const res = await c.fetch('/auth/audit?type=login.*&limit=200');
  const { items } = (await res.json()) as { items: { subject?: { email?: string }; ip: string }[] };
  return items.filter((r) => r.subject?.email === email).map((r) => r.ip);
}

describe('forwarded headers', () => {
  it('trustProxy 0: a new forged X-Forwarded-For per try does not escape the login limit, and audit records keep the real address', async () => {
    const t = await app(0);
    const user = await t.createUser();
    const statuses: number[] = [];
    for (let i = 1; i <= 6; i++) statuses.push((await login(t, { email: user.email, password: 'wrong password' }, { 'x-forwarded-for': `203.0.113.${i}` })).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    const ips = await auditIps(t, user.email);
    expect(ips.length).toBeGreaterThan(0);
    for (const ip of ips) expect(ip).not.toMatch(/^203\.0\.113\./);
  });

  it('trustProxy 1: only the last hop counts: a client cannot pick its address by writing hops before the proxy\'s', async () => {
    const t = await app(1);
    const user = await t.createUser();
    const statuses: number[] = [];
    // The client forges a new first hop each time; the proxy appends the same real address.
    for (let i = 1; i <= 6; i++) statuses.push((await login(t, { email: user.email, password: 'wrong password' }, { 'x-forwarded-for': `10.0.0.${i}, 198.51.100.20` })).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    expect(new Set(await auditIps(t, user.email))).toEqual(new Set(['198.51.100.20']));
  });

  it('trustProxy 0: forged X-Forwarded-Host/Proto change no redirect and no cookie attribute', async () => {
    const t = await app(0);
    const admin = await t.createUser({ admin: true });
    const c = t.client();
    await c.login(admin.email, admin.password);
    expect((await c.fetch('/auth/providers', { method: 'POST', json: { providerId: 'github', type: 'arctic', clientId: 'id', clientSecret: 'secret' } })).status).toBe(201);
    const forged = { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' };
    const start = async (headers: Record<string, string>) => (await t.fetch('/auth/oauth/github', { headers, redirect: 'manual' })).headers.get('location') ?? '';
    const plainLocation = new URL(await start({}));
    const forgedLocation = new URL(await start(forged));
    expect(forgedLocation.searchParams.get('redirect_uri')).toBe(plainLocation.searchParams.get('redirect_uri'));
    expect(forgedLocation.href).not.toContain('evil.example');

    const user = await t.createUser();
    const attributes = async (headers: Record<string, string>) =>
      (await login(t, user, headers)).headers
        .getSetCookie()
        .map((line) => line.replace(/^([^=]+)=[^;]*/, '$1=<value>'))
        .sort();
    expect(await attributes(forged)).toEqual(await attributes({}));
  });
});

describe('cross-site requests', () => {
  it('a state-changing request with a valid cookie, Sec-Fetch-Site cross-site and no Origin is 403 csrf_failed; same-site or without the header it goes through', async () => {
    const t = await createTestApp({ env: { SVC_FRONTEND_URLS: 'https://app.example.test' } });
    apps.push(t);
    const user = await t.createUser();
    const c = t.client();
    await c.login(user.email, user.password);
    const logout = (headers: Record<string, string>) => c.fetch('/auth/logout', { method: 'POST', headers });
    const refused = await logout({ 'sec-fetch-site': 'cross-site' });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('csrf_failed');
    expect((await c.fetch('/auth/session')).status).toBe(200);
    // A listed frontend on another site sends its Origin: allowed (topology 3).
    expect((await c.fetch('/auth/session', { headers: { 'sec-fetch-site': 'cross-site', origin: 'https://app.example.test' } })).status).toBe(200);
    expect((await logout({ 'sec-fetch-site': 'same-site' })).status).toBe(204);
    expect((await c.fetch('/auth/session')).status).toBe(401);
  });
});
