// The admin console's page and files as svc serves them (CONTRACT 16): at /admin and /api/admin, every
// script and style from this origin under a CSP with no inline script, the app's name in the title,
// and nothing at all (404) with `admin.console.enabled: false`. What the pages do: the browser suite
// (test/deploy/console-browser.test.ts).

import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';

const BASE = 'http://localhost';
const PAGES = ['/admin', '/api/admin', '/admin/'];

const csp = (header: string | null) => Object.fromEntries((header ?? '').split(';').map((part) => part.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]));
const urlsOf = (html: string) => [...html.matchAll(/\b(?:src|href)\s*=\s*"([^"]*)"/g)].map((m) => m[1]!);

describe('admin console: serving', () => {
  let t: TestApp;
  let off: TestApp;
  beforeAll(async () => {
    [t, off] = await Promise.all([createTestApp({ config: { app: { name: 'Acme & "Co"' } } }), createTestApp({ config: { admin: { console: { enabled: false } } } })]);
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await off?.close();
  });

  it('serves the page at /admin, /api/admin and /admin/ with a CSP of this origin only and no inline script', async () => {
    for (const path of PAGES) {
      const res = await t.fetch(path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
      const policy = csp(res.headers.get('content-security-policy'));
      expect(policy['default-src'], path).toEqual(["'none'"]);
      expect(policy['script-src'], path).toEqual(["'self'"]);
      expect(policy['frame-ancestors'], path).toEqual(["'none'"]);
      const html = await res.text();
      expect(html, path).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
      for (const url of urlsOf(html)) {
        if (url.startsWith('data:')) continue;
        const resolved = new URL(url, `${BASE}${path}`);
        expect(resolved.origin, `${path}: ${url}`).toBe(BASE);
        const asset = await t.fetch(resolved.pathname);
        expect(asset.status, `${path}: ${resolved.pathname}`).toBe(200);
        expect(asset.headers.get('x-content-type-options')).toBe('nosniff');
      }
    }
  });

  it('the script is JavaScript and the stylesheet CSS, both revalidated on each load', async () => {
    const js = await t.fetch('/api/admin/app.js');
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('cache-control')).toBe('no-cache');
    expect((await js.text()).length).toBeGreaterThan(1000);
    expect((await t.fetch('/admin/style.css')).headers.get('content-type')).toMatch(/^text\/css/);
  });

  it('the whole console is under its size budget: 60 KiB of JavaScript gzipped (docs/benchmarks.md)', async () => {
    const js = Buffer.from(await (await t.fetch('/admin/app.js')).arrayBuffer());
    const gzipped = gzipSync(js, { level: 9 }).length;
    process.stdout.write(`admin console: app.js ${(js.length / 1024).toFixed(1)} KiB, ${(gzipped / 1024).toFixed(1)} KiB gzipped\n`);
    expect(gzipped).toBeLessThan(60 * 1024);
  });

  it("puts app.name in the title and the header, escaped", async () => {
    const html = await (await t.fetch('/admin')).text();
    expect(html).toContain('<title>Admin · Acme &amp; &quot;Co&quot;</title>');
    expect(html).not.toContain('{{APP_NAME}}');
  });

  it('admin.console.enabled false: /admin and its files are 404 not_found', async () => {
    for (const path of ['/admin', '/api/admin', '/admin/app.js', '/admin/style.css']) {
      const res = await off.fetch(path);
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
    }
  });
});
