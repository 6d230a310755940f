// Passkeys in a real browser (CONTRACT section 11): Debian's Chromium with a virtual authenticator
// added over the Chrome DevTools Protocol (ctap2, internal transport, resident keys, user verification),
// on the frontend origin behind the deployment's nginx (/api/ to two svc instances in turn). The page
// runs the docs' own snippet (the ```js passkeys block of docs/account.md): add a passkey, log out, log in with it,
// list it, delete it. Origins use `localhost`: browsers refuse an IP address as the RP id.

import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { codeBlocks, readDoc } from '../support/docs.ts';
import { keepOnMachine, launchBrowser, screenshots, type Screenshots } from './support/browser.ts';
import { missingPrograms, startDeployment, type Deployment } from './support/deployment.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');
const PASSWORD = 'a long password for passkeys';
const SNIPPET = codeBlocks(readDoc('docs/account.md'), 'js passkeys')[0];

const missing = missingPrograms();
if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but the passkeys browser test lacks: ${missing.join(', ')}`);
if (missing.length) process.stderr.write(`\n!!!!!!!! SKIPPED: the passkeys browser test needs ${missing.join(' and ')} !!!!!!!!\n\n`);

describe.skipIf(!redisUrl || !mongoUrl || missing.length > 0)('passkeys in Chromium behind nginx, with a CDP virtual authenticator', () => {
  let d: Deployment;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let cdp: CDPSession;
  let shots: Screenshots;
  let offMachine: string[];
  let authenticatorId: string;

  beforeAll(async () => {
    expect(SNIPPET, 'docs/account.md has the ```js passkeys block').toBeTruthy();
    shots = screenshots('passkeys');
    const launching = launchBrowser();
    try {
      d = await startDeployment({ redisUrl, mongoUrl, host: 'localhost' });
    } finally {
      browser = await launching;
    }
    context = await browser.newContext({ viewport: { width: 900, height: 640 } });
    offMachine = await keepOnMachine(context);
    page = await context.newPage();
    cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    ({ authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    }));
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    if (shots) process.stdout.write(`screenshots (${shots.dir}):\n${shots.taken.map((s) => `  ${s}`).join('\n')}\n`);
  });

  /** Shows `text` on the page (for the screenshots) and returns it. */
  const show = (text: string) => page.evaluate((t) => (document.querySelector('#main')!.textContent = t), text);
  const status = (url: string) => page.evaluate(async (u) => (await fetch(u, { credentials: 'include' })).status, url);

  it('add a passkey, log out, log in with it (no email, no password), list it, delete it', async () => {
    const email = 'passkey-user@example.com';
    await d.createUser(email, PASSWORD);
    await page.goto(`${d.appOrigin}/login`);
    await page.locator('input[name=email]').fill(email);
    await page.locator('input[name=password]').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expect.poll(() => page.locator('#who').textContent(), { timeout: 15_000 }).toBe(`Signed in as ${email}`);
    await shots.take(page, 'signed in with the password');

    await page.addScriptTag({ content: SNIPPET! });
    const added = (await page.evaluate(() => (window as unknown as { addPasskey(n: string): Promise<unknown> }).addPasskey('Chromium virtual authenticator'))) as Record<string, unknown>;
    expect(added).toMatchObject({ name: 'Chromium virtual authenticator' });
    expect(Object.keys(added).sort()).toEqual(['createdAt', 'id', 'name']);
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    expect(credentials).toEqual([expect.objectContaining({ isResidentCredential: true, rpId: 'localhost' })]);
    await show(`Passkey added: ${JSON.stringify(added)}`);
    await shots.take(page, 'passkey added');

    expect(await page.evaluate(async () => (await fetch('/api/auth/logout', { method: 'POST', credentials: 'include' })).status)).toBe(204);
    expect(await status('/api/auth/session')).toBe(401);
    await show('Logged out');
    await shots.take(page, 'logged out');

    const login = (await page.evaluate(() => (window as unknown as { loginWithPasskey(): Promise<unknown> }).loginWithPasskey())) as { user: { email: string } };
    expect(login.user.email).toBe(email);
    const session = (await page.evaluate(async () => (await fetch('/api/auth/session', { credentials: 'include' })).json())) as { provider: string };
    expect(session.provider).toBe('passkey');
    // The session cookie is the usual HttpOnly one; the challenge cookie is gone.
    const cookies = await context.cookies(d.appOrigin);
    expect(cookies.find((c) => c.name === 'sid_app')).toMatchObject({ httpOnly: true });
    expect(cookies.find((c) => c.name === 'svc_passkey')).toBeUndefined();
    await show(`Logged in with the passkey as ${login.user.email}`);
    await shots.take(page, 'logged in with the passkey');

    const list = (await page.evaluate(async () => (await fetch('/api/auth/passkeys', { credentials: 'include' })).json())) as { items: { id: string; lastUsedAt: string | null }[] };
    expect(list.items).toHaveLength(1);
    expect(list.items[0]).toMatchObject({ id: added.id });
    expect(list.items[0]!.lastUsedAt).not.toBeNull();
    await show(`Your passkeys: ${JSON.stringify(list.items)}`);
    await shots.take(page, 'the list');

    const removed = await page.evaluate(async (id) => (await fetch(`/api/auth/passkeys/${id}`, { method: 'DELETE', credentials: 'include' })).status, String(added.id));
    expect(removed).toBe(204);
    expect(await page.evaluate(async () => (await fetch('/api/auth/passkeys', { credentials: 'include' })).json())).toEqual({ items: [] });
    // Deleted on the server: the authenticator still holds it, but it no longer logs in.
    await page.evaluate(async () => fetch('/api/auth/logout', { method: 'POST', credentials: 'include' }));
    const refused = await page.evaluate(async () => {
      try {
        return await (window as unknown as { loginWithPasskey(): Promise<unknown> }).loginWithPasskey();
      } catch (err) {
        return { thrown: String(err) };
      }
    });
    expect(refused).toMatchObject({ error: { code: 'invalid_passkey' } });
    await show('Passkey deleted: it no longer logs in');
    await shots.take(page, 'deleted and refused');
    expect(offMachine).toEqual([]);
  });
});
