// The API reference page (security review, issue 24, finding 5). `/docs` used to load an unpinned
// script from a CDN, which then ran on the session cookie's origin. Now every script and style of the
// page comes from this service (the npm package's tarball, pinned by bin/docs-bundle.js), and a strict
// Content-Security-Policy allows nothing else. Checked at `/docs` and at `/api/docs` (the page uses
// relative URLs, so it works behind a proxy that keeps the prefix).

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';

const BASE = 'http://localhost'; // what app.request resolves paths against
const PAGES = ['/docs', '/api/docs'];

/** `script-src 'self' 'sha256-…'; connect-src 'self'` -> { 'script-src': ["'self'", "'sha256-…'"], ... } */
function parseCsp(header: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const part of header.split(';')) {
    const [name, ...values] = part.trim().split(/\s+/);
    if (name) out[name.toLowerCase()] = values;
  }
  return out;
}

/** Every URL-bearing attribute of the page (`src`, `href`, `action`...). */
const attributeUrls = (html: string) => [...html.matchAll(/\b(?:src|href|action|content|data)\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]!);
const scriptSources = (html: string) => [...html.matchAll(/<script\b[^>]*\bsrc\s*=\s*["']([^"']+)["']/gi)].map((m) => m[1]!);
const inlineScripts = (html: string) => [...html.matchAll(/<script\b(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/gi)].map((m) => m[1]!);

describe('API reference page', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t?.close());

  it('finding 5: /docs references no external origin (no CDN script, no web fonts)', async () => {
    for (const page of PAGES) {
      const res = await t.fetch(page);
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html, page).not.toMatch(/(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
      for (const url of attributeUrls(html)) {
        if (url.startsWith('data:')) continue; // inline, loads nothing
        if (!/^[a-z][a-z0-9+.-]*:|^\/\//i.test(url)) continue; // relative: same origin
        expect(new URL(url, `${BASE}${page}`).origin, `${page}: ${url}`).toBe(BASE);
      }
    }
  });

  it('finding 5: the script URL /docs references answers 200 with JavaScript from this origin, cached long', async () => {
    for (const page of PAGES) {
      const html = await (await t.fetch(page)).text();
      const sources = scriptSources(html);
      expect(sources.length, page).toBeGreaterThan(0);
      for (const src of sources) {
        const url = new URL(src, `${BASE}${page}`);
        expect(url.origin, `${page}: ${src}`).toBe(BASE);
        // Relative to the page: under /api the script is fetched under /api too.
        if (page.startsWith('/api/')) expect(url.pathname.startsWith('/api/'), src).toBe(true);
        const res = await t.fetch(url.pathname + url.search);
        expect(res.status, url.href).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^(text|application)\/javascript\b/);
        expect(res.headers.get('x-content-type-options')).toBe('nosniff');
        // Versioned URL + long cache: a package upgrade changes the URL, so `immutable` is safe.
        expect(res.headers.get('cache-control')).toMatch(/max-age=(\d{8,})/);
        expect(Number(/max-age=(\d+)/.exec(res.headers.get('cache-control')!)![1])).toBeGreaterThanOrEqual(31_536_000);
        const body = await res.text();
        expect(body).toContain('createApiReference');
      }
    }
  });

  it('finding 5: /docs sends a strict Content-Security-Policy without external hosts that still lets the page run', async () => {
    for (const page of PAGES) {
      const res = await t.fetch(page);
      const header = res.headers.get('content-security-policy');
      expect(header, page).toBeTruthy();
      const csp = parseCsp(header!);
      expect(csp['default-src']).toEqual(["'none'"]);
      expect(csp['script-src']).toContain("'self'");
      expect(csp['script-src']).not.toContain("'unsafe-inline'");
      expect(csp['script-src']).not.toContain("'unsafe-eval'");
      expect(csp['connect-src']).toEqual(["'self'"]);
      expect(csp['base-uri']).toEqual(["'none'"]);
      expect(csp['object-src'] ?? csp['default-src']).toEqual(["'none'"]);
      expect(csp['frame-ancestors']).toEqual(["'none'"]);
      // Only keywords, hashes, nonces and data: images/fonts: no host, no scheme that loads from elsewhere.
      for (const [directive, values] of Object.entries(csp)) {
        for (const value of values) expect(value, `${directive} ${value}`).toMatch(/^'[a-z0-9-]+(?:-[A-Za-z0-9+/=_-]+)?'$|^data:$/);
      }
      // Every inline script is allowed by its hash (else the browser would not run it).
      const html = await res.text();
      for (const script of inlineScripts(html)) {
        const hash = `'sha256-${createHash('sha256').update(script).digest('base64')}'`;
        expect(csp['script-src'], `inline script ${script.slice(0, 60)}`).toContain(hash);
      }
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('finding 5: /openapi.json is unchanged (public JSON)', async () => {
    const res = await t.fetch('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect((await res.json()).openapi).toBe('3.1.0');
  });
});
