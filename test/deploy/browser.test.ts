// svc as operators deploy it and frontends call it (issue 19): nginx from deploy/nginx.conf in front of
// two svc processes (round robin) sharing Redis and MongoDB, a workbench instance on the same host, a
// real OpenID provider, and headless Chromium clicking through the test frontend (test/deploy/frontend/).
// Each step leaves a screenshot in the folder printed at the start (test-results/deploy/browser/).
// SVC_DEPLOY_HOST=localhost runs it all with `localhost` origins instead of `127.0.0.1`.

import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { addSocketIoClient, keepOnMachine, launchBrowser, screenshots, watchRequests, type Screenshots } from './support/browser.ts';
import { missingPrograms, requestsLogged, startDeployment, type Deployment } from './support/deployment.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');
const PASSWORD = 'a long password for the browser';

// Like the test servers (test/support/global-setup.ts): missing programs skip the suite loudly, or fail it with CI=true.
const missing = missingPrograms();
if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but the deployment suite lacks: ${missing.join(', ')}`);
if (missing.length) process.stderr.write(`\n!!!!!!!! SKIPPED: the deployment suite needs ${missing.join(' and ')} !!!!!!!!\n\n`);

describe.skipIf(!redisUrl || !mongoUrl || missing.length > 0)('deployment: nginx, two instances, Chromium', () => {
  let d: Deployment;
  let browser: Browser;
  let shots: Screenshots;
  const started = Date.now();

  beforeAll(async () => {
    shots = screenshots('browser');
    const launching = launchBrowser(); // beside the deployment's start-up; closed in afterAll whatever happens
    try {
      d = await startDeployment({ redisUrl, mongoUrl, host: process.env.SVC_DEPLOY_HOST === 'localhost' ? 'localhost' : '127.0.0.1' });
    } finally {
      browser = await launching;
    }
    process.stdout.write(`deployment up in ${((Date.now() - started) / 1000).toFixed(1)} s: app ${d.appOrigin}, workbench ${d.workbenchOrigin}, dev server ${d.devOrigin}\n`);
  });

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    if (shots) process.stdout.write(`screenshots (${shots.dir}):\n${shots.taken.map((s) => `  ${s}`).join('\n')}\n`);
    process.stdout.write(`deployment suite: ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  });

  /** Requests each context tried to send off this machine (aborted): only the IdP's pages may. */
  const offMachine = new Map<BrowserContext, string[]>();

  async function newPage(opts: { route?: boolean } = {}): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 900, height: 640 } });
    if (opts.route ?? true) offMachine.set(context, await keepOnMachine(context));
    return { context, page: await context.newPage() };
  }

  /** Signs in through the page's password form at `origin/login`; resolves once the signed-in page shows. */
  async function passwordLogin(page: Page, origin: string, email: string, shot?: string) {
    await page.goto(`${origin}/login`);
    await page.locator('input[name=email]').fill(email);
    await page.locator('input[name=password]').fill(email === d.admin.email ? d.admin.password : PASSWORD);
    if (shot) await shots.take(page, shot);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expect.poll(() => page.locator('#who').textContent(), { timeout: 15_000 }).toBe(`Signed in as ${email}`);
  }

  /** `fetch(url, {credentials})` from the page, `times` times in a row: the statuses. */
  const fetchFromPage = (page: Page, url: string, times: number, credentials: RequestCredentials = 'include') =>
    page.evaluate(
      async ([u, n, c]) => {
        const statuses: number[] = [];
        for (let i = 0; i < n; i++) statuses.push((await fetch(u, { credentials: c })).status);
        return statuses;
      },
      [url, times, credentials] as const,
    );

  /**
   * `GET url` (the session route, through nginx) 4 times from the page; every answer must be
   * `expected`, and each of the two instances must have answered (their request logs say so).
   */
  async function sessionOnBothInstances(page: Page, url: string, expected: number, credentials: RequestCredentials = 'include') {
    const route = { method: 'GET', path: '/auth/session', status: expected };
    const before = d.app.map((svc) => requestsLogged(svc, route));
    expect(await fetchFromPage(page, url, 4, credentials)).toEqual([expected, expected, expected, expected]);
    // Log lines are written asynchronously: wait for them.
    await expect.poll(() => d.app.map((svc, i) => requestsLogged(svc, route) > before[i]!), { timeout: 10_000 }).toEqual([true, true]);
  }

  it('password login through the page: HttpOnly cookie, and /api/auth/session answers on both instances', async () => {
    const email = 'bob@example.com';
    await d.createUser(email, PASSWORD);
    const { context, page } = await newPage();
    await passwordLogin(page, d.appOrigin, email, 'password login: the form');
    await shots.take(page, 'password login: signed in');

    const cookie = (await context.cookies(d.appOrigin)).find((c) => c.name === 'sid_app');
    expect(cookie, 'the session cookie').toBeDefined();
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/', secure: true });
    expect(await page.evaluate(() => document.cookie), 'page JavaScript cannot read the session cookie').not.toContain(cookie!.value);

    await sessionOnBothInstances(page, '/api/auth/session', 200);
    expect(offMachine.get(context), 'the frontend and svc ask nothing of another host').toEqual([]);

    // Through the proxy, authenticated JSON carries the API's security headers.
    const res = await d.adminFetch('/auth/session');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
  });

  it('the same from a frontend on another origin (a dev server port): CORS with credentials, preflight included', async () => {
    const email = 'dev@example.com';
    await d.createUser(email, PASSWORD);
    // No routing here: with a route in place Playwright would answer the preflight itself.
    const { context, page } = await newPage({ route: false });
    const requests = watchRequests(context);
    const preflights = () => d.app.reduce((n, svc) => n + requestsLogged(svc, { method: 'OPTIONS', path: '/auth/login', status: 204 }), 0);
    const preflightsBefore = preflights();
    const cors: { url: string; allowOrigin: string | null; allowCredentials: string | null }[] = [];
    page.on('response', (res) => {
      if (res.url().startsWith(`${d.appOrigin}/api/`)) cors.push({ url: res.url(), allowOrigin: res.headers()['access-control-allow-origin'] ?? null, allowCredentials: res.headers()['access-control-allow-credentials'] ?? null });
    });

    await passwordLogin(page, d.devOrigin, email, 'other origin: the dev server login form');
    await shots.take(page, 'other origin: signed in through CORS');
    expect(new URL(page.url()).origin).toBe(d.devOrigin);
    // The JSON login is not a simple request: the browser asked first (OPTIONS), and svc said yes
    // (log lines are written asynchronously: wait for it).
    await expect.poll(preflights, { timeout: 10_000 }).toBeGreaterThan(preflightsBefore);
    const login = cors.find((r) => r.url === `${d.appOrigin}/api/auth/login`);
    expect(login).toEqual({ url: `${d.appOrigin}/api/auth/login`, allowOrigin: d.devOrigin, allowCredentials: 'true' });

    await sessionOnBothInstances(page, `${d.appOrigin}/api/auth/session`, 200);
    expect(await fetchFromPage(page, `${d.appOrigin}/api/auth/session`, 1, 'omit'), 'without credentials there is no session').toEqual([401]);

    // The preflight as svc answers it through nginx.
    const preflight = await fetch(`${d.appOrigin}/api/auth/login`, {
      method: 'OPTIONS',
      headers: { origin: d.devOrigin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(d.devOrigin);
    expect(preflight.headers.get('access-control-allow-credentials')).toBe('true');
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('content-type');
    const loopback = (url: string) => ['127.0.0.1', 'localhost'].includes(new URL(url).hostname);
    expect(requests.map((r) => r.url).filter((url) => !loopback(url)), 'the frontend and svc ask nothing of another host').toEqual([]);
  });

  it('/login?redirect=/reports through the identity provider\'s real pages lands on /reports, signed in', async () => {
    const { page } = await newPage();
    await page.goto(`${d.appOrigin}/login?redirect=/reports`);
    const button = page.getByRole('button', { name: `Sign in with ${d.oauthProvider.label}` });
    await button.waitFor();
    await shots.take(page, 'oauth: login page with the provider button');
    await button.click();

    await page.waitForURL((url) => url.origin !== d.appOrigin);
    await page.locator('input[name=login]').fill(d.oauthProvider.login);
    await page.locator('input[name=password]').fill('any password');
    await shots.take(page, 'oauth: the identity provider login page');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).waitFor();
    await shots.take(page, 'oauth: the identity provider consent page');
    await page.getByRole('button', { name: 'Continue' }).click();

    await page.waitForURL(`${d.appOrigin}/reports`);
    await expect.poll(() => page.locator('#who').textContent(), { timeout: 15_000 }).toBe(`Signed in as ${d.oauthProvider.email}`);
    expect(await page.locator('#page').textContent()).toBe('reports');
    expect(await page.getByText(`Provider: ${d.oauthProvider.id}`).count()).toBe(1);
    await shots.take(page, 'oauth: landed on /reports');
  });

  it('an auth_error is shown to the person and removed from the address bar', async () => {
    const { page } = await newPage();
    const redirects: string[] = [];
    page.on('response', (res) => {
      const location = res.headers().location;
      if (location && res.url().startsWith(`${d.appOrigin}/api/auth/oauth/${d.oauthProvider.id}/callback`)) redirects.push(location);
    });
    await page.goto(`${d.appOrigin}/login`);
    await page.getByRole('button', { name: `Sign in with ${d.oauthProvider.label}` }).click();
    await page.waitForURL((url) => url.origin !== d.appOrigin);
    await page.getByRole('link', { name: '[ Cancel ]' }).click(); // the person cancels at the identity provider

    const snackbar = page.getByRole('alert');
    await expect.poll(() => snackbar.textContent(), { timeout: 15_000 }).toBe('Sign-in was cancelled at the identity provider.');
    expect(await snackbar.isVisible()).toBe(true);
    expect(redirects, 'svc sent the browser to /?auth_error=access_denied').toEqual(['/?auth_error=access_denied']);
    expect(page.url(), 'the code is gone from the address bar').toBe(`${d.appOrigin}/`);
    await shots.take(page, 'auth_error: shown, and gone from the address bar');
  });

  it('an app session (sid_app) and a workbench session (sid_workbench) on one host do not overwrite each other', async () => {
    const email = 'both@example.com';
    await d.createUser(email, PASSWORD);
    const { context, page } = await newPage();
    const cookies = async () => Object.fromEntries((await context.cookies(d.appOrigin)).map((c) => [c.name, c.value]));

    await passwordLogin(page, d.appOrigin, email);
    await shots.take(page, 'two cookies: signed in to the app');
    const workbench = await context.newPage();
    await passwordLogin(workbench, d.workbenchOrigin, d.admin.email, 'two cookies: the workbench login form');
    await shots.take(workbench, 'two cookies: signed in to the workbench');

    const jar = await cookies();
    expect(Object.keys(jar).filter((n) => n.startsWith('sid_')).sort()).toEqual(['sid_app', 'sid_workbench']);
    const who = async (p: Page) => p.evaluate(async () => ((await (await fetch('/api/auth/session?expand=user', { credentials: 'include' })).json()) as { user: { email: string } }).user.email);
    expect(await who(page)).toBe(email);
    expect(await who(workbench)).toBe(d.admin.email);

    // A second workbench login replaces the workbench session only.
    await passwordLogin(workbench, d.workbenchOrigin, d.admin.email);
    const again = await cookies();
    expect(again.sid_app).toBe(jar.sid_app);
    expect(again.sid_workbench).not.toBe(jar.sid_workbench);
    expect(await who(page)).toBe(email);

    // Logging out of the app leaves the workbench signed in.
    await page.reload();
    await page.getByRole('button', { name: 'Log out', exact: true }).click();
    await page.getByRole('heading', { name: 'Signed out' }).waitFor();
    expect((await cookies()).sid_app).toBeUndefined();
    expect(await fetchFromPage(page, '/api/auth/session', 1)).toEqual([401]);
    expect(await who(workbench)).toBe(d.admin.email);
    await workbench.reload();
    await expect.poll(() => workbench.locator('#who').textContent()).toBe(`Signed in as ${d.admin.email}`);
    await shots.take(workbench, 'two cookies: the workbench still signed in after the app logged out');
  });

  it('logout is refused afterwards, even with the old cookie; logout-all ends the session of a second tab', async () => {
    const email = 'carol@example.com';
    await d.createUser(email, PASSWORD);
    const { context, page } = await newPage();
    await passwordLogin(page, d.appOrigin, email);
    const old = (await context.cookies(d.appOrigin)).find((c) => c.name === 'sid_app')!;
    await page.getByRole('button', { name: 'Log out', exact: true }).click();
    await page.getByRole('heading', { name: 'Signed out' }).waitFor();
    await shots.take(page, 'logout: signed out');
    await sessionOnBothInstances(page, '/api/auth/session', 401);
    await context.addCookies([old]); // the cookie as it was before logout: the session behind it is gone
    await sessionOnBothInstances(page, '/api/auth/session', 401);
    await page.goto(`${d.appOrigin}/`);
    await page.locator('#login').waitFor();
    await shots.take(page, 'logout: the old cookie is refused, back to the login form');

    // Two sessions of one user: this browser, and a second tab in another browser profile.
    const first = await newPage();
    const second = await newPage();
    await passwordLogin(first.page, d.appOrigin, email);
    await passwordLogin(second.page, d.appOrigin, email);
    await shots.take(second.page, 'logout-all: the second tab signed in');

    // The second tab also holds a realtime connection through nginx: long polling first (every request
    // of it must reach the same instance), then the upgrade to a WebSocket.
    await addSocketIoClient(second.page);
    await second.page.evaluate(() => {
      const w = window as unknown as { io: (opts: object) => { on(e: string, f: (arg: { code: string }) => void): void; io: { engine: { transport: { name: string } } } }; realtime: string[]; socket: unknown };
      const socket = w.io({ path: '/api/socket.io', withCredentials: true });
      w.realtime = [];
      w.socket = socket;
      socket.on('connect', () => w.realtime.push('connect'));
      socket.on('connect_error', (err) => w.realtime.push(`connect_error:${String(err)}`));
      socket.on('sessionEnded', ({ code }) => w.realtime.push(`sessionEnded:${code}`));
    });
    const realtime = () => second.page.evaluate(() => (window as unknown as { realtime: string[] }).realtime);
    const transport = () => second.page.evaluate(() => (window as unknown as { socket: { io: { engine?: { transport: { name: string } } } } }).socket.io.engine?.transport.name);
    await expect.poll(realtime, { timeout: 15_000 }).toEqual(['connect']);
    await expect.poll(transport, { timeout: 15_000 }).toBe('websocket');

    await first.page.getByRole('button', { name: 'Log out everywhere' }).click();
    await first.page.getByRole('heading', { name: 'Signed out' }).waitFor();
    await sessionOnBothInstances(second.page, '/api/auth/session', 401);
    // Whichever instance ended the sessions, the socket's instance closes it (Redis pub/sub).
    await expect.poll(realtime, { timeout: 15_000 }).toEqual(['connect', 'sessionEnded:unauthenticated']);
    await second.page.reload();
    await second.page.locator('#login').waitFor();
    await shots.take(second.page, 'logout-all: the second tab is signed out');
  });

  it('/api/docs renders the API reference with its endpoints, with no request to another host and no CSP violation', async () => {
    const { context, page } = await newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    const requests = watchRequests(context);
    const violations: string[] = [];
    page.on('console', (msg) => {
      if (msg.type() === 'error') violations.push(msg.text());
    });
    // Anything for another host is refused here and fails the test below.
    await context.route((url) => url.origin !== d.appOrigin, (route) => route.abort('blockedbyclient'));

    const res = await page.goto(`${d.appOrigin}/api/docs`);
    expect(res!.status()).toBe(200);
    const headers = res!.headers();
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    expect(headers['x-content-type-options']).toBe('nosniff');
    expect(headers['referrer-policy']).toBe('no-referrer');

    // Scalar renders the document: the first operation open, and the auth group's endpoints listed.
    await page.getByText('Health of the service, its store and its database', { exact: true }).first().waitFor({ timeout: 30_000 });
    for (const endpoint of ['/auth/login', '/auth/logout', '/auth/logout-all', '/auth/session']) {
      await page.getByText(endpoint, { exact: true }).first().waitFor();
    }
    await page.waitForLoadState('networkidle');
    await shots.take(page, 'api docs: the API reference', { fullPage: false });

    const foreign = requests.filter((r) => new URL(r.url).origin !== d.appOrigin && !r.url.startsWith('data:'));
    expect(foreign, 'requests that left the deployment').toEqual([]);
    expect(requests.map((r) => new URL(r.url).pathname)).toEqual(expect.arrayContaining(['/api/docs', '/api/docs/scalar.js', '/api/openapi.json']));
    expect(violations.filter((v) => /Content Security Policy|Refused to/i.test(v)), 'CSP violations').toEqual([]);
  });
});
