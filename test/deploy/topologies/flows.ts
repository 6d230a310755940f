// The three journeys test/deploy/topologies.test.ts runs in topologies 2 and 3 from the app's page, each
// as a frontend on another origin than svc's makes it (svc's base URL in the page's global `api`):
//   await oauthLogin(page, { api, idpOrigin, provider, returnTo })   the login page's return path and plain link
//                                                               to svc, the IdP's real login and consent pages,
//                                                               back through svc's callback; resolves where it landed
//   const authenticator = await virtualAuthenticator(context, page)   CDP WebAuthn, resident keys, UV
//   await addPasskeySnippet(page)                               docs/account.md's ```js passkeys block, its
//                                                               '/api/...' calls sent to `api`: addPasskey, loginWithPasskey
//   await connectSocket(page); await realtime(page)             socket.io-client from the page with the
//                                                               session cookie; the events it saw, in order

import type { BrowserContext, CDPSession, Page } from 'playwright-core';
import { codeBlocks, readDoc } from '../../support/docs.ts';
import { addSocketIoClient } from '../support/browser.ts';

/**
 * What the app page runs before the provider's round trip, as `@svc/client`'s `startOAuthLogin` does
 * from the `/login` page: the return path (CSRF token first; the full Referer, which svc checks), then
 * the login button, a plain link to svc's start route. Walks the IdP's pages and resolves with the URL
 * the browser lands on once it left them (svc's callback only redirects).
 */
export async function oauthLogin(
  page: Page,
  opts: { api: string; idpOrigin: string; provider: { id: string; label: string; login: string }; returnTo: string },
): Promise<URL> {
  const stored = await page.evaluate(
    async ([api, returnTo]) => {
      const csrf = (await (await fetch(`${api}/auth/oauth/return-to/csrf`, { credentials: 'include' })).json()) as { csrfToken: string };
      const res = await fetch(`${api}/auth/oauth/return-to`, {
        method: 'POST',
        credentials: 'include',
        headers: { 'content-type': 'application/json', 'x-svc-oauth-return-to-csrf': csrf.csrfToken },
        body: JSON.stringify({ returnTo }),
        referrerPolicy: 'no-referrer-when-downgrade',
      });
      return res.status;
    },
    [opts.api, opts.returnTo] as const,
  );
  if (stored !== 204) throw new Error(`POST /auth/oauth/return-to answered ${stored}`);
  await page.evaluate(
    ([href, label]) => {
      const link = document.body.appendChild(document.createElement('a'));
      link.href = href;
      link.textContent = label;
    },
    [`${opts.api}/auth/oauth/${opts.provider.id}`, `Sign in with ${opts.provider.label}`] as const,
  );
  await page.getByRole('link', { name: `Sign in with ${opts.provider.label}` }).click();

  await page.waitForURL((url) => url.origin === opts.idpOrigin);
  await page.locator('input[name=login]').fill(opts.provider.login);
  await page.locator('input[name=password]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await page.getByRole('button', { name: 'Continue' }).click(); // the consent page
  await page.waitForURL((url) => url.origin !== opts.idpOrigin);
  return new URL(page.url());
}

/** A CDP virtual authenticator on `page` (ctap2, internal, resident keys, user verified, presence simulated). */
export async function virtualAuthenticator(context: BrowserContext, page: Page): Promise<{ cdp: CDPSession; id: string }> {
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  return { cdp, id: authenticatorId };
}

const PASSKEYS_SNIPPET = codeBlocks(readDoc('docs/account.md'), 'js passkeys')[0];

/** docs/account.md's passkeys snippet in the page, its same-origin `/api/...` calls sent to svc's base URL (the page's `api`). */
export async function addPasskeySnippet(page: Page): Promise<void> {
  if (!PASSKEYS_SNIPPET?.includes("fetch('/api/")) throw new Error("docs/account.md has no ```js passkeys block calling fetch('/api/...')");
  await page.addScriptTag({ content: PASSKEYS_SNIPPET.replaceAll("fetch('/api/", "fetch(api + '/api/") });
}

export const addPasskey = (page: Page, name: string) => page.evaluate((n) => (window as unknown as { addPasskey(n: string): Promise<unknown> }).addPasskey(n), name);
export const loginWithPasskey = (page: Page) => page.evaluate(() => (window as unknown as { loginWithPasskey(): Promise<unknown> }).loginWithPasskey());

/**
 * socket.io-client (the installed package's browser bundle) connects to svc's base URL with the
 * session cookie (`withCredentials`, docs/realtime.md "From ... another origin"); `window.realtime`
 * records `connect`, `connect_error:<code>` and `sessionEnded:<code>`.
 */
export async function connectSocket(page: Page): Promise<void> {
  await addSocketIoClient(page);
  await page.evaluate(() => {
    type Socket = { on(event: string, listener: (arg: { code?: string; data?: { code?: string }; message?: string }) => void): void };
    const w = window as unknown as { io(url: string, opts: object): Socket; api: string; realtime: string[]; socket: Socket };
    const socket = w.io(w.api, { path: '/socket.io', withCredentials: true });
    w.realtime = [];
    w.socket = socket;
    socket.on('connect', () => w.realtime.push('connect'));
    socket.on('connect_error', (err) => w.realtime.push(`connect_error:${err.data?.code ?? err.message}`));
    socket.on('sessionEnded', ({ code }) => w.realtime.push(`sessionEnded:${code}`));
  });
}

/** The events the page's socket saw so far, and the transport it is on. */
export const realtime = (page: Page) =>
  page.evaluate(() => {
    const w = window as unknown as { realtime: string[]; socket: { io: { engine?: { transport: { name: string } } } } };
    return { events: w.realtime, transport: w.socket.io.engine?.transport.name };
  });
