// Sign in with Apple in a real browser (account-security issue, part 4): Debian's Chromium shows that
// the cross-site form_post from Apple's page carries NO svc cookie (the SameSite=Lax state cookie stays
// home, which is why a POST-only callback could never complete), and that svc's 303 to the GET callback,
// a top-level navigation, carries it and completes the login.
//
// svc runs in-process on a real socket (so its calls to appleid.apple.com reach the local stand-in
// through routeHosts). The browser reaches https://appleid.apple.com itself: its host resolver maps the
// name to the stand-in's HTTPS listener (a real OpenID provider, test/support/apple-idp.ts, with a
// throw-away certificate for appleid.apple.com made by openssl), so every page, redirect and cookie
// is Apple's origin to the browser.

import { serve, type ServerType } from '@hono/node-server';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Request as PwRequest } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAppleIdp, type AppleIdp } from '../support/apple-idp.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { routeHosts } from '../support/route-hosts.ts';
import { freePort, tempDir } from '../support/spawn.ts';
import { CHROMIUM, CHROMIUM_ARGS, screenshots } from './support/browser.ts';
import { missingPrograms } from './support/deployment.ts';

const APPLE = 'https://appleid.apple.com';
const CLIENT_ID = 'com.example.svc.browser';
const missing = missingPrograms();
if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but these programs are missing: ${missing.join(', ')}`);
if (missing.length) process.stderr.write(`\n!!!!!!!! SKIPPED: the Sign in with Apple browser test (missing ${missing.join(', ')}) !!!!!!!!\n\n`);

describe.skipIf(missing.length > 0)('Sign in with Apple in Chromium: form_post, then the 303 GET with the Lax state cookie', () => {
  let origin: string;
  let t: TestApp;
  let server: ServerType;
  let apple: AppleIdp;
  let restore: () => void;
  let browser: Browser;
  let context: BrowserContext;
  const shots = screenshots('apple');

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    const callback = `${origin}/api/auth/oauth/apple/callback`;
    const dir = tempDir('svc-apple-tls-');
    const [key, cert] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=appleid.apple.com', '-addext', 'subjectAltName=DNS:appleid.apple.com', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    const tls = { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
    apple = await startAppleIdp({ clientId: CLIENT_ID, redirectUris: [callback], tls });
    restore = routeHosts({ 'appleid.apple.com': apple.url });
    t = await createTestApp({ env: { SVC_SERVER_BASE_URL: origin, SVC_FRONTEND_URLS: origin }, config: { auth: { cookie: { secure: false } } } });
    server = serve({ fetch: t.app.fetch, port, hostname: '127.0.0.1' });
    const admin = t.client();
    const adminUser = await t.createUser({ admin: true });
    expect((await admin.login(adminUser.email, adminUser.password)).status).toBe(200);
    const created = await admin.fetch('/auth/providers', {
      method: 'POST',
      json: { providerId: 'apple', type: 'arctic', clientId: CLIENT_ID, clientSecret: apple.p8, config: { teamId: apple.teamId, keyId: apple.keyId } },
    });
    expect(created.status).toBe(201);
    expect(((await created.json()) as { redirectUri: string }).redirectUri).toBe(callback);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP appleid.apple.com 127.0.0.1:${apple.tlsPort}`],
      headless: true,
      timeout: 60_000,
    });
    // The stand-in's certificate is self-made; everything else about the TLS connection is real.
    context = await browser.newContext({ ignoreHTTPSErrors: true });
    // Anything off this machine is refused (and would fail the login).
    await context.route((u) => u.hostname !== '127.0.0.1' && u.origin !== APPLE, (route) => route.abort('blockedbyclient'));
  });
  afterAll(async () => {
    await browser?.close();
    server?.close();
    restore?.();
    await t?.close();
    await apple?.close();
  });

  it('logs in: the POST from Apple carries no cookie, the GET it is redirected to carries the state cookie, the name comes from `user`', async () => {
    const login = 'ada-browser';
    apple.setAccount(login, { email: 'ada@privaterelay.appleid.com', email_verified: 'true' });
    const page = await context.newPage();
    const callbacks: { method: string; cookie: string | undefined; origin: string | undefined }[] = [];
    const seen: Promise<void>[] = [];
    page.on('request', (req: PwRequest) => {
      if (!req.url().startsWith(`${origin}/api/auth/oauth/apple/callback`)) return;
      seen.push(req.allHeaders().then((h) => void callbacks.push({ method: req.method(), cookie: h.cookie, origin: h.origin })));
    });

    await page.goto(`${origin}/api/auth/oauth/apple`);
    expect(new URL(page.url()).origin).toBe(APPLE);
    await shots.take(page, 'apple sign-in page (the identity provider login form)');
    await page.fill('input[name=login]', login);
    await page.fill('input[name=password]', 'any password');
    await Promise.all([page.waitForURL((u) => u.origin === APPLE && u.pathname.startsWith('/interaction/')), page.click('button[type=submit]')]);
    await shots.take(page, 'apple consent page');
    // Apple's page of a first authorization posts the person's name too.
    apple.nextUser = { name: { firstName: 'Ada', lastName: 'Browser' } };
    await Promise.all([page.waitForURL(`${origin}/`), page.click('button[type=submit]')]);
    await Promise.all(seen);

    // First the cross-site POST from Apple's origin, without any cookie; then the GET with the state cookie.
    expect(callbacks.map((c) => c.method)).toEqual(['POST', 'GET']);
    // Chromium sent `Origin: null` for this cross-site form POST (not Apple's origin): the callback must
    // take either, and does, being the one POST the Origin check lets in from another site.
    expect([APPLE, 'null']).toContain(callbacks[0]!.origin);
    expect(callbacks[0]!.cookie).toBeUndefined();
    expect(callbacks[1]!.cookie).toMatch(/(^|; )svc_oauth_state=/);

    const session = await context.request.get(`${origin}/api/auth/session?expand=user`);
    expect(session.status()).toBe(200);
    expect(((await session.json()) as { user: Record<string, unknown> }).user).toMatchObject({ email: 'ada@privaterelay.appleid.com', firstname: 'Ada', lastname: 'Browser', email_verified: true });
    const cookies = await context.cookies(origin);
    expect(cookies.find((c) => c.name === 'sid_app')).toMatchObject({ httpOnly: true });
    expect(cookies.find((c) => c.name === 'svc_oauth_state')).toBeUndefined();
    await shots.take(page, 'signed in after the form_post and the 303');
  });
});
