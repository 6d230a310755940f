// The sign-in providers page (console/src/pages/providers.ts) in Chromium: the deployment's real OpenID
// provider `corp` listed; an OpenID provider added from its template with the keyboard alone, its client
// secret never shown back; disabled and enabled again; "Test" against the real IdP (passes) and against an
// issuer that stopped answering (the error said); deleted after a confirmation. axe-core and screenshots.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { expect, it } from 'vitest';
import { expectHeading, focusedLabel, poll, type ConsoleSuite } from './harness.ts';

/** Presses Tab until the focused control is the one labelled `label` (keyboard only), at most 20 times. */
async function tabTo(page: Page, label: string): Promise<void> {
  for (let i = 0; i < 20; i++) {
    await page.keyboard.press('Tab');
    if ((await focusedLabel(page)).trim() === label) return;
  }
  throw new Error(`Tab never reached "${label}"`);
}

/** The console's providers page tests (registered inside console-browser.test.ts's describe block). */
export function providersTests(s: ConsoleSuite): void {
  it('adds an OpenID provider from its template with the keyboard; the secret is never shown back; disable, enable, Test against the real IdP, delete', async () => {
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Sign-in providers');
    const main = page.locator('main');
    await poll(() => main.getByRole('link', { name: s.d.oauthProvider.label, exact: true }).count()).toBe(1);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await s.expectAccessible(page, 'the providers page');
    await s.shots.take(page, 'providers');

    // The OpenID Connect template comes first in the picker: Tab to "Continue", Enter.
    await page.getByLabel('Provider or template').focus();
    await page.keyboard.press('Tab');
    expect(await focusedLabel(page)).toBe('Continue');
    await page.keyboard.press('Enter');
    await expectHeading(page, 'Add OpenID Connect (any provider, by issuer URL)');
    const id = `corp-kb-${randomBytes(3).toString('hex')}`;
    const secret = `kb-secret-${randomBytes(8).toString('hex')}`;
    for (const [label, value] of [['Provider id', id], ['Display name', 'Corp by keyboard'], ['Issuer URL', s.d.idp.issuer], ['Client id', 'svc-deploy'], ['Client secret', secret]] as const) {
      await tabTo(page, label);
      await page.keyboard.type(value);
    }
    await s.expectAccessible(page, 'the add-a-provider form');
    await s.shots.take(page, 'providers-add');
    await tabTo(page, 'Add provider');
    await page.keyboard.press('Enter');
    await s.afterStepUp(page, page.getByRole('heading', { level: 1, name: 'Corp by keyboard' }));
    await poll(() => page.locator('#status').textContent()).toMatch(/is added with its client secret/);

    // Write-only: the field is empty, the page says a secret is saved, and the secret is nowhere in it.
    expect(await page.getByLabel('Client secret', { exact: true }).inputValue()).toBe('');
    expect(await main.textContent()).toContain('A secret is saved');
    expect(await page.content()).not.toContain(secret);
    expect(await page.evaluate(() => [...document.querySelectorAll('input')].map((i) => i.value).join('\n'))).not.toContain(secret);

    await main.getByRole('button', { name: 'Disable Corp by keyboard' }).click();
    await s.afterStepUp(page, main.getByRole('button', { name: 'Enable Corp by keyboard' }));
    const listed = async () => ((await (await s.d.adminFetch('/auth/providers')).json()) as { providerId: string; enabled: boolean; hasClientSecret: boolean }[]).find((p) => p.providerId === id);
    expect(await listed()).toMatchObject({ enabled: false, hasClientSecret: true });
    await main.getByRole('button', { name: 'Enable Corp by keyboard' }).click();
    await s.afterStepUp(page, main.getByRole('button', { name: 'Disable Corp by keyboard' }));
    expect(await listed()).toMatchObject({ enabled: true });

    await main.getByRole('button', { name: 'Test Corp by keyboard' }).click();
    const result = main.getByRole('group', { name: 'Test of Corp by keyboard' });
    await poll(() => result.textContent()).toContain('Test passed: the discovery document is valid (HTTP 200)');
    expect(await result.textContent()).toContain(`${s.d.idp.issuer}/.well-known/openid-configuration`);
    await s.expectAccessible(page, 'a provider page after a test');
    await s.shots.take(page, 'provider-tested');

    await main.getByRole('button', { name: 'Delete Corp by keyboard' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete provider' }).click();
    await s.afterStepUp(page, page.getByRole('heading', { level: 1, name: 'Sign-in providers' }));
    await poll(() => page.locator('#status').textContent()).toBe('Corp by keyboard is deleted.');
    await poll(() => main.getByRole('link', { name: 'Corp by keyboard' }).count()).toBe(0);
    expect(await listed()).toBeUndefined();
  });

  it("a provider from the app's custom template: added with its secret, Test requests its authorization URL, deleted", async () => {
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Sign-in providers');
    const main = page.locator('main');
    const picker = page.getByLabel('Provider or template');
    // The page draws the picker before the templates are read (a 1-in-5 failure when asked at once).
    await poll(() => picker.locator('optgroup[label="Custom OAuth2 (from the app)"] option').allTextContents()).toEqual(['Acme SSO']);
    await picker.selectOption('acme-sso');
    await main.getByRole('button', { name: 'Continue' }).click();
    await expectHeading(page, 'Add Acme SSO');
    expect(await main.textContent()).toContain('Custom OAuth2, with PKCE.');
    expect(await page.getByRole('textbox', { name: 'Scopes' }).inputValue()).toBe('openid email');
    await page.getByRole('textbox', { name: 'Client id' }).fill('acme-client');
    await page.getByLabel('Client secret', { exact: true }).fill('acme-secret-never-shown');
    await s.expectAccessible(page, 'the add form of a custom template');
    await main.getByRole('button', { name: 'Add provider' }).click();
    await s.afterStepUp(page, page.getByRole('heading', { level: 1, name: 'Acme SSO', exact: true }));
    expect(await main.textContent()).toContain('Custom OAuth2 provider acme-sso: enabled; client secret set.');
    expect(await page.content()).not.toContain('acme-secret-never-shown');

    // Its Test requests the authorization URL svc would send people to (nothing answers on port 9).
    await main.getByRole('button', { name: 'Test Acme SSO' }).click();
    const result = main.getByRole('group', { name: 'Test of Acme SSO' });
    await poll(() => result.textContent()).toContain('Test failed');
    expect(await result.textContent()).toContain('Requested: http://localhost:9/authorize?');
    expect(await result.textContent()).toContain('client_id=acme-client');

    await main.getByRole('button', { name: 'Delete Acme SSO' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete provider' }).click();
    await s.afterStepUp(page, page.getByRole('heading', { level: 1, name: 'Sign-in providers' }));
    await poll(() => main.getByRole('link', { name: 'Acme SSO' }).count()).toBe(0);
  });

  it("an issuer that cannot be read is said beside the Issuer URL field, in the API's words", async () => {
    // A port nothing listens on: svc's check of the discovery document is refused.
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await new Promise((resolve) => server.close(resolve));
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await page.goto(`${s.url}#/providers/new/oidc`);
    await expectHeading(page, 'Add OpenID Connect (any provider, by issuer URL)');
    await page.getByRole('textbox', { name: 'Provider id' }).fill(`closed-${randomBytes(3).toString('hex')}`);
    const field = page.getByRole('textbox', { name: 'Issuer URL' });
    await field.fill(issuer);
    await page.getByRole('textbox', { name: 'Client id' }).fill('x');
    await page.locator('main').getByRole('button', { name: 'Add provider' }).click();
    await s.afterStepUp(page, page.locator('input[name="config:issuer"][aria-invalid="true"]'));
    expect(await page.locator('#error').textContent()).toBe('Check this field: Issuer URL.');
    // The sentence beside the field is the API's message, its address as written (not "Http://...").
    const id = (await field.getAttribute('id'))!;
    const sentence = page.locator(`[id="${id}-error"]`);
    expect(await sentence.textContent()).toBe(`${issuer}/.well-known/openid-configuration cannot be reached (ECONNREFUSED).`);
    expect(await field.getAttribute('aria-describedby')).toContain(`${id}-error`);
    await expectHeading(page, 'Add OpenID Connect (any provider, by issuer URL)');
    await s.expectAccessible(page, 'the add-a-provider form with a refused issuer');
  });

  it('Test of an OpenID provider whose issuer stopped answering says it cannot be reached', async () => {
    // An issuer that answers its discovery document while the provider is saved, then goes away.
    const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const doc = { issuer, authorization_endpoint: `${issuer}/authorize`, token_endpoint: `${issuer}/token`, jwks_uri: `${issuer}/jwks` };
    const id = `gone-${randomBytes(3).toString('hex')}`;
    const created = await s.d.adminFetch('/auth/providers', { method: 'POST', body: JSON.stringify({ providerId: id, type: 'oidc', label: 'Gone IdP', clientId: 'x', config: { issuer } }) });
    expect(created.status, await created.clone().text()).toBe(201);
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    try {
      const page = await s.newPage();
      await s.signIn(page);
      await expectHeading(page, 'Users');
      await s.open(page, 'Sign-in providers');
      const main = page.locator('main');
      await main.getByRole('button', { name: 'Test Gone IdP' }).click();
      const result = main.getByRole('group', { name: 'Test of Gone IdP' });
      await poll(() => result.textContent()).toMatch(/Test failed: 127\.0\.0\.1:\d+ cannot be reached \(ECONNREFUSED\)/);
      await poll(() => page.locator('#status').textContent()).toContain('Gone IdP: test failed.');
      await s.shots.take(page, 'providers-test-unreachable');
    } finally {
      await s.d.adminFetch(`/auth/providers/${id}`, { method: 'DELETE' });
    }
  });
}
