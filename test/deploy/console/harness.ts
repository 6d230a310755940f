// The admin console's browser suite (test/deploy/console-browser.test.ts): one deployment (two svc
// instances behind nginx, the console at <app>/api/admin, a real OpenID provider), one Chromium, and
// what each page's tests share: a signed-in admin page, axe-core, screenshots. Each page's tests live
// in a module of this folder (`usersTests(suite)`, ...), so they run on one deployment.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect, inject } from 'vitest';
import { keepOnMachine, launchBrowser, screenshots, type Screenshots } from '../support/browser.ts';
import { startDeployment, type Deployment, type DeploymentOptions } from '../support/deployment.ts';

export interface ConsoleSuite {
  /** The deployment (set in beforeAll). */
  readonly d: Deployment;
  /** `<app origin>/api/admin`: the console as an operator opens it. */
  readonly url: string;
  readonly shots: Screenshots;
  /** A new browser profile (its own cookies): phone-sized unless told; `dark` for the system's dark mode. */
  newPage(opts?: { viewport?: { width: number; height: number }; dark?: boolean }): Promise<Page>;
  /** Opens the console and signs in with a password (the deployment's admin unless told). */
  signIn(page: Page, who?: { email: string; password: string }): Promise<void>;
  /** Goes to a page of the navigation by its link's name and waits for its heading. */
  open(page: Page, link: string, heading?: string): Promise<void>;
  /** axe-core on the page as it is: no serious or critical violation (WCAG 2.x A and AA rules). */
  expectAccessible(page: Page, what: string): Promise<void>;
  /** Waits for `done`; if the step-up dialog opens first, answers it with the admin's password and goes on. */
  afterStepUp(page: Page, done: Locator): Promise<void>;
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export const heading = (page: Page) => page.getByRole('heading', { level: 1 });
export const mainButton = (page: Page, name: string) => page.locator('main').getByRole('button', { name, exact: true });
/** expect.poll with room for a busy machine (vitest's default waits 1 s). */
export const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000 });
/** Waits until the page's heading says `text`. */
export const expectHeading = (page: Page, text: string) => poll(() => heading(page).textContent()).toBe(text);
/** The accessible name of the focused element's label, or its own text (what a screen reader announces first). */
export const focusedLabel = (page: Page) =>
  page.evaluate(() => {
    const el = document.activeElement as HTMLInputElement | null;
    return el?.labels?.[0]?.textContent ?? el?.textContent ?? '';
  });

/** Registers the suite's hooks (call inside the describe block) and returns what the tests use. */
export function consoleSuite(opts: Pick<DeploymentOptions, 'appConfig' | 'env'> = {}): ConsoleSuite {
  let d: Deployment | undefined;
  let browser: Browser | undefined;
  let shots: Screenshots | undefined;
  const contexts: BrowserContext[] = [];
  const pages: Page[] = [];

  beforeAll(async () => {
    shots = screenshots('console');
    const launching = launchBrowser();
    try {
      d = await startDeployment({ redisUrl: inject('redisUrl'), mongoUrl: inject('mongoUrl'), host: 'localhost', ...opts });
    } finally {
      browser = await launching;
    }
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    if (shots) process.stdout.write(`screenshots (${shots.dir}):\n${shots.taken.map((s) => `  ${s}`).join('\n')}\n`);
  });
  // A failed step leaves a screenshot of the last page, and what it announced.
  afterEach(async (ctx) => {
    const page = pages.at(-1);
    if (ctx.task.result?.state !== 'fail' || !page || page.isClosed() || !shots) return;
    await shots.take(page, `FAILED ${ctx.task.name}`);
    process.stderr.write(`console page ${page.url()} announced: ${await page.locator('#error').textContent()} | ${await page.locator('#status').textContent()}\n`);
  });

  const suite: ConsoleSuite = {
    get d() {
      if (!d) throw new Error('the deployment did not start');
      return d;
    },
    get url() {
      return `${suite.d.appOrigin}/api/admin`;
    },
    get shots() {
      if (!shots) throw new Error('no screenshots folder');
      return shots;
    },
    async newPage({ viewport = { width: 390, height: 860 }, dark = false } = {}) {
      const context = await browser!.newContext({ viewport, colorScheme: dark ? 'dark' : 'light' });
      contexts.push(context);
      await keepOnMachine(context);
      const page = await context.newPage();
      page.on('pageerror', (e) => void process.stderr.write(`console page error: ${e.message}\n`));
      pages.push(page);
      return page;
    },
    async signIn(page, who = suite.d.admin) {
      await page.goto(suite.url);
      await expectHeading(page, 'Sign in');
      await page.getByLabel('Email', { exact: true }).fill(who.email);
      await page.getByLabel('Password', { exact: true }).fill(who.password);
      await mainButton(page, 'Sign in').click();
    },
    async open(page, link, title = link) {
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: link, exact: true }).click();
      await expectHeading(page, title);
    },
    async expectAccessible(page, what) {
      // Through the DevTools protocol: the page's CSP (no inline script) does not apply to it.
      await page.evaluate(axeSource);
      const violations = await page.evaluate(async () => {
        const axe = (window as unknown as { axe: { run(ctx: Document, opts: object): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } }).axe;
        const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
        return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
      });
      expect(violations, `axe-core on ${what}`).toEqual([]);
    },
    async afterStepUp(page, done) {
      const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
      await dialog.or(done).first().waitFor({ timeout: 20_000 });
      if (await dialog.isVisible()) {
        await dialog.getByLabel('Password', { exact: true }).fill(suite.d.admin.password);
        await dialog.getByRole('button', { name: 'Confirm' }).click();
      }
      await done.waitFor({ timeout: 20_000 });
    },
  };
  return suite;
}
