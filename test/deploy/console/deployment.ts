import { expect, it } from 'vitest';
import { expectHeading, poll, type ConsoleSuite } from './harness.ts';

/** The deployment check page (CONTRACT 17): what svc sees through nginx, and a named finding. */
export function deploymentTests(s: ConsoleSuite): void {
  it('shows what svc sees through nginx (the forwarded host, trustProxy 1) and names the Secure cookie over http', async () => {
    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await s.open(page, 'Deployment check');
    const main = page.locator('main');
    await poll(() => main.textContent()).toContain('cookie_secure_over_http');
    const seen = await page.getByRole('region', { name: 'Request as seen' }).locator('td').allTextContents();
    expect(seen.slice(0, 2)).toEqual(['http', new URL(s.d.appOrigin).host]);
    expect(seen[3]).toBe('yes');
    await s.expectAccessible(page, 'the deployment check page');
    await s.shots.take(page, 'deployment-check');
  });
}
