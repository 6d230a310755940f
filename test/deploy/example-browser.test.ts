// The reference login UI (examples/login, issue 38) built exactly as `npm run example` builds it,
// served by the deployment's nginx at the app origin (/api/ to two svc instances), driven in Debian's
// Chromium like a person would: sign-up with the link from a real SMTP server's mail, password login,
// own sessions, TOTP on (the code computed from the QR's otpauth URI) and the second step, step-up
// (answered with the password, then with a passkey), passkeys through a CDP virtual authenticator
// (added, used to log in, renamed, removed), OAuth login and connected accounts through a real
// OpenID provider, forgot/reset and the magic link from the mails, a command-line tool's device login
// (RFC 8628) approved and denied on /device. Refused fields get a sentence beside
// them; the step-up dialog stays open on a wrong password; a used reset link is found out on load; the
// pages carry the app's name (app.name). With auth.captcha on (a Turnstile-like provider on loopback:
// its widget script and its siteverify endpoint), a person without failed logins never loads the widget,
// and after 3 failed logins solves it and signs in. Screenshots of each page: test-results/deploy/example/.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import jsqr from 'jsqr';
import { Secret, TOTP } from 'otpauth';
import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildExample } from '../../examples/login/build.ts';
import { sleep, tempDir } from '../support/spawn.ts';
import { startSmtp, type TestSmtp } from '../support/smtp.ts';
import { keepOnMachine, launchBrowser, screenshots, type Screenshots } from './support/browser.ts';
import { missingPrograms, startDeployment, type Deployment } from './support/deployment.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');
/** `auth.session.freshAge` here: short, so that the step-up test can wait it out. */
const FRESH_AGE = 6;
/** `app.name` of the deployment, built into the example's config.js. */
const APP_NAME = 'Acme Notes';
const CAPTCHA_SITE_KEY = 'loopback-site-key';
const CAPTCHA_SECRET = 'loopback-captcha-secret';

/**
 * A Turnstile-like widget (the provider's script, served from loopback): `turnstile.render(el, {sitekey,
 * callback})` draws a button; a click "solves" it and hands the page a token `solved:<sitekey>:<n>`.
 */
const FAKE_TURNSTILE = `(() => {
  let n = 0;
  const widgets = new Map();
  window.turnstile = {
    render(el, opts) {
      const id = 'w' + ++n;
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = 'I am a person';
      button.addEventListener('click', () => {
        button.disabled = true;
        button.textContent = 'Solved';
        // Unique across pages (each page loads this script anew): the provider takes a token once.
        opts.callback('solved:' + opts.sitekey + ':' + ++n + '.' + Math.random().toString(36).slice(2));
      });
      el.append(button);
      widgets.set(id, button);
      return id;
    },
    reset(id) {
      const button = widgets.get(id);
      if (button) { button.disabled = false; button.textContent = 'I am a person'; }
    },
  };
})();
`;

/**
 * The captcha provider on loopback: `GET /api.js` (the widget above) and `POST /siteverify` (a token the
 * widget handed out passes once, with the right secret). Records every request's path and every form.
 */
