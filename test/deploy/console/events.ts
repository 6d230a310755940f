// The audit log and webhooks pages (CONTRACT 13 and 16) in Chromium: the admin's own login in the log
// and the type filter (a refused one said beside its field); a webhook endpoint on a real receiver on
// loopback (the deployment runs with SVC_ALLOW_INSECURE_WEBHOOK_URLS=1), its secret shown once and
// checked against the receiver's signature with `standardwebhooks`, a test event sent and listed as
// delivered under the webhook-id the receiver got; a failed delivery sent again with Resend (keyboard),
// delivered under the same webhook-id.

import type { Locator, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../../support/webhook-receiver.ts';
import { expectHeading, mainButton, poll, type ConsoleSuite } from './harness.ts';

/** The type of each row of the audit table (the first line of its first cell). */
const auditTypes = (page: Page) => page.locator('main table tbody tr td:nth-child(1) > div > code').allTextContents();

/** The console's events page tests (registered inside console-browser.test.ts's describe block). */
/**
 * "Send test event" on an endpoint's row, until the action has ended: it reads the list again and draws a
 * new table, and a click on the endpoint's link while that happens (pressed on the old table, released on
 * the new) is no click at all (CI, 2026-12-03: the page stayed on the list). The old button is
 * aria-disabled until then; the new one never is.
 */
async function sendTestEvent(row: Locator, url: string): Promise<void> {
  const button = row.getByRole('button', { name: `Send test event to ${url}` });
  await button.click();
  await poll(async () => (await button.count()) === 1 && (await button.getAttribute('aria-disabled')) === null).toBe(true);
}

export function eventsTests(s: ConsoleSuite): void {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  it("the audit log lists the admin's own login, filters by type (a prefix too) and time, pages by cursor, and says a refused type beside its field", async () => {
    const page = await s.newPage({ viewport: { width: 360, height: 780 } });
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Audit log');
    const table = page.getByRole('table', { name: 'Audit records, newest first' });
    await table.waitFor();
    // Newest first: the latest login is the one that just happened, naming the admin and how.
    const first = table.locator('tbody tr', { hasText: 'login.succeeded' }).first();
    expect(await first.textContent()).toContain(s.d.admin.email);
    expect(await first.textContent()).toContain('method: password');
    // On a 360 px screen nothing is wider than the screen (the table scrolls inside its own box if need be).
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    await s.expectAccessible(page, 'the audit log');
    await s.shots.take(page, 'audit-log');

    const type = page.getByLabel('Type', { exact: true });
    await type.fill('login.*');
    await mainButton(page, 'Filter').click();
    await poll(async () => {
      const types = await auditTypes(page);
      return types.length > 0 && types.every((t) => t.startsWith('login.'));
    }).toBe(true);
    await type.fill('logout.nothing');
    await mainButton(page, 'Filter').click();
    await poll(() => type.getAttribute('aria-invalid')).toBe('true');
    const sentence = page.locator(`#${await type.getAttribute('id')}-error`);
    expect(await sentence.textContent()).toMatch(/must be an audit record type, or a prefix ending in \.\*/i);
    await s.expectAccessible(page, 'the audit log with a refused filter');
    // The keyboard alone: Enter in the field sends the filter.
    await type.fill('login.succeeded');
    await type.press('Enter');
    await poll(() => type.getAttribute('aria-invalid')).toBe(null);
    await poll(async () => [...new Set(await auditTypes(page))]).toEqual(['login.succeeded']);

    // Paging by cursor: twelve users created, ten a page; Older shows the two before, Newer goes back.
    const tag = Date.now();
    for (let i = 0; i < 12; i++) await s.d.createUser(`audit-${tag}-${i}@example.com`, 'audit paging password');
    await type.fill('user.created');
    await page.getByLabel('Records per page', { exact: true }).selectOption('10');
    await mainButton(page, 'Filter').click();
    const users = page.locator('main table tbody tr', { hasText: `audit-${tag}-` });
    await poll(() => users.count()).toBe(10);
    expect(await users.first().textContent()).toContain(`audit-${tag}-11@`);
    await mainButton(page, 'Older').click();
    await poll(async () => (await users.count()) > 0 && (await users.first().textContent())?.includes(`audit-${tag}-1@`)).toBe(true);
    expect(await users.count()).toBe(2);
    await mainButton(page, 'Newer').click();
    await poll(async () => (await users.first().textContent())?.includes(`audit-${tag}-11@`)).toBe(true);
    // Since (a date-time input, sent as ISO 8601): nothing from the future.
    await page.getByLabel('Since', { exact: true }).fill('2099-01-01T00:00:00');
    await mainButton(page, 'Filter').click();
    await poll(() => page.locator('main .empty').textContent()).toBe('No record matches these filters.');
  });

  it("a user's page opens the audit log filtered to them; the user filter takes an email address too", async () => {
    const email = `audited-${Date.now().toString(36)}@example.com`;
    await s.d.createUser(email, 'an audited password');
    const { items } = (await (await s.d.adminFetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { items: { id: string }[] };
    const id = items[0]!.id;
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await page.goto(`${s.url}#/users/${id}`);
    await expectHeading(page, email);
    await page.locator('main').getByRole('link', { name: `Audit log of ${email}` }).click();
    await expectHeading(page, 'Audit log');
    const user = page.getByRole('textbox', { name: 'User' });
    expect(await user.inputValue()).toBe(id);
    const rows = page.getByRole('table', { name: 'Audit records, newest first' }).locator('tbody tr');
    await poll(async () => (await auditTypes(page)).includes('user.created')).toBe(true);
    expect((await rows.allTextContents()).every((r) => r.includes(email))).toBe(true);

    // The address instead of the id: the same records.
    await user.fill(email);
    await mainButton(page, 'Filter').click();
    // The rows of the id filter already pass the check below: wait for this filter's answer first (the
    // form ignores a submit while its button is busy, so the next Enter would be lost on a slow machine).
    await poll(() => mainButton(page, 'Filter').getAttribute('aria-disabled')).toBe(null);
    await poll(async () => (await auditTypes(page)).includes('user.created') && (await rows.allTextContents()).every((r) => r.includes(email))).toBe(true);
    // An address nobody has is said beside the field, and the list stays.
    await user.fill(`nobody-${Date.now()}@example.com`);
    await user.press('Enter');
    await poll(() => user.getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#error').textContent()).toBe('Check this field: User.');
    expect(await page.locator(`[id="${await user.getAttribute('id')}-error"]`).textContent()).toMatch(/^No user has the address nobody-/);
    expect(await auditTypes(page)).toContain('user.created');
    await s.expectAccessible(page, 'the audit log of one user');
  });

  it('a webhook endpoint: added with step-up, its secret shown once verifies the receiver\'s signature, a test event is listed as delivered', async () => {
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Webhooks');
    await page.getByText('No webhook endpoint yet').or(page.getByRole('table', { name: 'Webhook endpoints' })).first().waitFor();
    await s.expectAccessible(page, 'the webhooks page');

    const url = `${receiver.url}/console-hook`;
    await page.getByLabel('URL', { exact: true }).fill(url);
    await page.getByLabel('Event types', { exact: true }).fill('user.deleted');
    await page.getByLabel('Description', { exact: true }).fill('console browser test');
    await mainButton(page, 'Add endpoint').click();
    const shown = page.getByRole('group', { name: 'Signing secret' });
    await s.afterStepUp(page, shown);
    const secret = (await shown.locator('code').textContent()) ?? '';
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
    const row = page.getByRole('table', { name: 'Webhook endpoints' }).locator('tr', { hasText: url });
    await poll(() => row.textContent()).toContain('Enabled');
    await s.expectAccessible(page, 'the webhooks page with a secret shown');
    await s.shots.take(page, 'webhooks-secret-once');

    await sendTestEvent(row, url);
    const [got] = await receiver.waitFor(1, { path: '/console-hook' });
    // What the page showed once is the key the receiver verifies the delivery with.
    const payload = new Webhook(secret).verify(got!.body, got!.headers as Record<string, string>) as { type: string };
    expect(payload.type).toBe('webhook.test');
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(got!.body, got!.headers as Record<string, string>)).toThrow();

    // The endpoint's page lists the delivery as delivered, under the webhook-id the receiver got.
    await page.getByRole('link', { name: url }).click();
    await expectHeading(page, 'Webhook endpoint');
    const deliveries = page.getByRole('table', { name: `Deliveries to ${url}, newest first` });
    const delivery = deliveries.locator('tr', { hasText: String(got!.headers['webhook-id']) });
    // Listed at once (queued before it was sent); its outcome is written as the attempt ends: refresh till then.
    await poll(async () => {
      const text = (await delivery.count()) ? await delivery.textContent() : '';
      if (!text?.includes('delivered')) await mainButton(page, 'Refresh deliveries').click();
      return text;
    }).toContain('delivered');
    expect(await delivery.textContent()).toContain('HTTP 200');
    await s.expectAccessible(page, "an endpoint's deliveries");
    await s.shots.take(page, 'webhook-deliveries');

    // Changed (step-up as for adding): the page shows the new description; disabled: it says so.
    await page.getByText('Change this endpoint', { exact: true }).click();
    await page.getByRole('form', { name: 'Change this endpoint' }).getByLabel('Description', { exact: true }).fill('changed by the console');
    await mainButton(page, 'Save changes').click();
    await s.afterStepUp(page, page.locator('main dd', { hasText: 'changed by the console' }));
    await page.getByRole('button', { name: `Disable ${url}` }).click();
    await poll(() => page.locator('main dl').textContent()).toContain('Disabled');

    // Once gone, the endpoint is no longer listed (the dialog asks first).
    await page.getByRole('button', { name: `Delete ${url}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete endpoint' }).click();
    await expectHeading(page, 'Webhooks');
    await poll(() => page.getByRole('link', { name: url }).count()).toBe(0);
  });

  it('a failed delivery has Resend (keyboard): sent again under the same webhook-id, it is listed as delivered', async () => {
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Webhooks');
    await page.getByText('No webhook endpoint yet').or(page.getByRole('table', { name: 'Webhook endpoints' })).first().waitFor();
    const url = `${receiver.url}/console-resend`;
    // Both attempts (the suite's schedule is [0.5]) answered 500: the delivery fails; the resend gets 204.
    receiver.plan('/console-resend', { status: 500 }, { status: 500 });
    receiver.fallbacks.set('/console-resend', { status: 204 });
    await page.getByLabel('URL', { exact: true }).fill(url);
    await page.getByLabel('Event types', { exact: true }).fill('user.deleted');
    await mainButton(page, 'Add endpoint').click();
    const shown = page.getByRole('group', { name: 'Signing secret' });
    await s.afterStepUp(page, shown);
    receiver.secrets.set('/console-resend', (await shown.locator('code').textContent()) ?? '');
    const row = page.getByRole('table', { name: 'Webhook endpoints' }).locator('tr', { hasText: url });
    await sendTestEvent(row, url);
    const [first] = await receiver.waitFor(1, { path: '/console-resend' });
    const webhookId = String(first!.headers['webhook-id']);

    await page.getByRole('link', { name: url }).click();
    await expectHeading(page, 'Webhook endpoint');
    const delivery = page.getByRole('table', { name: `Deliveries to ${url}, newest first` }).locator('tr', { hasText: webhookId });
    const until = (status: string) =>
      poll(async () => {
        const text = (await delivery.count()) ? await delivery.textContent() : '';
        if (!text?.includes(status)) await mainButton(page, 'Refresh deliveries').click();
        return text;
      }).toContain(status);
    await until('failed');
    expect(await delivery.textContent()).toContain('HTTP 500');
    const resend = delivery.getByRole('button', { name: `Resend the webhook.test delivery ${webhookId}` });
    await s.expectAccessible(page, 'a failed delivery with Resend');
    // The keyboard alone: focus it and press Enter.
    await resend.focus();
    await page.keyboard.press('Enter');
    await poll(() => page.locator('#status').textContent()).toContain('queued again');
    await until('delivered');
    expect(await delivery.textContent()).toContain('HTTP 204');
    const got = receiver.byId(webhookId, '/console-resend');
    expect(got.map((r) => r.answered)).toEqual([500, 500, 204]);
    // Signed anew with the endpoint's secret (standardwebhooks verifies it at the receiver).
    expect(got.map((r) => r.verified)).toEqual([true, true, true]);
    // Delivered now: no Resend on it.
    expect(await delivery.getByRole('button', { name: /^Resend/ }).count()).toBe(0);

    await page.getByRole('button', { name: `Delete ${url}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete endpoint' }).click();
    await expectHeading(page, 'Webhooks');
  });
}
