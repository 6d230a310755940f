// The admin console (issue 57, CONTRACT 16) in Debian's Chromium behind nginx, as an operator uses it:
// served at <app>/api/admin by two svc instances, signed in with the keyboard alone, every page's main
// task end to end, axe-core on every page (no serious or critical violation) in light and dark mode, a
// non-admin refused without admin data. Screenshots of each page: test-results/deploy/console/.
// One deployment for all pages: each page's tests are a module of test/deploy/console/.

import { Secret, TOTP } from 'otpauth';
import { describe, expect, it } from 'vitest';
import { sleep } from '../support/spawn.ts';
import { consoleSuite, expectHeading, focusedLabel, mainButton, poll } from './console/harness.ts';
import { deploymentTests } from './console/deployment.ts';
import { eventsTests } from './console/events.ts';
import { narrowScreenTests } from './console/narrow.ts';
import { pluginsTests } from './console/plugins.ts';
import { providersTests } from './console/providers.ts';
import { usersTests } from './console/users.ts';
import { workSessionsTests } from './console/work-sessions.ts';
import { missingPrograms } from './support/deployment.ts';

/** `auth.session.freshAge` of the deployment, seconds. */
const FRESH_AGE = 12;

const missing = missingPrograms();
if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but the console browser test lacks: ${missing.join(', ')}`);
if (missing.length) process.stderr.write(`\n!!!!!!!! SKIPPED: the console browser test needs ${missing.join(' and ')} !!!!!!!!\n\n`);

describe.skipIf(missing.length > 0)('the admin console in Chromium behind nginx', () => {
  // auth.session.freshAge short: the step-up test waits it out; every other step-up action answers the dialog if it comes (s.afterStepUp).
  // A custom OAuth2 template from the app config (docs/oauth.md), for the providers page's "from the app" group.
  // A short webhook retry schedule: the webhooks test's delivery fails within a second, to be sent again (Resend).
  const acmeSso = { id: 'acme-sso', displayName: 'Acme SSO', authorizationEndpoint: 'http://localhost:9/authorize', tokenEndpoint: 'http://localhost:9/token', userInfoEndpoint: 'http://localhost:9/userinfo', scopes: ['openid', 'email'] };
  const s = consoleSuite({
    appConfig: { app: { name: 'Acme Notes' }, plugins: ['@svc/plugin-cli-connector'], auth: { session: { freshAge: FRESH_AGE }, providers: { custom: [acmeSso] }, webhooks: { retrySchedule: [0.5] } } },
    env: { SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1' },
  });

  describe('sign-in', () => {
    it('an admin signs in with the keyboard alone and lands on the users page; the sign-in page passes axe-core', async () => {
      const page = await s.newPage();
      await page.goto(s.url);
      await expectHeading(page, 'Sign in');
      expect(await page.title()).toBe('Sign in · Acme Notes admin');
      await s.expectAccessible(page, 'the sign-in page');
      await s.shots.take(page, 'sign-in');
      // The page's heading has the focus (screen readers start there); Tab goes on to the form's fields in order.
      expect(await focusedLabel(page)).toBe('Sign in');
      await page.keyboard.press('Tab');
      expect(await focusedLabel(page)).toBe('Email');
      await page.keyboard.type(s.d.admin.email);
      await page.keyboard.press('Tab');
      expect(await focusedLabel(page)).toBe('Password');
      await page.keyboard.type(s.d.admin.password);
      await page.keyboard.press('Enter');
      await expectHeading(page, 'Users');
      expect(await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Audit log' }).isVisible()).toBe(true);
    });

    it('a wrong password is said, and the page stays on the sign-in form', async () => {
      const page = await s.newPage();
      await s.signIn(page, { email: s.d.admin.email, password: 'not the password' });
      await poll(() => page.locator('#error').textContent()).toMatch(/password is wrong/i);
      await expectHeading(page, 'Sign in');
    });

    it('a non-admin sees "Not allowed" and the console asks the API for no admin data', async () => {
      const email = `plain-${Date.now()}@example.com`;
      await s.d.createUser(email, 'plain user password');
      const page = await s.newPage();
      const asked: string[] = [];
      page.on('request', (req) => asked.push(new URL(req.url()).pathname));
      await s.signIn(page, { email, password: 'plain user password' });
      await expectHeading(page, 'Not allowed');
      expect(await page.getByRole('navigation', { name: 'Console' }).getByRole('link').count()).toBe(0);
      await page.goto(`${s.url}#/users`);
      await expectHeading(page, 'Not allowed');
      expect(asked.filter((p) => /\/auth\/(users|providers|work-sessions|audit|webhooks)/.test(p))).toEqual([]);
      await s.expectAccessible(page, 'the not-allowed page');
      await s.shots.take(page, 'not-allowed');
      await mainButton(page, 'Sign out').click();
      await expectHeading(page, 'Sign in');
    });

    it('an admin with TOTP on: the password, then the code from the authenticator app', async () => {
      const email = `totp-admin-${Date.now()}@example.com`;
      const password = 'totp admin password';
      // Making an admin needs a recent sign-in (step-up); the deployment's admin session is older than freshAge by now.
      expect((await s.d.adminFetch('/auth/reauthenticate', { method: 'POST', body: JSON.stringify({ password: s.d.admin.password }) })).status).toBe(204);
      const created = await s.d.adminFetch('/auth/users', { method: 'POST', body: JSON.stringify({ email, password, isAdmin: true }) });
      expect(created.status, await created.clone().text()).toBe(201);
      // TOTP on through the API, as the admin would in their account page.
      const login = await fetch(`${s.d.appOrigin}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
      const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]!).join('; ');
      const call = (path: string, body: unknown) => fetch(`${s.d.appOrigin}/api${path}`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const { otpauthUri } = (await (await call('/auth/totp/enroll', {})).json()) as { otpauthUri: string };
      const totp = new TOTP({ secret: Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!) });
      expect((await call('/auth/totp/confirm', { code: totp.generate() })).status).toBe(200);

      const page = await s.newPage();
      await s.signIn(page, { email, password });
      await expectHeading(page, 'Two-step verification');
      await s.expectAccessible(page, 'the second step');
      // The code of the next period: the one just used to confirm may not be taken twice.
      await page.getByLabel('Code', { exact: true }).fill(totp.generate({ timestamp: Date.now() + 30_000 }));
      await mainButton(page, 'Verify').click();
      await expectHeading(page, 'Users');
    });

    it('an admin with a passkey signs in with it alone (a CDP virtual authenticator)', async () => {
      const page = await s.newPage();
      const cdp = await page.context().newCDPSession(page);
      await cdp.send('WebAuthn.enable');
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
      });
      await s.signIn(page);
      await expectHeading(page, 'Users');
      // The admin adds a passkey as their account page would (the console manages others, not its own
      // ways in): WebAuthn in this page, the options and the result through the API.
      const added = await page.evaluate(async () => {
        const b64 = (s: string) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (ch) => ch.charCodeAt(0));
        const out = (buf: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
        const post = (path: string, body: unknown) => fetch(`/api${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const options = (await (await post('/auth/passkeys/options', {})).json()) as { challenge: string; user: { id: string; name: string; displayName: string }; excludeCredentials?: { id: string }[] } & Record<string, unknown>;
        const credential = (await navigator.credentials.create({
          publicKey: { ...(options as object), challenge: b64(options.challenge), user: { ...options.user, id: b64(options.user.id) }, excludeCredentials: [] } as unknown as PublicKeyCredentialCreationOptions,
        })) as PublicKeyCredential;
        const response = credential.response as AuthenticatorAttestationResponse;
        const res = await post('/auth/passkeys', {
          name: 'Console key',
          response: { id: credential.id, rawId: out(credential.rawId), type: credential.type, clientExtensionResults: {}, response: { clientDataJSON: out(response.clientDataJSON), attestationObject: out(response.attestationObject), transports: response.getTransports() } },
        });
        return res.status;
      });
      expect(added).toBe(201);
      await page.getByRole('navigation', { name: 'Console' }).getByRole('button', { name: 'Sign out' }).click();
      await expectHeading(page, 'Sign in');
      await mainButton(page, 'Sign in with a passkey').click();
      await expectHeading(page, 'Users');
    });

    it('OAuth with the real OpenID provider comes back to the console: a user who is not an admin is told so', async () => {
      const page = await s.newPage();
      await page.goto(s.url);
      await expectHeading(page, 'Sign in');
      await mainButton(page, `Continue with ${s.d.oauthProvider.label}`).click();
      await page.waitForURL((url) => url.origin !== s.d.appOrigin);
      await page.locator('input[name=login]').fill(s.d.oauthProvider.login);
      await page.locator('input[name=password]').fill('any password');
      await page.getByRole('button', { name: 'Sign-in' }).click();
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.waitForURL((url) => url.origin === s.d.appOrigin && url.pathname === '/api/admin', { timeout: 20_000 });
      await expectHeading(page, 'Not allowed');
      expect(await page.locator('main').textContent()).toContain(s.d.oauthProvider.email);
    });

    it('a change that needs a recent sign-in asks for it in the "Confirm it is you" dialog, then goes on', async () => {
      const email = `stepped-${Date.now()}@example.com`;
      await s.d.createUser(email, 'a user password 1');
      const { items } = (await (await s.d.adminFetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { items: { id: string }[] };
      const page = await s.newPage();
      await s.signIn(page);
      await expectHeading(page, 'Users');
      const signedInAt = Date.now();
      await page.goto(`${s.url}#/users/${items[0]!.id}`);
      await expectHeading(page, email);
      await sleep(Math.max(0, signedInAt + (FRESH_AGE + 1) * 1000 - Date.now()));
      await mainButton(page, 'Delete user').click();
      await page.getByRole('dialog').getByRole('button', { name: 'Delete user' }).click();
      const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
      await dialog.waitFor({ timeout: 20_000 });
      await s.expectAccessible(page, 'the step-up dialog');
      await s.shots.take(page, 'step-up dialog');
      await dialog.getByLabel('Password', { exact: true }).fill('not the password');
      await dialog.getByRole('button', { name: 'Confirm' }).click();
      await poll(() => dialog.getByRole('alert').textContent()).toMatch(/wrong/i);
      await dialog.getByLabel('Password', { exact: true }).fill(s.d.admin.password);
      await dialog.getByRole('button', { name: 'Confirm' }).click();
      await expectHeading(page, 'User deleted');
      expect((await (await s.d.adminFetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { items: unknown[] }).toMatchObject({ items: [] });
    });

    it('dark mode from the system setting passes axe-core too, and nothing is wider than a 360 px screen', async () => {
      const page = await s.newPage({ viewport: { width: 360, height: 780 }, dark: true });
      await s.signIn(page);
      await expectHeading(page, 'Users');
      expect(await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).not.toBe('rgb(255, 255, 255)');
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
      await s.expectAccessible(page, 'the users page in dark mode');
      await s.shots.take(page, 'users-dark-360px');
    });
  });

  describe('users', () => usersTests(s));
  describe('sign-in providers', () => providersTests(s));
  describe('work sessions', () => workSessionsTests(s));
  describe('audit log and webhooks', () => eventsTests(s));
  describe('cache list and CLI jobs', () => pluginsTests(s));
  describe('deployment check', () => deploymentTests(s));
  describe('a 360 px screen', () => narrowScreenTests(s));
});
