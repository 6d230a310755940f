// The audit log (CONTRACT section 13, issue 54): every way in and every admin action writes one record,
// read back through GET /auth/audit and GET /auth/account/activity; no secret in any record.

import { Secret, TOTP } from 'otpauth';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { AUDIT_COLLECTION } from '../../src/audit/log.ts';
import type { AuditRecord } from '../../src/audit/record.ts';
import { randomUUID } from 'node:crypto';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { MongoDatabase } from '../../src/db/mongo.ts';
import type { Collection, Database, Doc } from '../../src/db/index.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp, type TestAppOptions, type TestClient } from '../support/app.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');
const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0';
const apps: TestApp[] = [];
afterAll(async () => {
  for (const a of apps) await a.close();
});

async function app(opts: TestAppOptions = {}): Promise<TestApp> {
  const a = await createTestApp({ redisUrl: redisUrl || undefined, config: { server: { trustProxy: 1 } }, env: { SVC_SECRET_ENCRYPTION_KEY: 'audit-test-key' }, ...opts });
  apps.push(a);
  return a;
}

/** A browser: a fixed User-Agent and a client address its proxy reports. */
function browser(a: TestApp, ip = '203.0.113.7'): TestClient {
  const c = a.client();
  const inner = c.fetch.bind(c);
  c.fetch = (path, init = {}) => inner(path, { ...init, headers: { 'user-agent': FIREFOX, 'x-forwarded-for': ip, ...(init.headers as Record<string, string>) } });
  return c;
}

async function loggedIn(a: TestApp, user: { email: string; password: string }, ip?: string): Promise<TestClient> {
  const c = browser(a, ip);
  expect((await c.login(user.email, user.password)).status).toBe(200);
  return c;
}

async function page(c: TestClient, path: string): Promise<{ items: AuditRecord[]; nextCursor: string | null }> {
  const res = await c.fetch(path);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as { items: AuditRecord[]; nextCursor: string | null };
}

const ofUser = async (admin: TestClient, userId: string) => (await page(admin, `/auth/audit?userId=${userId}&limit=200`)).items;
const types = (items: AuditRecord[]) => items.map((r) => r.type);

async function ownSessionIds(c: TestClient): Promise<string[]> {
  const res = await c.fetch('/auth/sessions');
  return ((await res.json()) as { items: { id: string; current: boolean }[] }).items.map((s) => s.id);
}

