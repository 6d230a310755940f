// The plugins' pages (CONTRACT 8, 9 and 16) in Chromium: the cache list finds this deployment's keys by
// pattern and opens one (its value as svc serves it); the CLI jobs page, with @svc/plugin-cli-connector
// listed in the app config (console-browser.test.ts), reads GET /jobs. No script is registered in this
// deployment (that needs an app plugin in its app root), so the jobs page shows its empty state.

import { expect, it } from 'vitest';
import { expectHeading, mainButton, poll, type ConsoleSuite } from './harness.ts';

/** The console's plugins page tests (registered inside console-browser.test.ts's describe block). */
export function pluginsTests(s: ConsoleSuite): void {
  it("the cache page lists this deployment's keys by pattern and opens one", async () => {
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Cache');
    await page.getByText('No key matches.').or(page.locator('main table')).first().waitFor();
    await s.expectAccessible(page, 'the cache list');

    // The deployment's store keys share the run's prefix (`deploy-<run>:`, the run as in the admin's email).
    const run = /^admin-(\w+)@/.exec(s.d.admin.email)![1]!;
    await page.getByLabel('Pattern', { exact: true }).fill(`deploy-${run}:*`);
    await mainButton(page, 'Search').click();
    const keys = page.getByRole('table', { name: `Keys matching deploy-${run}:* in cache, database 0` }).locator('tbody a');
    await poll(() => keys.count()).toBeGreaterThan(0);
    expect((await keys.allTextContents()).every((k) => k.startsWith(`deploy-${run}:`))).toBe(true);
    await s.shots.take(page, 'cache-list');

    const key = (await keys.first().textContent())!;
    await keys.first().click();
    await expectHeading(page, 'Cache entry');
    expect(await page.locator('main dd code').first().textContent()).toBe(key);
    await page.locator('main pre').or(page.getByText('No value to show')).first().waitFor();
    await s.expectAccessible(page, 'a cache entry');
    await s.shots.take(page, 'cache-entry');
    await page.getByRole('link', { name: 'Back to the list' }).click();
    await expectHeading(page, 'Cache');
    expect(await page.getByLabel('Pattern', { exact: true }).inputValue()).toBe(`deploy-${run}:*`);

    // A key that is not there: the API's message, on a page that still leads back.
    await page.goto(`${s.url}#/cache/cache/0/${encodeURIComponent(`deploy-${run}:no-such-key`)}`);
    await expectHeading(page, 'Cache entry');
    await poll(() => page.locator('#error').textContent()).toMatch(/no such key/i);
    expect(await page.getByRole('link', { name: 'Back to the list' }).isVisible()).toBe(true);
  });

  it('the CLI jobs page reads the jobs of the connector (none here) and passes axe-core', async () => {
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'CLI jobs');
    await page.getByText('No background job').or(page.getByRole('table', { name: 'Background jobs' })).first().waitFor();
    expect(await page.locator('#error').textContent()).toBe('');
    await s.expectAccessible(page, 'the CLI jobs page');
    await s.shots.take(page, 'cli-jobs');
  });
}
