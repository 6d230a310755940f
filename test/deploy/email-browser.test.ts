// Sign-up, verification, password reset and magic links in a real browser (CONTRACT 12, issue 36):
// Debian's Chromium on the test frontend behind the deployment's nginx (/api/ to two svc instances in
// turn), the two instances sending through a real SMTP server on loopback (test/support/smtp.ts,
// mailparser). Each link is read out of the parsed mail and opened in the browser as a person clicks
// it; the frontend's page POSTs the token only when the person acts (README "Sign-up and recovery").

import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ReceivedMail } from '../support/smtp.ts';
import { keepOnMachine, launchBrowser, screenshots, type Screenshots } from './support/browser.ts';
import { missingPrograms, startDeployment, type Deployment } from './support/deployment.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');

const missing = missingPrograms();
if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but the email browser test lacks: ${missing.join(', ')}`);
if (missing.length) process.stderr.write(`\n!!!!!!!! SKIPPED: the email browser test needs ${missing.join(' and ')} !!!!!!!!\n\n`);

describe.skipIf(!redisUrl || !mongoUrl || missing.length > 0)('sign-up and recovery by mail in Chromium behind nginx', () => {
  let d: Deployment;
  let browser: Browser;
  let shots: Screenshots;
  const contexts: BrowserContext[] = [];
  const offMachine: string[][] = [];

  beforeAll(async () => {
    shots = screenshots('email');
    const launching = launchBrowser();
    try {
      d = await startDeployment({ redisUrl, mongoUrl, email: true });
    } finally {
      browser = await launching;
    }
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    if (shots) process.stdout.write(`screenshots (${shots.dir}):\n${shots.taken.map((s) => `  ${s}`).join('\n')}\n`);
  });

  /** A fresh browser profile (its own cookies), kept on this machine. */
  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 900, height: 640 } });
    contexts.push(context);
    offMachine.push(await keepOnMachine(context));
    return context.newPage();
  }

  /** The first link of a mail's text part to `path` on the app's origin, as the mail shows it. */
  function linkIn(mail: ReceivedMail, path: string): string {
    const link = new RegExp(`${d.appOrigin.replace(/[.]/g, '\\.')}${path}\\?token=[A-Za-z0-9_-]{43}`).exec(mail.text)?.[0];
    expect(link, `a link to ${d.appOrigin}${path} in:\n${mail.text}`).toBeTruthy();
    expect(mail.html).toContain(`href="${link}"`);
    return link!;
  }

  /** `POST /api/auth/login` from outside the browser: its status and error code. */
  async function apiLogin(email: string, password: string): Promise<string> {
    const res = await fetch(`${d.appOrigin}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
    const body = (await res.json()) as { error?: { code: string } };
    return `${res.status}${body.error ? ` ${body.error.code}` : ''}`;
  }

  async function signIn(page: Page, email: string, password: string): Promise<void> {
    await page.goto(`${d.appOrigin}/login`);
    await page.locator('input[name=email]').fill(email);
    await page.locator('input[name=password]').fill(password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  }

  const signedInAs = (page: Page) => page.locator('#who').textContent();
  const alert = (page: Page) => page.getByRole('alert');

  it('sign-up: the verification link from the mail opened in the browser, then the login', async () => {
    const email = 'new-person@example.com';
    const password = 'my own long password';
    const page = await newPage();
    await page.goto(`${d.appOrigin}/login`);
    await page.getByRole('link', { name: 'Sign up' }).click();
    await page.locator('input[name=email]').fill(email);
    await page.locator('input[name=password]').fill(password);
    await shots.take(page, 'sign-up: form');
    await page.getByRole('button', { name: 'Sign up', exact: true }).click();
    await expect.poll(() => page.locator('#result').textContent()).toContain('Check your mail');
    await shots.take(page, 'sign-up: check your mail');

    const [mail] = await d.smtp!.waitFor(email);
    expect(mail!.from).toBe('accounts@example.test');
    expect(mail!.subject).toBe('Confirm your email address');
    const link = linkIn(mail!, '/verify-email');

    // Not verified yet: the login page says so and offers the mail again.
    await signIn(page, email, password);
    await expect.poll(() => alert(page).textContent()).toContain('Confirm your email address first');
    await page.locator('#resend').waitFor();
    await shots.take(page, 'sign-up: login before confirming');

    // Opening the link (a GET, as a mail scanner does) uses nothing; the button on the page does.
    await page.goto(link);
    await page.getByRole('button', { name: 'Confirm my address' }).waitFor();
    expect(new URL(page.url()).search, 'the token leaves the address bar').toBe('');
    expect(await apiLogin(email, password)).toBe('403 email_not_verified');
    await shots.take(page, 'verify-email: the page the link opens');
    await page.getByRole('button', { name: 'Confirm my address' }).click();
    await expect.poll(() => page.locator('#result').textContent()).toBe(`${email} is confirmed.`);
    await shots.take(page, 'verify-email: confirmed');

    await page.getByRole('link', { name: 'Sign in' }).click();
    await page.locator('input[name=email]').fill(email);
    await page.locator('input[name=password]').fill(password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expect.poll(() => signedInAs(page), { timeout: 15_000 }).toBe(`Signed in as ${email}`);
    await shots.take(page, 'sign-up: signed in');

    // The same link again: used up.
    await page.goto(link);
    await page.getByRole('button', { name: 'Confirm my address' }).click();
    await expect.poll(() => alert(page).textContent()).toContain('invalid, was already used or has expired');
  });

  it('forgot password: the reset link from the mail, a new password set on the reset page, the old one refused', async () => {
    const email = 'forgetful@example.com';
    const oldPassword = 'the old long password';
    const newPassword = 'the new long password';
    await d.createUser(email, oldPassword);
    const elsewhere = await newPage();
    await signIn(elsewhere, email, oldPassword);
    await expect.poll(() => signedInAs(elsewhere), { timeout: 15_000 }).toBe(`Signed in as ${email}`);

    const page = await newPage();
    await page.goto(`${d.appOrigin}/login`);
    await page.getByRole('link', { name: 'Forgot your password?' }).click();
    await page.locator('input[name=email]').fill(email);
    await shots.take(page, 'forgot password: form');
    await page.getByRole('button', { name: 'Send me a link' }).click();
    await expect.poll(() => page.locator('#result').textContent()).toContain('If the address has an account');
    await shots.take(page, 'forgot password: sent');

    const [mail] = await d.smtp!.waitFor(email);
    expect(mail!.subject).toBe('Reset your password');
    const link = linkIn(mail!, '/reset-password');
    await page.goto(link);
    await page.locator('input[name=newPassword]').fill('short');
    await page.getByRole('button', { name: 'Set the password' }).click();
    // Too short: the server says so, and the same link still works.
    await expect.poll(() => alert(page).textContent()).toBe('newPassword: must be at least 8 characters');
    await shots.take(page, 'reset password: too short');
    await page.locator('input[name=newPassword]').fill(newPassword);
    await shots.take(page, 'reset password: the page the link opens');
    await page.getByRole('button', { name: 'Set the password' }).click();
    await expect.poll(() => page.locator('#result').textContent()).toContain('Your password was changed');
    await shots.take(page, 'reset password: changed');

    // Every session ended, the other browser's too; the old password is refused, the new one works.
    await elsewhere.reload();
    await elsewhere.locator('#login').waitFor();
    await signIn(page, email, oldPassword);
    await expect.poll(() => alert(page).textContent()).toBe('The email or the password is wrong');
    await shots.take(page, 'login with the old password refused');
    await signIn(page, email, newPassword);
    await expect.poll(() => signedInAs(page), { timeout: 15_000 }).toBe(`Signed in as ${email}`);
    await shots.take(page, 'login with the new password');

    // A notice without a link followed the reset.
    const [, notice] = await d.smtp!.waitFor(email, 2);
    expect(notice!.subject).toBe('Your password was changed');
    expect(notice!.text).not.toContain('token=');
  });

  it('magic link: logs in the browser that asked; opened in another browser it is refused', async () => {
    const email = 'by-mail@example.com';
    await d.createUser(email, 'a password never typed here');
    const page = await newPage();
    await page.goto(`${d.appOrigin}/login`);
    await page.getByRole('link', { name: 'Log in by mail' }).click();
    await page.locator('input[name=email]').fill(email);
    await shots.take(page, 'magic link: form');
    await page.getByRole('button', { name: 'Send me a login link' }).click();
    await expect.poll(() => page.locator('#result').textContent()).toContain('open it in this browser');
    await shots.take(page, 'magic link: sent');

    const [mail] = await d.smtp!.waitFor(email);
    expect(mail!.subject).toBe('Your login link');
    const link = linkIn(mail!, '/login/link');

    // Another browser (say the phone the mail was read on) holds no svc_magic cookie of this request.
    const other = await newPage();
    await other.goto(link);
    await other.getByRole('button', { name: 'Log in', exact: true }).click();
    await expect.poll(() => alert(other).textContent()).toContain('invalid, was already used or has expired');
    await shots.take(other, 'magic link: refused in another browser');
    await other.goto(d.appOrigin);
    await other.locator('#login').waitFor();
    expect(await signedInAs(other)).toBe('');

    // The browser that asked: signed in (the refusal elsewhere did not use the token up).
    await page.goto(link);
    await shots.take(page, 'magic link: the page the link opens');
    await page.getByRole('button', { name: 'Log in', exact: true }).click();
    await expect.poll(() => signedInAs(page), { timeout: 15_000 }).toBe(`Signed in as ${email}`);
    expect(await page.getByText('Provider: email').count()).toBe(1);
    await shots.take(page, 'magic link: signed in');

    expect(offMachine.flat(), 'the frontend and svc ask nothing of another host').toEqual([]);
  });
});
