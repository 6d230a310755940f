// Captcha on risk (CONTRACT 14, issue 56) against a REAL siteverify server on loopback (node:http) that
// records every form it gets: a caller without failed logins is never asked; after 3 per email+IP or 20
// per IP, login, sign-up, forgot-password and magic-link requests need `captchaToken`; only
// `success: true` passes (a verify endpoint that is down, 500 or HTML is 400 `captcha_failed`). Two
// instances on a real Redis share the counters, parallel guesses are counted before they are answered,
// and concurrent good logins never count.

import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import type { Database } from '../../src/db/index.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { codeBlocks, readDoc } from '../support/docs.ts';
import { startSmtp, type TestSmtp } from '../support/smtp.ts';

const redisUrl = inject('redisUrl') || undefined;
const SECRET = 'captcha-secret-for-tests';
const SITE_KEY = '1x00000000000000000000AA';

type VerifyMode = 'normal' | 'status500' | 'html' | 'stringly';
let verify: Server;
let verifyUrl: string;
let verifyMode: VerifyMode = 'normal';
const forms: URLSearchParams[] = [];

let smtp: TestSmtp;
const apps: TestApp[] = [];

beforeAll(async () => {
  smtp = await startSmtp();
  verify = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      forms.push(form);
      if (verifyMode === 'status500') return void res.writeHead(500).end('{"success":true}');
      if (verifyMode === 'stringly') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"success":"true"}');
      if (verifyMode === 'html') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>success</html>');
      const ok = req.headers['content-type'] === 'application/x-www-form-urlencoded' && form.get('secret') === SECRET && form.get('response') === 'good-token';
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ok ? { success: true } : { success: false, 'error-codes': ['invalid-input-response'] }));
    });
  });
  await new Promise<void>((resolve) => verify.listen(0, '127.0.0.1', resolve));
  verifyUrl = `http://127.0.0.1:${(verify.address() as AddressInfo).port}/siteverify`;
});

afterAll(async () => {
  for (const a of apps) await a.close();
  await smtp?.close();
  verify.closeAllConnections();
  await new Promise((resolve) => verify.close(resolve));
});

beforeEach(() => {
  forms.length = 0;
  verifyMode = 'normal';
});

async function app(opts: { captcha?: Record<string, unknown> | null; keyPrefix?: string; redis?: boolean; db?: Database } = {}): Promise<TestApp> {
  const captcha = opts.captcha === null ? undefined : { provider: 'turnstile', siteKey: SITE_KEY, secretEnv: 'TEST_CAPTCHA_SECRET', verifyUrl, ...opts.captcha };
  const a = await createTestApp({
    db: opts.db,
    redisUrl: opts.redis === false ? undefined : redisUrl,
    env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: 'http://localhost:5173', TEST_CAPTCHA_SECRET: SECRET },
    config: { auth: { signup: { enabled: true }, magicLink: { enabled: true }, ...(captcha ? { captcha } : {}), ...(opts.keyPrefix ? { store: { keyPrefix: opts.keyPrefix } } : {}) }, server: { trustProxy: 1 } },
  });
  apps.push(a);
  return a;
}

let lastIp = 0;
const newIp = () => `10.57.${(++lastIp >> 8) & 255}.${lastIp & 255}`;
function browser(a: TestApp, ip = newIp()): TestClient {
  const c = a.client();
  const raw = c.fetch.bind(c);
  c.fetch = (p, init = {}) => raw(p, { ...init, headers: { 'x-forwarded-for': ip, ...(init.headers as Record<string, string>) } });
  c.login = (email, password) => c.fetch('/auth/login', { method: 'POST', json: { email, password } });
  return c;
}
const post = (c: TestClient, p: string, json: unknown) => c.fetch(p, { method: 'POST', json });
const errorOf = async (res: Response) => ((await res.json()) as { error?: { code: string; details?: unknown } }).error;
const newEmail = () => `c${randomUUID().slice(0, 8)}@example.com`;

