// Known devices, new-device notices and "this wasn't me" (CONTRACT 14, issue 56), end to end against a
// REAL SMTP server on loopback (smtp-server + mailparser): the notice is read out of the mail as a person
// would, and its link's token is POSTed to /auth/not-me as the frontend's page does.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sha256hex } from '../../src/auth/hash.ts';
import { MAX_KNOWN_DEVICES, NOTICE_CAP } from '../../src/defences/devices.ts';
import { UnavailableError } from '../../src/http/errors.ts';
import { createLogger } from '../../src/logger.ts';
import { createClient } from '../../packages/client/src/index.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { setCookies } from '../support/auth.ts';
import { startSmtp, tokenFrom, type TestSmtp } from '../support/smtp.ts';

const redisUrl = inject('redisUrl') || undefined;
const FRONTEND = 'http://localhost:5173';
const UA = { chrome: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36', firefox: 'Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0' };
let smtp: TestSmtp;
let a: TestApp;
const apps: TestApp[] = [];

beforeAll(async () => {
  smtp = await startSmtp();
  a = await createTestApp({ redisUrl, env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: FRONTEND }, config: { server: { trustProxy: 1 } } });
  apps.push(a);
});
afterAll(async () => {
  for (const x of apps) await x.close();
  await smtp?.close();
});

let lastIp = 0;
function browser(t: TestApp, ua = UA.chrome, ip = `10.58.${(++lastIp >> 8) & 255}.${lastIp & 255}`): TestClient & { ip: string } {
  const c = t.client();
  const raw = c.fetch.bind(c);
  c.fetch = (p, init = {}) => raw(p, { ...init, headers: { 'x-forwarded-for': ip, 'user-agent': ua, ...Object.fromEntries(new Headers(init.headers)) } });
  c.login = (email, password) => c.fetch('/auth/login', { method: 'POST', json: { email, password } });
  return Object.assign(c, { ip });
}
const post = (c: TestClient, p: string, json: unknown) => c.fetch(p, { method: 'POST', json });
const codeOf = async (res: Response) => ((await res.json()) as { error?: { code: string } }).error?.code;
const notices = (email: string) => smtp.to(email).filter((m) => m.subject === 'New login to your account');
/** Every mail job queued so far has ended. */
const settled = (t: TestApp) => t.instance.auth.mailer.idle();