describe('audit records of the ways in', () => {
  it('a password login: who, from where, on what, which session; a failed one names the reason and no session', async () => {
    const a = await app();
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const user = await a.createUser();
    expect((await browser(a).login(user.email, 'wrong password!')).status).toBe(401);
    const c = await loggedIn(a, user, '198.51.100.23');
    const [current] = await ownSessionIds(c);

    const [ok, failed] = (await page(admin, '/auth/audit?type=login.*&limit=200')).items.filter((r) => r.subject.email === user.email);
    expect(ok).toMatchObject({
      type: 'login.succeeded',
      actor: { type: 'user', id: user.id },
      subject: { userId: user.id, email: user.email },
      sessionId: current,
      ip: '198.51.100.23',
      device: 'Firefox 132 on Linux',
      details: { method: 'password' },
    });
    expect(ok!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Date.parse(ok!.at)).toBeGreaterThan(Date.now() - 60_000);
    expect(failed).toMatchObject({ type: 'login.failed', actor: { type: 'anonymous' }, subject: { email: user.email }, ip: '203.0.113.7', details: { reason: 'invalid_credentials' } });
    expect(failed!.sessionId).toBeUndefined();
  });

  it('too many attempts is a failure of its own, after the wrong passwords, recorded once a minute however often refused', async () => {
    const a = await app();
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const user = await a.createUser();
    let last = 0;
    for (let i = 0; i < 12 && last !== 429; i++) last = (await browser(a, '192.0.2.99').login(user.email, 'not the password')).status;
    expect(last).toBe(429);
    // Refusals cost the caller nothing: they are not a way to fill the database (one record a minute).
    for (let i = 0; i < 5; i++) expect((await browser(a, '192.0.2.99').login(user.email, 'not the password')).status).toBe(429);
    const reasons = (await page(admin, '/auth/audit?type=login.failed&limit=200')).items.filter((r) => r.subject.email === user.email).map((r) => r.details.reason);
    expect(reasons[0]).toBe('too_many_attempts');
    expect(reasons.filter((r) => r === 'too_many_attempts')).toHaveLength(1);
    expect(reasons.filter((r) => r === 'invalid_credentials').length).toBeGreaterThan(0);
  });

  it('TOTP: enabled, a login with the code (mfa: totp), a wrong code, a recovery code (used, mfa: recovery_code), disabled, step-up', async () => {
    const a = await app();
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const user = await a.createUser();
    const c = await loggedIn(a, user);
    const { otpauthUri } = (await (await c.fetch('/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!), digits: 6, period: 30, algorithm: 'SHA1' });
    const code = (steps: number) => totp.generate({ timestamp: Date.now() + steps * 30_000 });
    const confirmed = await c.fetch('/auth/totp/confirm', { method: 'POST', json: { code: code(0) } });
    expect(confirmed.status).toBe(200);
    const { recoveryCodes } = (await confirmed.json()) as { recoveryCodes: string[] };

    const second = browser(a);
    expect(await (await second.login(user.email, user.password)).json()).toEqual({ mfaRequired: true });
    const wrong = code(0) === '000000' ? '111111' : '000000';
    expect((await second.fetch('/auth/login/totp', { method: 'POST', json: { code: wrong } })).status).toBe(401);
    expect((await second.fetch('/auth/login/totp', { method: 'POST', json: { code: code(1) } })).status).toBe(200);

    const third = browser(a);
    await third.login(user.email, user.password);
    expect((await third.fetch('/auth/login/totp', { method: 'POST', json: { recoveryCode: recoveryCodes[0] } })).status).toBe(200);
    expect((await third.fetch('/auth/reauthenticate', { method: 'POST', json: { password: user.password } })).status).toBe(204);
    expect((await third.fetch('/auth/totp', { method: 'DELETE', json: { password: user.password } })).status).toBe(204);

    const items = await ofUser(admin, user.id);
    expect(types(items)).toEqual(['totp.disabled', 'reauthenticated', 'recovery_code.used', 'login.succeeded', 'login.succeeded', 'login.failed', 'totp.enabled', 'login.succeeded']);
    expect(items[3]!.details).toEqual({ method: 'password', mfa: 'recovery_code' });
    expect(items[4]!.details).toEqual({ method: 'password', mfa: 'totp' });
    expect(items[5]!.details).toEqual({ reason: 'invalid_code' });
    expect(items[7]!.details).toEqual({ method: 'password' });
    expect(items[1]!.details).toEqual({ method: 'password' });
    // Secrets never: the codes, the recovery code, the TOTP secret, the password, any cookie.
    const dump = JSON.stringify(items);
    for (const secret of [user.password, recoveryCodes[0]!, totp.secret.base32, code(1), ...c.cookies.values(), ...third.cookies.values()]) expect(dump).not.toContain(secret);
  });
});

describe('sessions ending', () => {
  it('logout is one record; logout-all is one session.revoked per session, the caller\u2019s own included', async () => {
    const a = await app();
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const user = await a.createUser();
    const first = await loggedIn(a, user);
    const [firstId] = await ownSessionIds(first);
    expect((await first.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
    const b = await loggedIn(a, user);
    const cc = await loggedIn(a, user);
    const ids = await ownSessionIds(b);
    expect((await cc.fetch('/auth/logout-all', { method: 'POST' })).status).toBe(204);
    const items = await ofUser(admin, user.id);
    const revoked = items.filter((r) => r.type === 'session.revoked');
    expect(revoked.map((r) => r.sessionId).sort()).toEqual([...ids].sort());
    for (const r of revoked) expect(r).toMatchObject({ actor: { type: 'user', id: user.id }, details: { reason: 'logout_all' } });
    expect(items.find((r) => r.type === 'logout')).toMatchObject({ sessionId: firstId, subject: { userId: user.id } });
  });

  it('a deleted session, a changed password (the others end), an admin delete (each session, then the user)', async () => {
    const a = await app();
    const adminUser = await a.createUser({ admin: true });
    const admin = await loggedIn(a, adminUser);
    const user = await a.createUser();
    const b = await loggedIn(a, user);
    const cc = await loggedIn(a, user);
    const [, older] = await ownSessionIds(b);
    expect((await b.fetch(`/auth/sessions/${older}`, { method: 'DELETE' })).status).toBe(204);
    const d = await loggedIn(a, user);
    expect((await cc.fetch('/auth/password', { method: 'POST', json: { currentPassword: user.password, newPassword: 'a brand new passphrase' } })).status).toBe(204);
    expect((await d.fetch('/auth/session')).status).toBe(401);
    let items = await ofUser(admin, user.id);
    expect(items.find((r) => r.details.reason === 'session_deleted')).toMatchObject({ type: 'session.revoked', sessionId: older, actor: { type: 'user', id: user.id } });
    expect(items.find((r) => r.type === 'password.changed')).toMatchObject({ actor: { type: 'user', id: user.id }, subject: { userId: user.id } });
    expect(items.filter((r) => r.details.reason === 'password_changed')).toHaveLength(1); // d's; cc keeps its own

    expect((await admin.fetch(`/auth/users/${user.id}`, { method: 'DELETE' })).status).toBe(204);
    items = await ofUser(admin, user.id);
    expect(items[0]).toMatchObject({ type: 'user.deleted', actor: { type: 'admin', id: adminUser.id }, subject: { userId: user.id, email: user.email } });
    expect(items.filter((r) => r.details.reason === 'user_deleted').map((r) => r.actor)).toEqual([{ type: 'admin', id: adminUser.id }]);
  });
});

describe('admin actions', () => {
  it('users, providers and work sessions: the admin as actor, the thing by id, changed field names but never values', async () => {
    const a = await app();
    const adminUser = await a.createUser({ admin: true });
    const admin = await loggedIn(a, adminUser);
    const made = await admin.fetch('/auth/users', { method: 'POST', json: { email: 'new.person@example.com', password: 'first secret passphrase' } });
    expect(made.status).toBe(201);
    const { id } = (await made.json()) as { id: string };
    expect((await admin.fetch(`/auth/users/${id}`, { method: 'PATCH', json: { firstname: 'Ada', password: 'second secret passphrase' } })).status).toBe(200);
    const provider = await admin.fetch('/auth/providers', { method: 'POST', json: { providerId: 'github', type: 'arctic', clientId: 'cid', clientSecret: 'provider-secret-value' } });
    expect(provider.status).toBe(201);
    expect((await admin.fetch('/auth/providers/github', { method: 'PATCH', json: { clientSecret: 'another-provider-secret' } })).status).toBe(200);
    expect((await admin.fetch('/auth/providers/github', { method: 'DELETE' })).status).toBe(204);
    const ws = await admin.fetch('/auth/work-sessions', { method: 'POST', json: { pluginData: { board: 1 } } });
    expect(ws.status, await ws.clone().text()).toBe(201);
    const { id: wsId } = (await ws.json()) as { id: string };
    expect((await admin.fetch(`/auth/work-sessions/${wsId}`, { method: 'DELETE' })).status).toBe(204);

    const all = (await page(admin, '/auth/audit?limit=200')).items;
    const by = (type: string) => all.find((r) => r.type === type);
    const actor = { type: 'admin', id: adminUser.id };
    expect(by('user.created')).toMatchObject({ actor, subject: { userId: id, email: 'new.person@example.com' }, details: { via: 'admin' } });
    expect(by('user.updated')).toMatchObject({ actor, subject: { userId: id }, details: { fields: ['firstname', 'password'] } });
    expect(by('password.changed')).toMatchObject({ actor, subject: { userId: id } });
    expect(by('provider.created')).toMatchObject({ actor, details: { providerId: 'github' } });
    expect(by('provider.updated')).toMatchObject({ actor, details: { providerId: 'github', fields: ['clientSecret'] } });
    expect(by('provider.deleted')).toMatchObject({ actor, details: { providerId: 'github' } });
    expect(by('work_session.created')).toMatchObject({ actor, details: { workSessionId: wsId } });
    expect(by('work_session.deleted')).toMatchObject({ actor, details: { workSessionId: wsId } });
    const dump = JSON.stringify(all);
    for (const secret of ['first secret passphrase', 'second secret passphrase', 'provider-secret-value', 'another-provider-secret', adminUser.password, ...admin.cookies.values()]) expect(dump).not.toContain(secret);
  });
});

describe('actions done with an API key', () => {
  it('name the key as the actor (its id), never the key itself', async () => {
    const a = await app();
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const made = await admin.fetch('/auth/api-keys', { method: 'POST', json: { name: 'ops script', scopes: ['auth:admin'] } });
    expect(made.status, await made.clone().text()).toBe(201);
    const { id: keyId, key } = (await made.json()) as { id: string; key: string };
    const ws = await a.fetch('/auth/work-sessions', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ pluginData: { board: 2 } }) });
    expect(ws.status, await ws.clone().text()).toBe(201);
    const items = (await page(admin, '/auth/audit?limit=200')).items;
    expect(items.find((r) => r.type === 'work_session.created')).toMatchObject({ actor: { type: 'api_key', id: keyId } });
    expect(items.find((r) => r.type === 'api_key.created')).toMatchObject({ details: { keyId } });
    expect(JSON.stringify(items)).not.toContain(key);
  });
});

describe('GET /auth/audit and /auth/account/activity', () => {
  it('filters by user, type (exact or prefix), time; pages newest first with a cursor', async () => {
    const a = await app();
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const user = await a.createUser();
    const start = new Date().toISOString();
    for (let i = 0; i < 5; i++) await loggedIn(a, user);
    await browser(a).login(user.email, 'wrong password!!');
    const mine = await ofUser(admin, user.id);
    expect(types(mine)).toEqual(Array(5).fill('login.succeeded'));
    expect(mine.map((r) => r.id)).toEqual([...mine.map((r) => r.id)].sort().reverse());

    const first = await page(admin, `/auth/audit?userId=${user.id}&limit=2`);
    expect(first.items.map((r) => r.id)).toEqual(mine.slice(0, 2).map((r) => r.id));
    const second = await page(admin, `/auth/audit?userId=${user.id}&limit=2&cursor=${first.nextCursor}`);
    expect(second.items.map((r) => r.id)).toEqual(mine.slice(2, 4).map((r) => r.id));
    const third = await page(admin, `/auth/audit?userId=${user.id}&limit=2&cursor=${second.nextCursor}`);
    expect(third.items.map((r) => r.id)).toEqual(mine.slice(4).map((r) => r.id));
    expect(third.nextCursor).toBeNull();

    const prefix = (await page(admin, '/auth/audit?type=login.*&limit=200')).items;
    expect(new Set(types(prefix))).toEqual(new Set(['login.succeeded', 'login.failed']));
    expect(types((await page(admin, '/auth/audit?type=login.failed')).items)).toEqual(['login.failed']);
    const middle = mine[2]!.at;
    const windowed = (await page(admin, `/auth/audit?userId=${user.id}&since=${encodeURIComponent(middle)}&until=${encodeURIComponent(mine[0]!.at)}`)).items;
    expect(windowed.every((r) => r.at >= middle && r.at < mine[0]!.at)).toBe(true);
    expect(windowed.map((r) => r.id)).toContain(mine[2]!.id);
    expect(windowed.map((r) => r.id)).not.toContain(mine[0]!.id);
    expect((await page(admin, `/auth/audit?since=${encodeURIComponent(start)}&limit=200`)).items.length).toBeGreaterThanOrEqual(6);
    expect((await page(admin, '/auth/audit?until=2000-01-01T00:00:00Z')).items).toEqual([]);
  });

  it.runIf(mongoUrl)('on MongoDB too: the indexes (TTL included) are made, filters and paging answer alike', async () => {
    const db = await MongoDatabase.connect(mongoUrl!.replace(/\/[^/?]*(\?|$)/, `/audit_${randomUUID().slice(0, 8)}$1`));
    const a = await app({ db });
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const user = await a.createUser();
    for (let i = 0; i < 3; i++) await loggedIn(a, user);
    const first = await page(admin, `/auth/audit?userId=${user.id}&type=login.*&limit=2`);
    expect(types(first.items)).toEqual(['login.succeeded', 'login.succeeded']);
    const rest = await page(admin, `/auth/audit?userId=${user.id}&type=login.*&limit=2&cursor=${first.nextCursor}`);
    expect(rest.items).toHaveLength(1);
    expect(rest.nextCursor).toBeNull();
    expect([...first.items, ...rest.items].map((r) => r.id)).toEqual((await ofUser(admin, user.id)).map((r) => r.id));
    expect((await page(admin, `/auth/audit?since=${encodeURIComponent(first.items[0]!.at)}`)).items.map((r) => r.id)).toContain(first.items[0]!.id);
    expect(await a.instance.auth.audit.sweep(Date.now() + 91 * 86_400_000)).toBe(4); // the admin's login and the user's three
    expect((await page(admin, '/auth/audit')).items).toEqual([]);
  });

  it('a user sees only records about themselves; /auth/audit is for admins', async () => {
    const a = await app();
    const one = await a.createUser();
    const other = await a.createUser();
    const c = await loggedIn(a, one);
    await loggedIn(a, other);
    await loggedIn(a, one);
    const own = await page(c, '/auth/account/activity');
    expect(own.items.length).toBe(2);
    expect(own.items.every((r) => r.subject.userId === one.id)).toBe(true);
    const limited = await page(c, '/auth/account/activity?limit=1');
    expect(limited.items).toHaveLength(1);
    expect((await page(c, `/auth/account/activity?cursor=${limited.nextCursor}`)).items.map((r) => r.id)).toEqual([own.items[1]!.id]);
    const refused = await c.fetch('/auth/audit');
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    expect((await a.client().fetch('/auth/account/activity')).status).toBe(401);
  });

  it.each([
    ['since=yesterday', 'since'],
    ['since=2026-13-45T00:00:00Z', 'since'],
    ['until=12', 'until'],
    ['limit=0', 'limit'],
    ['limit=201', 'limit'],
    ['limit=ten', 'limit'],
    ['cursor=not-a-cursor', 'cursor'],
    [`cursor=${Buffer.from('0190a6d4-0000-7000-8000-000000000000').toString('base64url')}`, 'cursor'],
    ['type=login', 'type'],
    ['type=nothing.*', 'type'],
    ['type=*', 'type'],
    ['color=blue', 'color'],
  ])('?%s: 400 validation_failed naming %s', async (query, field) => {
    const a = (apps[0] as TestApp | undefined) ?? (await app());
    const adminUser = await a.createUser({ admin: true });
    const admin = await loggedIn(a, adminUser);
    const res = await admin.fetch(`/auth/audit?${query}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; details?: { path: string }[] } };
    expect(body.error.code).toBe('validation_failed');
    expect(JSON.stringify(body.error.details ?? [])).toContain(field);
    // One plain sentence for the one bad value: not two, and not valibot's own wording.
    expect(body.error.details).toHaveLength(1);
    expect(JSON.stringify(body.error.details)).not.toMatch(/Invalid|Expected|received/);
  });
});

describe('faults and retention', () => {
  it('an audit write that fails never fails the action: logged as audit_write_failed naming the type', async () => {
    const lines: string[] = [];
    const logger = createLogger('error', new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(chunk.toString()), done()) }));
    const db = EmbeddedDatabase.inMemory();
    const failing: Database = {
      kind: db.kind,
      ping: () => db.ping(),
      close: () => db.close(),
      async collection<T extends Doc>(name: string, indexes?: Parameters<Database['collection']>[1]): Promise<Collection<T>> {
        const real = await db.collection<T>(name, indexes);
        if (name !== AUDIT_COLLECTION) return real;
        return { ...real, find: real.find.bind(real), findOne: real.findOne.bind(real), deleteMany: real.deleteMany.bind(real), insertOne: () => Promise.reject(new Error('disk full')) } as Collection<T>;
      },
    };
    const a = await app({ db: failing, logger });
    const user = await a.createUser();
    const c = browser(a);
    expect((await c.login(user.email, user.password)).status).toBe(200);
    const line = lines.map((l) => JSON.parse(l) as { code?: string; type?: string; level: number }).find((l) => l.code === 'audit_write_failed');
    expect(line).toMatchObject({ type: 'login.succeeded', level: 50 });
  });

  it('records older than auth.audit.retentionDays are swept', async () => {
    const a = await app({ config: { server: { trustProxy: 1 }, auth: { audit: { retentionDays: 1 } } } });
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    expect((await page(admin, '/auth/audit')).items.length).toBe(1);
    expect(await a.instance.auth.audit.sweep(Date.now() + 86_400_000 - 60_000)).toBe(0);
    expect(await a.instance.auth.audit.sweep(Date.now() + 86_400_000 + 1000)).toBe(1);
    expect((await page(admin, '/auth/audit')).items).toEqual([]);
  });

  it('GET /auth/session and plugin routes write nothing', async () => {
    const a = await app();
    const admin = await loggedIn(a, await a.createUser({ admin: true }));
    const before = (await page(admin, '/auth/audit?limit=200')).items.length;
    for (let i = 0; i < 5; i++) expect((await admin.fetch('/auth/session')).status).toBe(200);
    expect((await admin.fetch('/auth/sessions')).status).toBe(200);
    expect((await page(admin, '/auth/audit?limit=200')).items.length).toBe(before);
  });
});