describe('GET /auth/config', () => {
  it('off: exactly {"captcha":null,"signup","magicLink","passkeys","providers"}, providers as /auth/oauth/providers', async () => {
    const a = await app({ captcha: null, redis: false });
    const res = await a.fetch('/auth/config');
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['captcha', 'magicLink', 'passkeys', 'providers', 'signup']);
    expect(body).toEqual({ captcha: null, signup: true, magicLink: true, passkeys: true, providers: await (await a.fetch('/auth/oauth/providers')).json() });
  });

  it('on: the provider and the site key, never the secret', async () => {
    const a = await app({ redis: false });
    const text = await (await a.fetch('/auth/config')).text();
    expect(JSON.parse(text).captcha).toEqual({ provider: 'turnstile', siteKey: SITE_KEY });
    expect(text).not.toContain(SECRET);
  });

  it("docs/security.md's config block and command start svc with the breach check and the captcha on, as the page says", async () => {
    const page = readDoc('docs/security.md');
    const block = codeBlocks(page, 'json').find((b) => b.includes('breachCheck') && b.includes('captcha'));
    expect(block, 'the takeover defences config block').toBeDefined();
    const config = JSON.parse(block!) as { auth: { captcha: { secretEnv: string } } };
    const command = codeBlocks(page, 'sh').find((b) => b.includes(`${config.auth.captcha.secretEnv}=`));
    expect(command, 'a command that sets the secret variable').toBeDefined();
    const env = Object.fromEntries([...command!.matchAll(/\b([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    const a = await createTestApp({ env, config });
    apps.push(a);
    expect(a.instance.auth.breachedPasswords.enabled).toBe(true);
    const shown = /`GET \/auth\/config` then shows `"captcha":(\{[^`]*\})`/.exec(page)?.[1];
    expect(shown).toBeDefined();
    expect(((await (await a.fetch('/auth/config')).json()) as { captcha: unknown }).captcha).toEqual(JSON.parse(shown!));
  });

  it('start-up stops when the variable auth.captcha.secretEnv names is not set', async () => {
    await expect(loadConfig({ SVC_APP_PATH: '/nonexistent-svc-app' }, { raw: { auth: { captcha: { provider: 'hcaptcha', siteKey: 'k', secretEnv: 'NOT_SET_CAPTCHA_SECRET' } } } })).rejects.toThrow(/NOT_SET_CAPTCHA_SECRET/);
  });
});

describe('captcha on risk', () => {
  let a: TestApp;
  beforeAll(async () => {
    a = await app({ redis: false });
  });

  it('a caller without failures is never asked, whatever the route', async () => {
    const user = await a.createUser();
    const c = browser(a);
    expect((await c.login(user.email, user.password)).status).toBe(200);
    expect((await post(c, '/auth/password/forgot', { email: user.email })).status).toBe(202);
    expect((await post(c, '/auth/login/link', { email: user.email })).status).toBe(202);
    expect((await post(c, '/auth/signup', { email: newEmail(), password: 'a long enough password' })).status).toBe(202);
    expect(forms).toHaveLength(0);
  });

  it('after 3 failed logins per email+IP: 400 captcha_required with the site key; a good token passes, a bad one is captcha_failed', async () => {
    const user = await a.createUser();
    const ip = newIp();
    const c = browser(a, ip);
    for (let i = 0; i < 3; i++) expect((await c.login(user.email, 'wrong password')).status).toBe(401);
    const asked = await c.login(user.email, user.password);
    expect(asked.status).toBe(400);
    expect(await errorOf(asked)).toMatchObject({ code: 'captcha_required', details: [{ siteKey: SITE_KEY }] });
    expect(forms).toHaveLength(0);

    const bad = await post(c, '/auth/login', { email: user.email, password: user.password, captchaToken: 'bad-token' });
    expect(bad.status).toBe(400);
    expect((await errorOf(bad))?.code).toBe('captcha_failed');
    const good = await post(c, '/auth/login', { email: user.email, password: user.password, captchaToken: 'good-token' });
    expect(good.status).toBe(200);
    expect(forms.at(-1)!.get('secret')).toBe(SECRET);
    expect(forms.at(-1)!.get('response')).toBe('good-token');
    expect(forms.at(-1)!.get('remoteip')).toBe(ip);

    // Another IP for the same email is not asked; the same email+IP after a success is not either.
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
    expect((await c.login(user.email, user.password)).status).toBe(200);
  });

  it('sign-up, forgot-password and magic-link from a risky email+IP ask too, and take a good token', async () => {
    const user = await a.createUser();
    const c = browser(a);
    for (let i = 0; i < 3; i++) expect((await c.login(user.email, 'wrong password')).status).toBe(401);
    for (const [p, body] of [
      ['/auth/password/forgot', { email: user.email }],
      ['/auth/login/link', { email: user.email }],
      ['/auth/signup', { email: user.email, password: 'a long enough password' }],
    ] as const) {
      const res = await post(c, p, body);
      expect(res.status, p).toBe(400);
      expect((await errorOf(res))?.code, p).toBe('captcha_required');
      expect((await post(c, p, { ...body, captchaToken: 'good-token' })).status, p).toBe(202);
      expect((await post(c, p, { ...body, captchaToken: 'nope' })).status, p).toBe(400);
    }
  });

  it('20 failed logins from one IP (any emails) ask every email from that IP', async () => {
    const ip = newIp();
    for (let i = 0; i < 20; i++) expect((await browser(a, ip).login(newEmail(), 'wrong password')).status).toBe(401);
    const user = await a.createUser();
    expect((await errorOf(await browser(a, ip).login(user.email, user.password)))?.code).toBe('captcha_required');
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
  });

  for (const fault of ['down', 'status500', 'html', 'success as a string'] as const) {
    it(`a verify endpoint that is ${fault}: 400 captcha_failed, never a pass`, async () => {
      const b = fault === 'down' ? await app({ redis: false, captcha: { verifyUrl: 'http://127.0.0.1:9/siteverify' } }) : a;
      if (fault !== 'down') verifyMode = fault === 'success as a string' ? 'stringly' : fault;
      const user = await b.createUser();
      const c = browser(b);
      for (let i = 0; i < 3; i++) await c.login(user.email, 'wrong password');
      const res = await post(c, '/auth/login', { email: user.email, password: user.password, captchaToken: 'good-token' });
      expect(res.status).toBe(400);
      expect((await errorOf(res))?.code).toBe('captcha_failed');
    });
  }

  it('captchaToken is bounded (4096 characters) and must be a string', async () => {
    const c = browser(a);
    for (const captchaToken of ['x'.repeat(4097), 42]) {
      const res = await post(c, '/auth/login', { email: newEmail(), password: 'whatever', captchaToken });
      expect(res.status).toBe(400);
      expect((await errorOf(res))?.code).toBe('validation_failed');
    }
  });
});

describe.skipIf(!redisUrl)('captcha on risk, two instances on Redis', () => {
  it('failures on either instance count together; parallel guesses are counted before the check', async () => {
    const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;
    const [one, two] = [await app({ keyPrefix }), await app({ keyPrefix })];
    const user = await one.createUser();
    const ip = newIp();
    expect((await browser(one, ip).login(user.email, 'wrong 1')).status).toBe(401);
    expect((await browser(two, ip).login(user.email, 'wrong 2')).status).toBe(401);
    expect((await browser(one, ip).login(user.email, 'wrong 3')).status).toBe(401);
    expect((await errorOf(await browser(two, ip).login(user.email, user.password)))?.code).toBe('captcha_required');

    // 12 parallel guesses for a fresh email+IP over both instances: at most 3 are told 401 (at most 5 reach
    // the password check, the lockout's bound; those past 3 failures are answered captcha_required).
    const other = await one.createUser();
    const ip2 = newIp();
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => browser(i % 2 ? one : two, ip2).login(other.email, `wrong ${i}`)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(3);
    // The rest: 400 captcha_required, or 429 while the lockout counter holds the attempts in flight.
    expect(statuses.filter((s) => s === 401 || s === 400 || s === 429).length).toBe(12);
    expect(statuses).toContain(400);
  });

  it('concurrent good logins never count: only wrong passwords (401) do, and the risk still comes after 3', async () => {
    // Two instances as in production: one store, one database.
    const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;
    const db = EmbeddedDatabase.inMemory();
    const [one, two] = [await app({ keyPrefix, db }), await app({ keyPrefix, db })];
    const both = (i: number) => (i % 2 ? one : two);

    // One email+IP: 2 failures, then 3 good logins at once (the lockout's 5 is not passed): none is asked.
    const user = await one.createUser();
    const ip = newIp();
    for (let i = 0; i < 2; i++) expect((await browser(both(i), ip).login(user.email, 'wrong password')).status).toBe(401);
    const pair = await Promise.all([0, 1, 2].map((i) => browser(both(i), ip).login(user.email, user.password)));
    expect(pair.map((r) => r.status)).toEqual([200, 200, 200]);

    // One IP: 17 failures (any emails), then 5 users' good logins at once: none is asked.
    const ip2 = newIp();
    for (let i = 0; i < 17; i++) expect((await browser(both(i), ip2).login(newEmail(), 'wrong password')).status).toBe(401);
    const users = await Promise.all([0, 1, 2, 3, 4].map(() => one.createUser()));
    const crowd = await Promise.all(users.map((u, i) => browser(both(i), ip2).login(u.email, u.password)));
    expect(crowd.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(forms).toHaveLength(0);

    // The failures still count: 3 more from that IP reach 20, and the next caller from there is asked.
    for (let i = 0; i < 3; i++) expect((await browser(both(i), ip2).login(newEmail(), 'wrong password')).status).toBe(401);
    expect((await errorOf(await browser(two, ip2).login(users[0]!.email, users[0]!.password)))?.code).toBe('captcha_required');
  });
});
