// Every page with a table on a 360 px screen (issue 57: "readable at 360 px wide"): each row is a block of
// its cells, each under its column's name, so every cell and every button is on the screen, and no table
// scrolls sideways (a button out of sight to the right is one nobody presses). The tables stay tables for
// assistive technology (roles, caption, header row), and axe-core passes.

import type { Page } from 'playwright-core';
import { expect, it } from 'vitest';
import { expectHeading, poll, type ConsoleSuite } from './harness.ts';

/** What of `main` is not on a `width` px screen: tables that scroll sideways, cells, buttons and links beyond the edge. */
function offScreen(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const out: string[] = [];
    for (const box of document.querySelectorAll<HTMLElement>('main .table')) {
      if (box.scrollWidth > box.clientWidth + 1) out.push(`table "${box.getAttribute('aria-label')}" scrolls sideways (${box.scrollWidth} px in ${box.clientWidth} px)`);
    }
    for (const el of document.querySelectorAll<HTMLElement>('main td, main caption, main button, main a, main input, main select')) {
      const r = el.getBoundingClientRect();
      if (r.width && (r.left < -0.5 || r.right > width + 0.5)) out.push(`${el.tagName.toLowerCase()} "${(el.textContent ?? '').trim().slice(0, 40)}" spans ${Math.round(r.left)}..${Math.round(r.right)} px`);
    }
    if (document.documentElement.scrollWidth > width) out.push(`the page is ${document.documentElement.scrollWidth} px wide`);
    return out;
  });
}

/** The console's 360 px tests (registered inside console-browser.test.ts's describe block). */
export function narrowScreenTests(s: ConsoleSuite): void {
  it('every table fits a 360 px screen: each cell under its column name, every button on screen, nothing scrolls sideways', async () => {
    const tag = Date.now().toString(36);
    // Something in each table: a user with a session and an API key, a work session, a webhook endpoint with a delivery.
    const email = `narrow-${tag}@example.com`;
    const password = 'a narrow screen password';
    await s.d.createUser(email, password);
    const login = await fetch(`${s.d.appOrigin}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
    const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.startsWith('sid_app='))!;
    const key = await fetch(`${s.d.appOrigin}/api/auth/api-keys`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'a key with a long name for a phone', scopes: [] }) });
    expect(key.status, await key.clone().text()).toBe(201);
    expect((await s.d.adminFetch('/auth/reauthenticate', { method: 'POST', body: JSON.stringify({ password: s.d.admin.password }) })).status).toBe(204);
    const ws = await s.d.adminFetch('/auth/work-sessions', { method: 'POST', body: JSON.stringify({ label: `Narrow review ${tag}`, pluginData: { svc__todo: { owner: 'someone' } } }) });
    expect(ws.status, await ws.clone().text()).toBe(201);
    // Nothing listens on port 9 of loopback: the delivery is tried and fails, and is listed all the same.
    const hook = await s.d.adminFetch('/auth/webhooks', { method: 'POST', body: JSON.stringify({ url: `http://127.0.0.1:9/narrow-${tag}`, events: ['user.deleted'], description: 'a phone-sized check' }) });
    expect(hook.status, await hook.clone().text()).toBe(201);
    const hookId = ((await hook.json()) as { id: string }).id;
    expect((await s.d.adminFetch(`/auth/webhooks/${hookId}/test`, { method: 'POST' })).status).toBe(202);
    const userId = ((await (await s.d.adminFetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { items: { id: string }[] }).items[0]!.id;

    const page = await s.newPage({ viewport: { width: 360, height: 780 } });
    await s.signIn(page);
    await expectHeading(page, 'Users');
    const pages: [address: string, heading: string, table: string][] = [
      ['#/users', 'Users', 'Users'],
      [`#/users/${userId}`, email, `API keys of ${email}`],
      ['#/providers', 'Sign-in providers', 'Configured sign-in providers'],
      ['#/work-sessions', 'Work sessions', 'Work sessions'],
      ['#/audit', 'Audit log', 'Audit records, newest first'],
      ['#/webhooks', 'Webhooks', 'Webhook endpoints'],
      [`#/webhooks/${hookId}`, 'Webhook endpoint', `Deliveries to http://127.0.0.1:9/narrow-${tag}, newest first`],
      ['#/deployment', 'Deployment check', 'Session cookie attributes'],
    ];
    for (const [address, title, name] of pages) {
      await page.goto(`${s.url}${address}`);
      await expectHeading(page, title);
      // Still a table for a screen reader: its name, its header row, its rows and cells.
      const table = page.getByRole('table', { name });
      await table.waitFor();
      expect(await table.getByRole('columnheader').count(), `${title}: the header row`).toBeGreaterThan(0);
      expect(await table.getByRole('row').count(), `${title}: rows`).toBeGreaterThan(1);
      expect(await offScreen(page), `${title} at 360 px`).toEqual([]);
      // Each cell says which column it is in (on a phone the header row is not shown).
      const firstCell = table.getByRole('cell').first();
      const column = await firstCell.getAttribute('data-label');
      expect(column).toBeTruthy();
      expect(await firstCell.evaluate((td) => getComputedStyle(td, '::before').content)).toContain(column!);
      await s.expectAccessible(page, `${title} at 360 px`);
      await s.shots.take(page, `${address.slice(2).replace(/\/.*/, ' one')} 360px`);
    }
    // A row's buttons work where they are on a phone: the endpoint disabled from its row.
    await page.goto(`${s.url}#/webhooks`);
    await expectHeading(page, 'Webhooks');
    const disable = page.getByRole('button', { name: `Disable http://127.0.0.1:9/narrow-${tag}` });
    await disable.click();
    await s.afterStepUp(page, page.getByRole('button', { name: `Enable http://127.0.0.1:9/narrow-${tag}` }));
    await s.shots.take(page, 'webhooks endpoint disabled 360px');
    await poll(() => offScreen(page)).toEqual([]);
  });
}