async function startCaptchaProvider(): Promise<{ origin: string; paths: string[]; forms: URLSearchParams[]; close(): Promise<void> }> {
  const paths: string[] = [];
  const forms: URLSearchParams[] = [];
  const used = new Set<string>();
  const server: Server = createServer((req, res) => {
    paths.push(req.url ?? '');
    if (req.method === 'GET' && req.url === '/api.js') return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(FAKE_TURNSTILE);
    let body = '';
    req.on('data', (b: Buffer) => (body += b.toString()));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      forms.push(form);
      const token = form.get('response') ?? '';
      const success = form.get('secret') === CAPTCHA_SECRET && token.startsWith(`solved:${CAPTCHA_SITE_KEY}:`) && !used.has(token);
      used.add(token);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, paths, forms, close };
}

const missing = missingPrograms();
if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but the example browser test lacks: ${missing.join(', ')}`);
if (missing.length) process.stderr.write(`\n!!!!!!!! SKIPPED: the example browser test needs ${missing.join(' and ')} !!!!!!!!\n\n`);

describe.skipIf(!redisUrl || !mongoUrl || missing.length > 0)('the example login UI in Chromium behind nginx', () => {
  let d: Deployment;
  let smtp: TestSmtp;
  let captchaProvider: Awaited<ReturnType<typeof startCaptchaProvider>>;
  let browser: Browser;
  let shots: Screenshots;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    shots = screenshots('example');
    const launching = launchBrowser();
    try {
      smtp = await startSmtp();
      captchaProvider = await startCaptchaProvider();
      const frontendDir = await buildExample(path.join(tempDir('svc-example-'), 'dist'), '/api', APP_NAME, { captchaScript: `${captchaProvider.origin}/api.js` });
      const captcha = { provider: 'turnstile', siteKey: CAPTCHA_SITE_KEY, secretEnv: 'EXAMPLE_CAPTCHA_SECRET', verifyUrl: `${captchaProvider.origin}/siteverify` };
      d = await startDeployment({
        redisUrl,
        mongoUrl,
        host: 'localhost',
        frontendDir,
        env: { SVC_SMTP_URL: smtp.url, EXAMPLE_CAPTCHA_SECRET: CAPTCHA_SECRET },
        appConfig: { app: { name: APP_NAME }, auth: { signup: { enabled: true }, magicLink: { enabled: true }, session: { freshAge: FRESH_AGE }, captcha } },
      });
    } finally {
      browser = await launching;
    }
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    await smtp?.close();
    await captchaProvider?.close();
    if (shots) process.stdout.write(`screenshots (${shots.dir}):\n${shots.taken.map((s) => `  ${s}`).join('\n')}\n`);
  });

  // A failed step leaves a screenshot of the page it failed on, and what the page announced.
  afterEach(async (ctx) => {
    if (ctx.task.result?.state !== 'fail' || !page || page.isClosed()) return;
    await shots.take(page, `FAILED ${ctx.task.name}`);
    process.stderr.write(`page ${page.url()} announced: ${await page.locator('#error').textContent()} | ${await page.locator('#status').textContent()}\n`);
  });

  /** A fresh browser profile (its own cookies), a phone-sized window unless told. */
  async function newPage(viewport = { width: 420, height: 860 }): Promise<{ page: Page; context: BrowserContext }> {
    const context = await browser.newContext({ viewport });
    contexts.push(context);
    await keepOnMachine(context); // the IdP's pages ask Google Fonts for a stylesheet
    const page = await context.newPage();
    page.on('pageerror', (e) => void process.stderr.write(`page error: ${e.message}\n`));
    return { page, context };
  }

  /** expect.poll with room for a busy machine (vitest's default waits 1 s). */
  const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000 });
  const heading = (page: Page) => page.getByRole('heading', { level: 1 });
  const mainButton = (page: Page, name: string) => page.locator('main').getByRole('button', { name, exact: true });

  /**
   * What the page says of a refused field: the sentence beside it (what describes the input, by
   * aria-describedby), whether it is marked aria-invalid, and the first description (the error leads).
   */
  async function fieldError(field: ReturnType<Page['locator']>): Promise<{ invalid: string | null; sentence: string }> {
    return field.evaluate((input: HTMLInputElement) => {
      const first = (input.getAttribute('aria-describedby') ?? '').split(/\s+/)[0];
      const described = first ? document.getElementById(first) : null;
      return { invalid: input.getAttribute('aria-invalid'), sentence: described?.textContent ?? '' };
    });
  }

  /** The full link of the latest mail to `email` that goes to `linkPath`, once it arrived. */
  async function linkFromMail(email: string, linkPath: string): Promise<string> {
    const re = new RegExp(`https?://\\S*${linkPath.replace(/[/.]/g, '\\$&')}\\?token=[A-Za-z0-9_-]+`);
    const links = () => smtp.to(email).map((m) => re.exec(m.text)?.[0]).filter((l): l is string => !!l);
    await expect.poll(() => links().length, { timeout: 15_000 }).toBeGreaterThan(0);
    const url = links().at(-1)!;
    expect(new URL(url).origin, 'mail links land on the example (auth.email.linkBaseUrl)').toBe(d.appOrigin);
    return url;
  }

  async function signIn(page: Page, email: string, password: string): Promise<void> {
    await page.goto(`${d.appOrigin}/login`);
    await page.getByLabel('Email', { exact: true }).fill(email);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await mainButton(page, 'Sign in').click();
  }

  async function expectAccount(page: Page, email: string): Promise<void> {
    await page.waitForURL(`${d.appOrigin}/account`);
    await expect.poll(() => page.locator('#who').textContent(), { timeout: 15_000 }).toBe(`Signed in as ${email}`);
  }

  /**
   * Waits for `done` (a locator); if the step-up dialog opens first (the session was older than
   * `auth.session.freshAge` on a slow machine), answers it with the password and goes on.
   */
  async function afterStepUp(page: Page, done: ReturnType<Page['locator']>, password: string): Promise<void> {
    const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
    await dialog.or(done).first().waitFor({ timeout: 20_000 });
    if (await dialog.isVisible()) {
      await dialog.getByLabel('Password', { exact: true }).fill(password);
      await dialog.getByRole('button', { name: 'Confirm' }).click();
    }
    await done.waitFor({ timeout: 20_000 });
  }

  const totpFor = (uri: string) => new TOTP({ secret: Secret.fromBase32(new URL(uri).searchParams.get('secret')!) });

  // One person's journey, test by test (each builds on the one before).
  const person = { email: 'sam.longname.middlename.lastname.department@subdivision.example.com' /* long: it must wrap on a phone */, password: 'a long sign-up password', totpUri: '', signedInAt: 0 };
  let page: Page;
  let context: BrowserContext;
  let cdp: CDPSession;

  it('sign-up, then the verification link from the mail, then a password login with the second step off', async () => {
    ({ page, context } = await newPage());
    await page.goto(`${d.appOrigin}/signup`);
    await poll(() => heading(page).textContent()).toBe('Create an account');
    // Every input has a label; the heading has the focus (a screen reader starts there).
    expect(await page.evaluate(() => [...document.querySelectorAll('input')].filter((i) => i.labels?.length !== 1).map((i) => i.name))).toEqual([]);
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H1');
    // The app's name (app.name) in the title and the header.
    expect(await page.title()).toBe(`Create an account · ${APP_NAME}`);
    expect(await page.locator('header .brand').textContent()).toBe(APP_NAME);
    await shots.take(page, 'sign-up page');
    // Refused fields: a sentence for people beside each, the input marked and described by it, the
    // first one focused; above, one line naming them.
    await page.getByLabel('Email', { exact: true }).fill('sam@');
    await page.getByLabel('Password', { exact: true }).fill('short');
    await mainButton(page, 'Create account').click();
    await poll(() => page.getByRole('alert').textContent()).toBe('Check these fields: Email, Password.');
    expect(await fieldError(page.getByLabel('Email', { exact: true }))).toEqual({ invalid: 'true', sentence: 'Enter a valid email address.' });
    expect(await fieldError(page.getByLabel('Password', { exact: true }))).toEqual({ invalid: 'true', sentence: 'Use at least 8 characters.' });
    expect(await page.evaluate(() => (document.activeElement as HTMLInputElement).name)).toBe('email');
    await shots.take(page, 'sign-up: refused fields, each with its sentence');
    await page.getByLabel('Email', { exact: true }).fill(person.email);
    await mainButton(page, 'Create account').click();
    await poll(() => page.getByRole('alert').textContent()).toBe('Check this field: Password.');
    expect(await fieldError(page.getByLabel('Email', { exact: true }))).toEqual({ invalid: null, sentence: '' });
    expect(await page.locator('.field-error').allTextContents()).toEqual(['Use at least 8 characters.']);
    await page.getByLabel('Password', { exact: true }).fill(person.password);
    await page.getByLabel('First name (optional)', { exact: true }).fill('Sam');
    await mainButton(page, 'Create account').click();
    await poll(() => heading(page).textContent()).toBe('Check your mail');
    await shots.take(page, 'sign-up: check your mail');

    await signIn(page, person.email, person.password);
    await poll(() => page.getByRole('alert').textContent()).toMatch(/confirm your email/i);
    await mainButton(page, 'Send the confirmation again').click();
    await poll(() => page.getByRole('status').textContent()).toBe(`If ${person.email} waits for confirmation, a new link is on its way.`);
    await poll(() => smtp.to(person.email).length).toBe(2);
    await shots.take(page, 'login before the email is confirmed');

    // Opening the link (what a mail scanner does, script and all) uses nothing; the button does.
    await page.goto(await linkFromMail(person.email, '/verify-email'));
    await mainButton(page, 'Confirm my address').waitFor();
    expect(new URL(page.url()).search, 'the token leaves the address bar').toBe('');
    await shots.take(page, 'verify-email page: the link opened');
    await mainButton(page, 'Confirm my address').click();
    await poll(() => heading(page).textContent()).toBe('Email confirmed');
    expect(await page.getByRole('status').textContent()).toBe('Email confirmed.');
    await shots.take(page, 'verify-email page: confirmed');

    await signIn(page, person.email, '');
    await poll(() => page.getByRole('alert').textContent()).toBe('Check this field: Password.');
    expect(await fieldError(page.getByLabel('Password', { exact: true }))).toEqual({ invalid: 'true', sentence: 'Enter your password.' });
    await signIn(page, person.email, 'a wrong password');
    await poll(() => page.getByRole('alert').textContent()).toMatch(/wrong/i);
    await shots.take(page, 'login: a wrong password is announced');
    await page.getByLabel('Password', { exact: true }).fill(person.password);
    await mainButton(page, 'Sign in').click();
    person.signedInAt = Date.now();
    await expectAccount(page, person.email);
    await shots.take(page, 'account page');
    // Readable on a phone: nothing wider than the window.
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    // The password change form: a short new password gets its sentence beside that field.
    const change = page.getByRole('form', { name: 'Change password' });
    await change.getByLabel('Current password', { exact: true }).fill(person.password);
    await change.getByLabel('New password', { exact: true }).fill('short');
    await mainButton(page, 'Change password').click();
    await poll(() => page.getByRole('alert').textContent()).toBe('Check this field: New password.');
    expect(await fieldError(change.getByLabel('New password', { exact: true }))).toEqual({ invalid: 'true', sentence: 'Use at least 8 characters.' });
    await shots.take(page, 'account: a short new password');
  });

  it('own sessions: a second browser shows up, and "End" ends it', async () => {
    const other = await newPage();
    await signIn(other.page, person.email, person.password);
    await expectAccount(other.page, person.email);
    await page.reload();
    const sessions = page.locator('#sessions > li');
    await poll(() => sessions.count()).toBe(2);
    await shots.take(page, 'sessions: two browsers');
    await sessions.filter({ hasNotText: '(this browser)' }).getByRole('button', { name: /^End the session/ }).click();
    await poll(() => sessions.count()).toBe(1);
    expect(await page.getByRole('status').textContent()).toBe('Session ended.');
    expect(await sessions.textContent()).toContain('(this browser)');
    await shots.take(page, 'sessions: the other one ended');
    await other.page.goto(`${d.appOrigin}/account`);
    await other.page.waitForURL(`${d.appOrigin}/login?next=%2Faccount`);
  });

  it('TOTP on: the QR code is the otpauth URI, the code from it confirms, recovery codes are shown', async () => {
    await mainButton(page, 'Turn on').click();
    const qr = page.locator('#totp-qr');
    await afterStepUp(page, qr, person.password);
    person.totpUri = (await page.locator('#otpauth-uri').textContent())!;
    expect(person.totpUri).toMatch(/^otpauth:\/\/totp\//);
    // The image shown is the QR code of exactly this URI: what the browser draws, read back as a camera would.
    const drawn = await qr.evaluate(async (img: HTMLImageElement) => {
      await img.decode();
      const [width, height] = [img.naturalWidth * 2, img.naturalHeight * 2];
      const canvas = Object.assign(document.createElement('canvas'), { width, height });
      const ctx = canvas.getContext('2d')!;
      ctx.fillStyle = '#fff';
      ctx.fillRect(0, 0, width, height);
      ctx.drawImage(img, 0, 0, width, height);
      return { width, height, data: Array.from(ctx.getImageData(0, 0, width, height).data) };
    });
    expect(jsqr.default(Uint8ClampedArray.from(drawn.data), drawn.width, drawn.height)?.data).toBe(person.totpUri);
    await shots.take(page, 'totp: the QR code');
    await page.locator('#totp').getByLabel('Code', { exact: true }).fill(totpFor(person.totpUri).generate());
    await mainButton(page, 'Confirm').click();
    await afterStepUp(page, page.locator('#recovery-codes li').first(), person.password); // confirming is a step-up too (CONTRACT 10)
    await poll(() => page.locator('#recovery-codes li').count()).toBe(10);
    await shots.take(page, 'totp: on, with the recovery codes');
    await mainButton(page, 'Done').click();
    await poll(() => page.locator('#totp').textContent()).toMatch(/^On/);
  });

  it('log in with the second step: the password, then a code', async () => {
    await mainButton(page, 'Sign out').click();
    await page.waitForURL(`${d.appOrigin}/login`);
    await signIn(page, person.email, person.password);
    await poll(() => heading(page).textContent()).toBe('Two-step verification');
    await shots.take(page, 'login: the second step');
    await page.getByLabel('Code', { exact: true }).fill('000000');
    await mainButton(page, 'Verify').click();
    await poll(() => page.getByRole('alert').textContent()).toMatch(/code/i);
    // The code of the next 30-second step: the one used to confirm is never accepted twice.
    await page.getByLabel('Code', { exact: true }).fill(totpFor(person.totpUri).generate({ timestamp: Date.now() + 30_000 }));
    await mainButton(page, 'Verify').click();
    person.signedInAt = Date.now();
    await expectAccount(page, person.email);
  });

  it('step-up, then a passkey added through the CDP virtual authenticator', async () => {
    await page.bringToFront(); // WebAuthn wants the focused window (another browser opened meanwhile)
    cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    // Past freshAge since the login: adding a way in asks who it is.
    await sleep(Math.max(0, person.signedInAt + (FRESH_AGE + 1) * 1000 - Date.now()));
    await page.getByLabel('Name (optional)', { exact: true }).fill('Virtual key');
    await mainButton(page, 'Add a passkey').click();
    const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
    await dialog.waitFor();
    await shots.take(page, 'step-up dialog');
    // A wrong password: the dialog stays open, says so, and takes another try.
    await dialog.getByLabel('Password', { exact: true }).fill('not my password');
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await poll(() => dialog.getByRole('alert').textContent()).toMatch(/wrong/i);
    expect(await dialog.isVisible()).toBe(true);
    expect(await fieldError(dialog.getByLabel('Password', { exact: true }))).toEqual({ invalid: 'true', sentence: 'That password is wrong. Try again, or use a code or a passkey.' });
    expect(await page.evaluate(() => (document.activeElement as HTMLInputElement).name)).toBe('password');
    await shots.take(page, 'step-up dialog: a wrong password, still open');
    await dialog.getByLabel('Password', { exact: true }).fill(person.password);
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await poll(() => page.locator('#passkeys li').count()).toBe(1);
    expect(await page.locator('#passkeys').textContent()).toContain('Virtual key');
    expect(await page.getByRole('status').textContent()).toBe('Passkey Virtual key added.');
    await shots.take(page, 'passkeys: added after the step-up');
  });

  it('passkey login (no email, no password; a verified passkey is both steps)', async () => {
    await mainButton(page, 'Sign out').click();
    await page.waitForURL(`${d.appOrigin}/login`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await expectAccount(page, person.email);
    person.signedInAt = Date.now();
    await shots.take(page, 'signed in with the passkey');
  });

  it('the passkey renamed, TOTP off with the password (the step-up takes it: asked once), a step-up answered with the passkey, the passkey removed', async () => {
    await mainButton(page, 'Rename passkey Virtual key').click();
    const name = page.getByLabel('New name', { exact: true });
    await poll(() => name.evaluate((el) => el === document.activeElement)).toBe(true);
    await name.fill('Laptop key');
    await shots.take(page, 'passkeys: rename');
    await mainButton(page, 'Save').click();
    await poll(() => page.locator('#passkeys li strong').allTextContents()).toEqual(['Laptop key']);
    expect(await page.getByRole('status').textContent()).toBe('Passkey renamed to Laptop key.');

    // Past freshAge since the passkey login: turning TOTP off needs a step-up, and the password typed
    // into the form is that proof (no dialog asking for it again).
    await sleep(Math.max(0, person.signedInAt + (FRESH_AGE + 1) * 1000 - Date.now()));
    await page.locator('#totp').getByLabel('Password', { exact: true }).fill(person.password);
    await mainButton(page, 'Turn off').click();
    const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
    const off = page.locator('#totp').getByText('Off.');
    await dialog.or(off).first().waitFor({ timeout: 20_000 });
    expect(await dialog.isVisible()).toBe(false);
    const reauthenticatedBy = Date.now();
    expect(await page.getByRole('status').textContent()).toBe('Two-step verification is off.');

    // Past freshAge again: turning it on asks who it is; the passkey answers (the enrolment then starts).
    await sleep(Math.max(0, reauthenticatedBy + (FRESH_AGE + 1) * 1000 - Date.now()));
    await mainButton(page, 'Turn on').click();
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Use a passkey' }).click();
    await page.locator('#totp-qr').waitFor({ timeout: 20_000 });
    await mainButton(page, 'Remove passkey Laptop key').click();
    await afterStepUp(page, page.getByRole('status').getByText('Passkey Laptop key removed.'), person.password);
    await poll(() => page.locator('#passkeys li').count()).toBe(0);
    await shots.take(page, 'totp off, passkey removed');
  });

  it('OAuth: the provider button from GET /auth/oauth/providers, the IdP, back on /account', async () => {
    const { page: p } = await newPage();
    await p.goto(`${d.appOrigin}/login`);
    const button = p.getByRole('button', { name: `Continue with ${d.oauthProvider.label}` });
    await button.waitFor();
    await shots.take(p, 'login page with the OAuth button');
    await button.click();
    await p.waitForURL((url) => url.origin !== d.appOrigin);
    await p.locator('input[name=login]').fill(d.oauthProvider.login);
    await p.locator('input[name=password]').fill('any password');
    await p.getByRole('button', { name: 'Sign-in' }).click();
    await p.getByRole('button', { name: 'Continue' }).click();
    await expectAccount(p, d.oauthProvider.email);
    await poll(() => p.locator('#connected li').count()).toBe(1);
    expect(await p.locator('#connected').textContent()).toContain(d.oauthProvider.label);
    await shots.take(p, 'signed in through OAuth: the connected account');
  });

  it('connected accounts: connect the IdP to the password account (step-up if needed), then disconnect it', async () => {
    const login = 'sam-at-corp';
    d.idp.setAccount(login, { email: 'sam@corp.example', email_verified: true, name: 'Sam at Corp' });
    await mainButton(page, `Connect ${d.oauthProvider.label}`).click();
    const idpLogin = page.locator('input[name=login]');
    const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
    await dialog.or(idpLogin).first().waitFor({ timeout: 20_000 });
    if (await dialog.isVisible()) {
      await dialog.getByLabel('Password', { exact: true }).fill(person.password);
      await dialog.getByRole('button', { name: 'Confirm' }).click();
    }
    await idpLogin.fill(login);
    await page.locator('input[name=password]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForURL((url) => url.origin === d.appOrigin);
    await page.goto(`${d.appOrigin}/account`);
    await poll(() => page.locator('#connected li').count()).toBe(1);
    expect(await page.locator('#connected').textContent()).toContain('sam@corp.example');
    await shots.take(page, 'connected accounts: linked');
    await mainButton(page, `Disconnect ${d.oauthProvider.label}`).click();
    await afterStepUp(page, page.getByRole('status').getByText(`${d.oauthProvider.label} disconnected.`), person.password);
    await poll(() => page.locator('#connected li').count()).toBe(0);
  });

  it('a pending link: OAuth with the unverified address of the password account, account_exists, then signed in, "Connect"', async () => {
    const login = 'sam-unverified';
    d.idp.setAccount(login, { email: person.email, email_verified: false, name: 'Sam elsewhere' });
    const { page: p } = await newPage();
    const asked: string[] = [];
    p.on('request', (r) => void (r.url().includes('/auth/link/confirm') && asked.push(`${r.method()} ${new URL(r.url()).pathname}`)));
    // A plain visit to the account page does not ask for a pending link (no 404 in the console).
    await signIn(p, person.email, person.password);
    await expectAccount(p, person.email);
    await p.getByRole('heading', { name: 'Connected accounts' }).waitFor(); // the page is drawn once, whole
    expect(asked).toEqual([]);
    await mainButton(p, 'Sign out').click();
    await p.waitForURL(`${d.appOrigin}/login`);

    await p.getByRole('button', { name: `Continue with ${d.oauthProvider.label}` }).click();
    await p.locator('input[name=login]').fill(login);
    await p.locator('input[name=password]').fill('any password');
    await p.getByRole('button', { name: 'Sign-in' }).click();
    await p.getByRole('button', { name: 'Continue' }).click();
    // svc sends an OAuth failure to /?auth_error=account_exists; the example goes on to /login with it.
    await p.waitForURL((url) => url.origin === d.appOrigin && url.pathname === '/login');
    await poll(() => p.locator('#error').textContent()).toContain('An account with this email exists');
    await shots.take(p, 'pending link: account_exists on the login page');

    await signIn(p, person.email, person.password);
    await expectAccount(p, person.email);
    const offer = p.getByRole('region', { name: 'Connect this sign-in?' });
    await offer.waitFor({ timeout: 20_000 });
    expect(await offer.textContent()).toContain(`Connect your ${d.oauthProvider.label} account (${person.email})`);
    await shots.take(p, 'pending link: the offer on the account page');
    await offer.getByRole('button', { name: 'Connect', exact: true }).click();
    await afterStepUp(p, p.getByRole('status').getByText('Connected.'), person.password);
    await poll(() => p.locator('#connected li').count()).toBe(1);
    expect(await p.getByRole('region', { name: 'Connect this sign-in?' }).count()).toBe(0);
    expect([...new Set(asked)], 'asked once an OAuth login said account_exists, then accepted (again after a step-up)').toEqual([
      'GET /api/auth/link/confirm',
      'POST /api/auth/link/confirm',
    ]);
    // Disconnected again: the next tests sign in with the password alone.
    await mainButton(p, `Disconnect ${d.oauthProvider.label}`).click();
    await poll(() => p.locator('#connected li').count()).toBe(0);
  });

  it('forgot password, the reset link from the mail, the new password works', async () => {
    const { page: p } = await newPage();
    await p.goto(`${d.appOrigin}/login`);
    await p.getByRole('link', { name: 'Forgot your password?' }).click();
    await poll(() => heading(p).textContent()).toBe('Forgot your password?');
    await p.getByLabel('Email', { exact: true }).fill(person.email);
    await mainButton(p, 'Send a reset link').click();
    await poll(() => p.getByRole('status').textContent()).toMatch(/on its way/);
    await shots.take(p, 'forgot-password page');
    const resetLink = await linkFromMail(person.email, '/reset-password');
    const resetCalls: string[] = [];
    p.on('request', (r) => void (r.url().includes('/auth/password/reset') && resetCalls.push(new URL(r.url()).pathname)));
    await p.goto(resetLink);
    await poll(() => heading(p).textContent()).toBe('Choose a new password');
    expect(resetCalls, 'the page checked the link on load (the token in the body), and used nothing').toEqual(['/api/auth/password/reset/check']);
    await shots.take(p, 'reset-password page');
    person.password = 'a brand new long password';
    await p.getByLabel('New password', { exact: true }).fill(person.password);
    await mainButton(p, 'Set password').click();
    await poll(() => heading(p).textContent()).toBe('Password changed');
    await shots.take(p, 'reset-password: done');
    // The same link again: used, found out on load, so the page offers a new one at once (docs/email.md),
    // before asking for a password.
    resetCalls.length = 0;
    await p.goto(resetLink);
    await poll(() => heading(p).textContent()).toBe('Ask for a new link');
    expect(await p.locator('#dead-link').textContent()).toMatch(/cannot be used any more/);
    expect(await p.getByLabel('New password', { exact: true }).count()).toBe(0);
    expect(resetCalls).toEqual(['/api/auth/password/reset/check']);
    await shots.take(p, 'reset-password: a used link');
    await p.getByLabel('Email', { exact: true }).fill(person.email);
    await mainButton(p, 'Send me a new link').click();
    await poll(() => p.getByRole('status').textContent()).toMatch(/on its way/);
    // Every session ended, the first browser's too.
    await page.goto(`${d.appOrigin}/account`);
    await page.waitForURL(/\/login\?next=/);
    await signIn(p, person.email, person.password);
    await expectAccount(p, person.email);
  });

  it('magic link: ask on /login/link, open the mail\'s link in the same browser, signed in', async () => {
    const email = 'mia@example.com';
    await d.createUser(email, 'mia has a long password');
    const { page: p } = await newPage();
    await p.goto(`${d.appOrigin}/login`);
    await p.getByRole('link', { name: 'Email me a sign-in link' }).click();
    await p.getByLabel('Email', { exact: true }).fill(email);
    await mainButton(p, 'Send the link').click();
    await poll(() => p.getByRole('status').textContent()).toMatch(/on its way/);
    await shots.take(p, 'magic link: requested');
    // The page load does not use the token (mail scanners run pages' scripts, docs/email.md): a click does.
    const verifies: string[] = [];
    p.on('request', (r) => void (r.url().includes('/auth/login/link/verify') && verifies.push(r.method())));
    await p.goto(await linkFromMail(email, '/login/link'));
    await poll(() => heading(p).textContent()).toBe('Sign in by link');
    await sleep(500);
    expect(verifies, 'no token sent before the click').toEqual([]);
    await mainButton(p, 'Sign in').click();
    await expectAccount(p, email);
    await shots.take(p, 'magic link: signed in');
  });

  // CONTRACT 12: a sign-up verified from a browser that did not sign up is the mailbox owner's claim.
  it('a sign-up made elsewhere, verified here: the page asks for a new password, and only that one works', async () => {
    const email = 'squatted@example.com';
    const signup = await fetch(`${d.appOrigin}/api/auth/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'a squatter password' }) });
    expect(signup.status).toBe(202);
    const owner = await newPage();
    await owner.page.goto(await linkFromMail(email, '/verify-email'));
    await mainButton(owner.page, 'Confirm my address').click();
    await poll(() => heading(owner.page).textContent()).toBe('Choose your password');
    await shots.take(owner.page, 'verify-email page: a claim asks for a new password');
    await owner.page.getByLabel('New password', { exact: true }).fill('the owner password');
    await mainButton(owner.page, 'Set password').click();
    await poll(() => heading(owner.page).textContent()).toBe('Email confirmed');
    expect(await owner.page.getByRole('status').textContent()).toBe('Email confirmed and password set.');
    await signIn(owner.page, email, 'a squatter password');
    await poll(() => owner.page.getByRole('alert').textContent()).toMatch(/wrong/i);
    await signIn(owner.page, email, 'the owner password');
    await expectAccount(owner.page, email);
  });

  // CONTRACT 15, device login (RFC 8628): a command-line tool (node's fetch here, as
  // examples/device-cli does) asks for a code and polls; the person opens verification_uri_complete,
  // signs in first, checks the name and the scopes and approves (step-up if asked); the tool's next
  // poll gets an API key, which calls the todo plugin with Bearer. A second request, denied: access_denied.
  // The account page lists the key, and revokes it.
  it('device login: the tool\'s link, sign-in, the name and scopes on /device, Approve, the key calls the todo plugin; Deny; the key on /account, revoked', async () => {
    const email = 'devi@example.com';
    const password = 'devi has a long password';
    await d.createUser(email, password);
    const api = (p: string, init: { body?: unknown; key?: string } = {}) =>
      fetch(`${d.appOrigin}/api${p}`, {
        method: init.body === undefined ? 'GET' : 'POST',
        headers: { ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...(init.key ? { authorization: `Bearer ${init.key}` } : {}) },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
    type DeviceCode = { device_code: string; user_code: string; verification_uri: string; verification_uri_complete: string; expires_in: number; interval: number };
    const askCode = async (name: string, scopes: string[]): Promise<DeviceCode> => {
      const res = await api('/auth/device/code', { body: { name, scopes } });
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as DeviceCode;
    };
    let lastPoll = 0;
    const pollToken = async (code: DeviceCode) => {
      await sleep(Math.max(0, lastPoll + code.interval * 1000 + 200 - Date.now())); // never sooner than `interval` (slow_down)
      lastPoll = Date.now();
      const res = await api('/auth/device/token', { body: { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: code.device_code } });
      return { status: res.status, body: (await res.json()) as Record<string, string> };
    };

    const scopes = ['svc__todo:read', 'svc__todo:write'];
    const asked = await askCode('acme-cli on laptop', scopes);
    expect(asked.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(asked.verification_uri).toBe(`${d.appOrigin}/device`);
    expect(asked.verification_uri_complete).toBe(`${d.appOrigin}/device?user_code=${asked.user_code}`);
    expect(await pollToken(asked)).toMatchObject({ status: 400, body: { error: 'authorization_pending' } });

    // Signed out: the page sends the person to /login, and back to the same request after it.
    const { page: p } = await newPage();
    await p.goto(asked.verification_uri_complete);
    await p.waitForURL(`${d.appOrigin}/login?next=${encodeURIComponent(`/device?user_code=${asked.user_code}`)}`);
    await p.getByLabel('Email', { exact: true }).fill(email);
    await p.getByLabel('Password', { exact: true }).fill(password);
    await mainButton(p, 'Sign in').click();
    await p.waitForURL(asked.verification_uri_complete);
    await poll(() => heading(p).textContent()).toBe('Sign in a device');
    expect(await p.locator('#device-name').textContent()).toBe('acme-cli on laptop');
    expect(await p.locator('#device-scopes li').allTextContents()).toEqual(scopes);
    expect(await p.locator('#device-request').textContent()).toContain(asked.user_code);
    await shots.take(p, 'device: the request to approve');
    await mainButton(p, 'Approve').click();
    await afterStepUp(p, p.getByRole('heading', { level: 1, name: 'Device approved' }), password);
    await shots.take(p, 'device: approved');

    // The tool's next poll gets the key, once; the key reads and writes todos (no cookie, no Origin).
    const granted = await pollToken(asked);
    expect(granted.status, JSON.stringify(granted.body)).toBe(200);
    expect(granted.body).toMatchObject({ token_type: 'Bearer', scope: scopes.join(' ') });
    const key = granted.body.access_token!;
    expect(key).toMatch(/^svc_[A-Za-z0-9_-]{43}$/);
    const created = await api('/svc__todo/todo', { key, body: { name: 'written with the device key' } });
    expect(created.status, await created.clone().text()).toBe(201);
    const listed = await api('/svc__todo/all', { key });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { data: { name: string }[] }).data.map((t) => t.name)).toEqual(['written with the device key']);
    const session = (await (await api('/auth/session', { key })).json()) as { provider: string; apiKey: { scopes: string[] } };
    expect(session).toMatchObject({ provider: 'api_key', apiKey: { scopes } });

    // Another request, denied on the same page (signed in now): the tool hears access_denied, no key is made.
    const denied = await askCode('an unknown tool', ['svc__todo:read']);
    lastPoll = 0;
    await p.goto(denied.verification_uri_complete);
    await poll(() => p.locator('#device-name').textContent()).toBe('an unknown tool');
    await mainButton(p, 'Deny').click();
    await poll(() => heading(p).textContent()).toBe('Device denied');
    await shots.take(p, 'device: denied');
    expect(await pollToken(denied)).toMatchObject({ status: 400, body: { error: 'access_denied' } });

    // The account page lists the one key (by name and prefix, never the key); Revoke ends it everywhere.
    await p.getByRole('link', { name: 'Your account' }).click();
    await expectAccount(p, email);
    const keys = p.locator('#api-keys > li');
    await poll(() => keys.count()).toBe(1);
    expect(await keys.textContent()).toContain(`acme-cli on laptop (${key.slice(0, 12)}…)`);
    expect(await keys.textContent()).toContain('svc__todo:read, svc__todo:write');
    expect(await p.locator('#api-keys').textContent()).not.toContain(key);
    await shots.take(p, 'account: the device\'s API key');
    await mainButton(p, 'Revoke API key acme-cli on laptop').click();
    await poll(() => p.getByRole('status').textContent()).toBe('API key acme-cli on laptop revoked.');
    await poll(() => keys.count()).toBe(0);
    await poll(async () => (await api('/svc__todo/all', { key })).status).toBe(401);
  });

  it('on a desktop window too: the login page', async () => {
    const { page: p } = await newPage({ width: 1280, height: 800 });
    await p.goto(`${d.appOrigin}/login`);
    await mainButton(p, 'Sign in').waitFor();
    await shots.take(p, 'login page on a desktop window');
    // The heading has the focus; the keyboard then goes through the form in reading order.
    expect(await p.evaluate(() => document.activeElement?.textContent)).toBe('Sign in');
    const order: string[] = [];
    for (let i = 0; i < 5; i++) {
      await p.keyboard.press('Tab');
      order.push(await p.evaluate(() => (document.activeElement as HTMLInputElement).name || document.activeElement!.textContent!.trim()));
    }
    expect(order).toEqual(['email', 'password', 'Sign in', 'Sign in with a passkey', `Continue with ${d.oauthProvider.label}`]);
  });

  it('an admin\'s account page shows the deployment check\'s findings (the Secure cookie over plain http here); a user\'s shows none (issue 58)', async () => {
    const { page: p } = await newPage();
    await signIn(p, d.admin.email, d.admin.password);
    await expectAccount(p, d.admin.email);
    const section = p.getByRole('region', { name: 'Deployment check (admins)' });
    await poll(() => section.textContent()).toContain('cookie_secure_over_http');
    await shots.take(p, 'account page of an admin with a deployment finding');
    const email = `no-findings-${Date.now()}@example.com`;
    await d.createUser(email, 'a user password 1');
    const { page: q } = await newPage();
    await signIn(q, email, 'a user password 1');
    await expectAccount(q, email);
    expect(await q.getByRole('region', { name: 'Deployment check (admins)' }).count()).toBe(0);
  });

  it('captcha on risk: no failed logins, no widget (its script never loaded); after 3, the widget, solved, and the login succeeds (issue 56)', async () => {
    const email = 'captcha.person@example.com';
    const password = 'a long captcha password';
    await d.createUser(email, password);
    // Every login in this suite so far came without the widget: the provider's script was never asked for.
    expect(captchaProvider.paths).toEqual([]);
    const { page: p } = await newPage();
    for (let i = 1; i <= 3; i++) {
      await signIn(p, email, `wrong password ${i}`);
      await poll(() => p.getByRole('alert').textContent()).toMatch(/wrong/i);
    }
    expect(await p.locator('#captcha').innerHTML(), 'no widget before svc asks').toBe('');
    expect(captchaProvider.paths).toEqual([]);

    // The fourth try, right password: svc asks (captcha_required), the page loads the widget.
    await p.getByLabel('Password', { exact: true }).fill(password);
    await mainButton(p, 'Sign in').click();
    const widget = p.locator('#captcha').getByRole('button', { name: 'I am a person' });
    await widget.waitFor({ timeout: 20_000 });
    expect(captchaProvider.paths).toEqual(['/api.js']);
    expect(captchaProvider.forms).toEqual([]);
    expect(await p.getByRole('alert').textContent()).toBe('There were failed sign-ins from here: confirm you are a person below, then try again.');
    await shots.take(p, 'login: the captcha widget after 3 failed logins');
    await widget.click();
    await mainButton(p, 'Sign in').click();
    await expectAccount(p, email);
    // svc checked the widget's token at the provider: the secret, the token, the client's IP.
    expect(captchaProvider.forms).toHaveLength(1);
    expect(captchaProvider.forms[0]!.get('secret')).toBe(CAPTCHA_SECRET);
    expect(captchaProvider.forms[0]!.get('response')).toMatch(new RegExp(`^solved:${CAPTCHA_SITE_KEY}:`));
    expect(captchaProvider.forms[0]!.get('remoteip')).toBe('127.0.0.1');
  });

  it('captcha on risk on the other pages: after 3 failed logins, "Forgot your password?" shows the widget too, and its solved token sends the link (issue 56)', async () => {
    const email = 'captcha.forgetful@example.com';
    await d.createUser(email, 'a long forgotten password');
    const { page: p } = await newPage();
    for (let i = 1; i <= 3; i++) {
      await signIn(p, email, `wrong guess ${i}`);
      await poll(() => p.getByRole('alert').textContent()).toMatch(/wrong/i);
    }
    const forms = captchaProvider.forms.length;
    // The person gives up guessing and asks for a reset link: svc asks for the captcha there as well.
    await p.getByRole('link', { name: 'Forgot your password?' }).click();
    await poll(() => heading(p).textContent()).toBe('Forgot your password?');
    await p.getByLabel('Email', { exact: true }).fill(email);
    await mainButton(p, 'Send a reset link').click();
    const widget = p.locator('#captcha').getByRole('button', { name: 'I am a person' });
    await widget.waitFor({ timeout: 20_000 });
    await shots.take(p, 'forgot-password: the captcha widget after 3 failed logins');
    await widget.click();
    await mainButton(p, 'Send a reset link').click();
    await poll(() => p.getByRole('status').textContent()).toMatch(/on its way/);
    expect(captchaProvider.forms.length).toBe(forms + 1);
    await linkFromMail(email, '/reset-password');
  });

  it('a new device: the notice\'s "this wasn\'t me" link, /not-me uses nothing on load, the button ends that login and locks the password (issue 56)', async () => {
    // A browser this person never used: a new device, so a notice with a link to /not-me.
    const before = smtp.to(person.email).length;
    const { page: thief } = await newPage();
    await signIn(thief, person.email, person.password);
    await expectAccount(thief, person.email);
    await poll(() => smtp.to(person.email).length).toBeGreaterThan(before);
    const notMeLink = await linkFromMail(person.email, '/not-me');
    const { page: p } = await newPage();
    const calls: string[] = [];
    p.on('request', (r) => void (r.url().includes('/auth/not-me') && calls.push(new URL(r.url()).pathname)));
    await p.goto(notMeLink);
    await poll(() => heading(p).textContent()).toBe('This was not me');
    expect(calls, 'opening the link uses nothing (mail scanners open links)').toEqual([]);
    expect(new URL(p.url()).search, 'the token left the address bar').toBe('');
    await shots.take(p, 'not-me page');
    await mainButton(p, 'It was not me: end that login').click();
    await poll(() => heading(p).textContent()).toBe('Login ended');
    expect(calls).toEqual(['/api/auth/not-me']);
    await shots.take(p, 'not-me: done');
    // That login's session is gone; the password no longer signs in.
    await thief.goto(`${d.appOrigin}/account`);
    await thief.waitForURL(/\/login\?next=/);
    await signIn(thief, person.email, person.password);
    await poll(() => thief.getByRole('alert').first().textContent()).toMatch(/locked/);
    // The same link again: used.
    await p.goto(notMeLink);
    await mainButton(p, 'It was not me: end that login').click();
    await poll(() => heading(p).textContent()).toBe('Link used or expired');
  });
});
