// Debian's Chromium driven by playwright-core (never a downloaded browser), for the deployment suites.
//
// Harness API:
//   const browser = await launchBrowser();            headless /usr/bin/chromium with the project's flags
//   const shots = screenshots('browser');             folder test-results/deploy/browser/, emptied, printed
//   await shots.take(page, 'password login: form');   01-password-login-form.png, 02-..., in order
//   shots.taken                                       the file names so far
//   const seen = watchRequests(context);              every request's URL and method (context-wide)
//   const blocked = await keepOnMachine(context);     aborts (and lists) requests to non-loopback hosts
//   await addSocketIoClient(page);                    window.io, as a frontend bundles socket.io-client
//   await browser.close();
// A suite that needs more (a CDP virtual authenticator for passkeys) opens a session on a page:
//   const cdp = await context.newCDPSession(page); await cdp.send('WebAuthn.enable');
//   (checked: navigator.credentials.create works with a CDP virtual authenticator on http://localhost,
//   and is a SecurityError "invalid domain" on http://127.0.0.1: use startDeployment({ host: 'localhost' }))

import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { PROJECT_DIR } from '../../support/spawn.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true, timeout: 60_000 });
}

export interface Screenshots {
  dir: string;
  taken: string[];
  /** Saves `NN-<label>.png`; `fullPage: false` keeps to the viewport (long pages such as /docs). */
  take(page: Page, label: string, opts?: { fullPage?: boolean }): Promise<string>;
}

/** A fresh folder `test-results/deploy/<suite>/` for this run's screenshots, printed once. */
export function screenshots(suite: string): Screenshots {
  const dir = path.join(PROJECT_DIR, 'test-results/deploy', suite);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  process.stdout.write(`screenshots of the ${suite} suite: ${dir}\n`);
  const taken: string[] = [];
  return {
    dir,
    taken,
    async take(page, label, opts = {}) {
      const slug = label.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
      const name = `${String(taken.length + 1).padStart(2, '0')}-${slug}.png`;
      await page.screenshot({ path: path.join(dir, name), fullPage: opts.fullPage ?? true });
      taken.push(name);
      return name;
    },
  };
}

export interface SeenRequest {
  method: string;
  url: string;
}

/** Records every request the pages of `context` make (preflights are not reported by the browser). */
export function watchRequests(context: BrowserContext): SeenRequest[] {
  const seen: SeenRequest[] = [];
  context.on('request', (req) => seen.push({ method: req.method(), url: req.url() }));
  return seen;
}

/** Puts socket.io-client's browser bundle (the installed package) into the page: `window.io`. */
export async function addSocketIoClient(page: Page): Promise<void> {
  // Not in the package's exports map: read by path.
  const bundle = path.join(path.dirname(createRequire(import.meta.url).resolve('socket.io-client/package.json')), 'dist/socket.io.min.js');
  await page.addScriptTag({ content: readFileSync(bundle, 'utf8') });
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Aborts every request of `context` to a host off this machine and lists them: a suite fails on
 * whatever it finds there, and never waits for a network that is not there (the IdP's development
 * pages, for one, ask Google Fonts for a stylesheet). `data:` URLs never reach the network.
 * Beware: with a route in place, Playwright answers CORS preflights itself, so they never reach the
 * server; a context that tests CORS must go without (and check `watchRequests` instead).
 */
export async function keepOnMachine(context: BrowserContext): Promise<string[]> {
  const blocked: string[] = [];
  await context.route(
    (url) => url.protocol !== 'data:' && !LOOPBACK.has(url.hostname),
    (route) => {
      blocked.push(route.request().url());
      return route.abort('blockedbyclient');
    },
  );
  return blocked;
}