describe('known devices and new-device notices', () => {
  it('every login sets svc_device (HttpOnly, 1 year); the first device ever and the same device again send no mail', async () => {
    const user = await a.createUser();
    const c = browser(a);
    const res = await c.login(user.email, user.password);
    expect(res.status).toBe(200);
    const [device] = setCookies(res, 'svc_device');
    expect(device?.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(device?.attrs.has('httponly')).toBe(true);
    expect(Number(device?.attrs.get('max-age'))).toBe(365 * 24 * 60 * 60);
    expect((await c.login(user.email, user.password)).status).toBe(200);
    await settled(a);
    expect(notices(user.email)).toHaveLength(0);
  });

  it('a new device mails one notice within seconds: time, device, IP and the not-me link; text and HTML', async () => {
    const user = await a.createUser();
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
    const other = browser(a, UA.firefox);
    const started = Date.now();
    expect((await other.login(user.email, user.password)).status).toBe(200);
    const [mail] = await smtp.waitFor(user.email);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(mail!.subject).toBe('New login to your account');
    expect(mail!.to).toEqual([user.email]);
    expect(mail!.text).toContain('Firefox');
    expect(mail!.text).toContain('Linux');
    expect(mail!.text).toContain(other.ip);
    expect(mail!.text).toMatch(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    expect(mail!.text).toMatch(new RegExp(`${FRONTEND}/not-me\\?token=[A-Za-z0-9_-]{43}`));
    expect(mail!.html).toContain(`${FRONTEND}/not-me?token=`);
    // The same new device again: known now, no second mail.
    expect((await other.login(user.email, user.password)).status).toBe(200);
    await settled(a);
    expect(notices(user.email)).toHaveLength(1);
  });

  it('a login of another method (a magic link) from a new device mails the notice too, and sets svc_device', async () => {
    const links = await createTestApp({ redisUrl, env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: FRONTEND }, config: { server: { trustProxy: 1 }, auth: { magicLink: { enabled: true } } } });
    apps.push(links);
    const user = await links.createUser();
    expect((await browser(links).login(user.email, user.password)).status).toBe(200);
    const phone = browser(links, UA.firefox);
    expect((await post(phone, '/auth/login/link', { email: user.email })).status).toBe(202);
    const token = tokenFrom((await smtp.waitFor(user.email)).find((m) => m.subject === 'Your login link')!, '/login/link');
    const res = await post(phone, '/auth/login/link/verify', { token });
    expect(res.status).toBe(200);
    expect(setCookies(res, 'svc_device')[0]?.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await smtp.waitFor(user.email, 2);
    await settled(links);
    expect(notices(user.email)).toHaveLength(1);
    expect(notices(user.email)[0]!.text).toContain('Firefox');
  });

  it("another user's device cookie or a forged one suppresses nothing", async () => {
    const [alice, bob] = [await a.createUser(), await a.createUser()];
    const b = browser(a);
    expect((await b.login(bob.email, bob.password)).status).toBe(200);
    expect((await browser(a).login(alice.email, alice.password)).status).toBe(200);
    // Bob's browser (its svc_device) logs in as Alice: new to Alice.
    expect((await b.login(alice.email, alice.password)).status).toBe(200);
    const forged = browser(a);
    forged.cookies.set('svc_device', 'A'.repeat(43));
    expect((await forged.login(alice.email, alice.password)).status).toBe(200);
    await settled(a);
    expect(notices(alice.email)).toHaveLength(2);
  });

  it('POST /auth/not-me: the session ends, the password is locked until a reset (mailed), API keys go; single use; garbage is invalid_token', async () => {
    const user = await a.createUser();
    const mine = browser(a);
    expect((await mine.login(user.email, user.password)).status).toBe(200);
    const thief = browser(a, UA.firefox);
    expect((await thief.login(user.email, user.password)).status).toBe(200);
    expect((await thief.fetch('/auth/session')).status).toBe(200);
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/not-me');
    const keys = a.instance.auth.apiKeys;
    await keys.create(user.id, { name: 'cli', scopes: [] });
    expect(await keys.list(user.id)).toHaveLength(1);

    // Through @svc/client, as the frontend's /not-me page would.
    const page = browser(a);
    const client = createClient({ baseUrl: '/api', fetch: (input, init) => page.fetch(String(input), init) });
    await client.notMe(token);
    expect((await thief.fetch('/auth/session')).status).toBe(401);
    const refused = await browser(a).login(user.email, user.password);
    expect(refused.status).toBe(403);
    expect(await codeOf(refused)).toBe('password_reset_required');
    expect(setCookies(refused, 'sid_app').filter((c) => c.value)).toHaveLength(0);
    expect(await keys.list(user.id)).toHaveLength(0);

    for (const bad of [token, 'garbage', '']) {
      const res = await post(browser(a), '/auth/not-me', { token: bad });
      expect(res.status).toBe(400);
      expect(await codeOf(res)).toBe('invalid_token');
    }

    const reset = tokenFrom((await smtp.waitFor(user.email, 2)).find((m) => m.subject === 'Reset your password')!, '/reset-password');
    expect((await post(browser(a), '/auth/password/reset', { token: reset, newPassword: 'a brand new password' })).status).toBe(204);
    expect((await browser(a).login(user.email, 'a brand new password')).status).toBe(200);

    // Only the session of that login ended by not-me; the reset ended the rest.
    const revoked = await a.instance.auth.audit.query({ userId: user.id, type: 'session.revoked', limit: 50 });
    expect(revoked.items.filter((r) => r.details.reason === 'not_me')).toHaveLength(1);
    expect((await mine.fetch('/auth/session')).status).toBe(401);
  });

  it("not-me ends every session the login's device made since (a second login from the same browser too), and no other device's", async () => {
    const user = await a.createUser();
    const mine = browser(a);
    expect((await mine.login(user.email, user.password)).status).toBe(200);
    const thief = browser(a, UA.firefox);
    const first = await thief.login(user.email, user.password);
    expect(first.status).toBe(200);
    // The same browser again, as a second session (another tab's jar, the same svc_device): a known device, no notice.
    const [device] = setCookies(first, 'svc_device');
    const again = browser(a, UA.firefox, thief.ip);
    again.cookies.set('svc_device', device!.value);
    expect((await again.login(user.email, user.password)).status).toBe(200);
    await settled(a);
    expect(notices(user.email)).toHaveLength(1);
    expect((await thief.fetch('/auth/session')).status).toBe(200);
    expect((await again.fetch('/auth/session')).status).toBe(200);

    const token = tokenFrom(notices(user.email)[0]!, '/not-me');
    expect((await post(browser(a), '/auth/not-me', { token })).status).toBe(204);
    expect((await thief.fetch('/auth/session')).status).toBe(401);
    expect((await again.fetch('/auth/session')).status).toBe(401);
    expect((await mine.fetch('/auth/session')).status).toBe(200);
    const revoked = await a.instance.auth.audit.query({ userId: user.id, type: 'session.revoked', limit: 50 });
    expect(revoked.items.filter((r) => r.details.reason === 'not_me')).toHaveLength(2);
    // The session list shows no device id (it stays in the store).
    const listed = (await (await mine.fetch('/auth/sessions')).json()) as { items: Record<string, unknown>[] };
    expect(Object.keys(listed.items[0]!).sort()).toEqual(['createdAt', 'current', 'device', 'id', 'ip', 'lastSeenAt']);
  });

  it('the device reported by not-me is known no more: a thief who gets the new password too is announced again from that browser', async () => {
    const user = await a.createUser();
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
    const thief = browser(a, UA.firefox);
    expect((await thief.login(user.email, user.password)).status).toBe(200);
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/not-me');
    expect((await post(browser(a), '/auth/not-me', { token })).status).toBe(204);
    const reset = tokenFrom((await smtp.waitFor(user.email, 2)).find((m) => m.subject === 'Reset your password')!, '/reset-password');
    expect((await post(browser(a), '/auth/password/reset', { token: reset, newPassword: 'the new password, stolen too' })).status).toBe(204);
    // The same browser (its svc_device cookie kept), the new password: a notice again, with its own link.
    expect((await thief.login(user.email, 'the new password, stolen too')).status).toBe(200);
    await settled(a);
    expect(notices(user.email)).toHaveLength(2);
  });

  it('after not-me the password works nowhere (step-up, its own change), and the reset link comes even past the mail cap', async () => {
    const user = await a.createUser();
    const mine = browser(a);
    expect((await mine.login(user.email, user.password)).status).toBe(200);
    // Three forgot requests first: the per-address cap must not keep the not-me reset link from the owner.
    for (let i = 0; i < 3; i++) expect((await post(browser(a), '/auth/password/forgot', { email: user.email })).status).toBe(202);
    await settled(a);
    const before = smtp.to(user.email).filter((m) => m.subject === 'Reset your password').length;
    expect((await browser(a, UA.firefox).login(user.email, user.password)).status).toBe(200);
    const token = tokenFrom((await smtp.waitFor(user.email, before + 1)).find((m) => m.subject === 'New login to your account')!, '/not-me');
    expect((await post(browser(a), '/auth/not-me', { token })).status).toBe(204);
    await settled(a);
    expect(smtp.to(user.email).filter((m) => m.subject === 'Reset your password')).toHaveLength(before + 1);

    // The owner's own session lives on, but the locked password proves nothing there either.
    expect((await mine.fetch('/auth/session')).status).toBe(200);
    const stepUp = await post(mine, '/auth/reauthenticate', { password: user.password });
    expect(stepUp.status).toBe(403);
    expect(await codeOf(stepUp)).toBe('password_reset_required');
    const change = await post(mine, '/auth/password', { currentPassword: user.password, newPassword: 'another long password' });
    expect(change.status).toBe(403);
    expect(await codeOf(change)).toBe('password_reset_required');
  });

  it('not-me cut short by a failure keeps its link for the retry; an admin-set password ends the lock', async () => {
    const user = await a.createUser();
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
    expect((await browser(a, UA.firefox).login(user.email, user.password)).status).toBe(200);
    const token = tokenFrom((await smtp.waitFor(user.email)).find((m) => m.subject === 'New login to your account')!, '/not-me');
    const auth = a.instance.auth;
    const revoke = auth.revokeApiKeys.bind(auth);
    auth.revokeApiKeys = () => Promise.reject(new UnavailableError('db'));
    try {
      expect((await post(browser(a), '/auth/not-me', { token })).status).toBe(503);
    } finally {
      auth.revokeApiKeys = revoke;
    }
    expect((await post(browser(a), '/auth/not-me', { token })).status).toBe(204);
    expect(await codeOf(await browser(a).login(user.email, user.password))).toBe('password_reset_required');

    const admin = await a.createUser({ admin: true });
    const ops = browser(a);
    expect((await ops.login(admin.email, admin.password)).status).toBe(200);
    expect((await ops.fetch(`/auth/users/${user.id}`, { method: 'PATCH', json: { password: 'set by the admin now' } })).status).toBe(200);
    expect((await browser(a).login(user.email, 'set by the admin now')).status).toBe(200);
  });

  it(`at most ${NOTICE_CAP.count} notices per user an hour: a thief cycling devices mails ${NOTICE_CAP.count}, the rest log new_device_notice_capped and stay unknown`, async () => {
    const lines: string[] = [];
    const capped = await createTestApp({
      redisUrl,
      env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: FRONTEND },
      config: { server: { trustProxy: 1 } },
      logger: createLogger('info', { write: (line: string) => void lines.push(line) }),
    });
    apps.push(capped);
    const user = await capped.createUser();
    const other = await capped.createUser();
    expect((await browser(capped).login(user.email, user.password)).status).toBe(200);
    expect((await browser(capped).login(other.email, other.password)).status).toBe(200);
    // Two fresh browsers more than the cap: every login goes through, the cap's number of mails come.
    const thieves = Array.from({ length: NOTICE_CAP.count + 2 }, () => browser(capped, UA.firefox));
    for (const t of thieves) expect((await t.login(user.email, user.password)).status).toBe(200);
    await smtp.waitFor(user.email, NOTICE_CAP.count);
    await settled(capped);
    expect(notices(user.email)).toHaveLength(NOTICE_CAP.count);
    const warned = lines.map((l) => JSON.parse(l) as { level: number; code?: string; userId?: string }).filter((l) => l.code === 'new_device_notice_capped');
    expect(warned).toHaveLength(2);
    expect(warned.every((l) => l.level === 40 && l.userId === user.id)).toBe(true);
    // A capped device was never announced, so it is not remembered: the list holds the first and the
    // announced ones (the newest MAX_KNOWN_DEVICES of them), never a capped one.
    const known = JSON.parse((await capped.instance.stores.forRole('sessions').get(`${capped.keyPrefix}known-devices:${user.id}`))!) as string[];
    expect(known).toHaveLength(Math.min(MAX_KNOWN_DEVICES, 1 + NOTICE_CAP.count));
    const cappedIds = new Set(thieves.slice(NOTICE_CAP.count).map((t) => sha256hex(t.cookies.get('svc_device')!)));
    expect(cappedIds.size).toBe(2);
    expect(known.some((k) => cappedIds.has(k))).toBe(false);
    // The cap is the user's own: another user's new device still mails.
    expect((await browser(capped, UA.firefox).login(other.email, other.password)).status).toBe(200);
    await smtp.waitFor(other.email, 1);
    expect(notices(other.email)).toHaveLength(1);
  });

  it('a not-me link expires after 7 days (clock moved, not slept)', async () => {
    const user = await a.createUser();
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/not-me');
    const devices = a.instance.auth.devices;
    devices.now = () => Date.now() + 7 * 24 * 60 * 60 * 1000 + 1000;
    try {
      expect(await codeOf(await post(browser(a), '/auth/not-me', { token }))).toBe('invalid_token');
    } finally {
      devices.now = Date.now;
    }
  });

  it('auth.notices.newDevice true without SVC_SMTP_URL starts with a warning that no notice can be sent', async () => {
    const lines: string[] = [];
    const mute = await createTestApp({ redisUrl, env: { SVC_FRONTEND_URLS: FRONTEND }, config: { auth: { notices: { newDevice: true } } }, logger: createLogger('info', { write: (line: string) => void lines.push(line) }) });
    apps.push(mute);
    const warned = lines.map((l) => JSON.parse(l) as { level: number; code?: string; msg: string }).filter((l) => l.code === 'new_device_notices_without_mail');
    expect(warned).toHaveLength(1);
    expect(warned[0]!.level).toBe(40);
    expect(warned[0]!.msg).toContain('SVC_SMTP_URL');
  });

  it('auth.notices.newDevice false, or no SVC_SMTP_URL: no notice', async () => {
    const off = await createTestApp({ redisUrl, env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: FRONTEND }, config: { auth: { notices: { newDevice: false } } } });
    apps.push(off);
    const email = `d${randomUUID().slice(0, 8)}@example.com`;
    const user = await off.createUser({ email });
    expect((await browser(off).login(user.email, user.password)).status).toBe(200);
    expect((await browser(off).login(user.email, user.password)).status).toBe(200);
    await settled(off);
    expect(notices(email)).toHaveLength(0);
  });
});
