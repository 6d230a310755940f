// The work sessions page (console/src/pages/work-sessions.ts) in Chromium: bad JSON refused with a clear
// error beside the field; a work session created, its guest link copied (the clipboard holds
// <app>/?workSession=<id>, docs/work-sessions.md), its label edited, deactivated (the API says so),
// deleted after a confirmation. axe-core and screenshots.
import { expect, it } from 'vitest';
import { expectHeading, poll, type ConsoleSuite } from './harness.ts';

/** The console's work-sessions page tests (registered inside console-browser.test.ts's describe block). */
export function workSessionsTests(s: ConsoleSuite): void {
  it('create (bad JSON said first), copy the guest link, edit the label, deactivate, delete', async () => {
    const page = await s.newPage();
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: s.d.appOrigin });
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Work sessions');
    const main = page.locator('main');
    await poll(() => main.getByText(/No work sessions yet|Active|Deactivated/).count()).toBeGreaterThan(0);
    await s.expectAccessible(page, 'the work sessions page');
    await s.shots.take(page, 'work-sessions');

    const label = `Review ${Date.now()}`;
    await page.getByLabel('Label', { exact: true }).fill(label);
    const data = page.getByLabel('Plugin data', { exact: true });
    await data.fill('{"svc__todo": {owner: 1}');
    await main.getByRole('button', { name: 'Create work session' }).click();
    await poll(() => page.locator('#error').textContent()).toMatch(/^Plugin data is not valid JSON: /);
    expect(await data.getAttribute('aria-invalid')).toBe('true');
    await s.expectAccessible(page, 'the work sessions form with an error');

    // The API's own refusal (no plugin key) is said too, never a blank page.
    await data.fill('{}');
    await main.getByRole('button', { name: 'Create work session' }).click();
    await poll(() => page.locator('#error').textContent()).toMatch(/plugin key/);

    await data.fill('{"svc__todo": {"owner": "someone"}}');
    await main.getByRole('button', { name: 'Create work session' }).click();
    const link = main.getByRole('link', { name: label, exact: true });
    await s.afterStepUp(page, link);
    const id = decodeURIComponent((await link.getAttribute('href'))!.split('/').pop()!);
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await page.locator('#error').textContent()).toBe('');
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    // One landmark per name (axe-core's landmark-unique): the section "All work sessions" holds the table "Work sessions".
    expect(await page.getByRole('region', { name: 'Work sessions', exact: true }).count()).toBe(1);
    expect(await page.getByRole('region', { name: 'All work sessions', exact: true }).count()).toBe(1);
    await s.shots.take(page, 'work-sessions-list');

    const guestLink = `${s.d.appOrigin}/?workSession=${id}`;
    await main.getByRole('button', { name: `Copy guest link of ${label}` }).click();
    await poll(() => page.locator('#status').textContent()).toBe(`The guest link of ${label} copied.`);
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(guestLink);

    await link.click();
    await expectHeading(page, label);
    expect(await main.getByText(guestLink).count()).toBe(1);
    await page.getByLabel('Label', { exact: true }).fill(`${label} (edited)`);
    await main.getByRole('button', { name: 'Save changes' }).click();
    await s.afterStepUp(page, page.getByRole('heading', { level: 1, name: `${label} (edited)` }));

    await main.getByRole('button', { name: `Deactivate ${label} (edited)` }).click();
    await s.afterStepUp(page, main.getByRole('button', { name: `Reactivate ${label} (edited)` }));
    const stored = (await (await s.d.adminFetch(`/auth/work-sessions/${id}`)).json()) as { isActive: boolean; label: string };
    expect(stored).toMatchObject({ isActive: false, label: `${label} (edited)` });
    await s.expectAccessible(page, 'a work session page');
    await s.shots.take(page, 'work-session');

    await main.getByRole('button', { name: `Delete ${label} (edited)` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete work session' }).click();
    await s.afterStepUp(page, page.getByRole('heading', { level: 1, name: 'Work sessions' }));
    await poll(() => page.locator('#status').textContent()).toBe(`${label} (edited) is deleted.`);
    expect((await s.d.adminFetch(`/auth/work-sessions/${id}`)).status).toBe(404);
  });
}
