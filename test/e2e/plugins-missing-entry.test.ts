// A newcomer's walkthrough: a plugin folder whose entry is not index.ts/index.js
// (plugins/acme__x/plugin.ts) was skipped without a word, and its routes were 404.
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { createTestApp } from '../support/app.ts';

const okPlugin = "import { Hono } from 'hono';\nexport default () => new Hono().get('/ping', (c) => c.json({ ok: true }));\n";

describe('plugin loader: a folder without an entry file', () => {
  it('is named in one warning with the file it expected; start-up goes on, other plugins load', async () => {
    const lines: string[] = [];
    const t = await createTestApp({
      logger: createLogger('warn', { write: (line: string) => void lines.push(line) }),
      files: { 'plugins/acme__x/plugin.ts': okPlugin, 'plugins/acme__ok/index.ts': okPlugin, 'plugins/acme__pkg/package.json': '{ "name": "acme-pkg" }' },
    });
    try {
      const warnings = lines.map((l) => JSON.parse(l) as { level: number; msg: string; plugin?: string }).filter((l) => l.level === 40 && l.msg.includes('has no index.ts'));
      expect(warnings.map((w) => w.plugin)).toEqual(['acme__x']);
      expect(warnings[0]!.msg).toMatch(/^plugin folder "acme__x" \(\/.*\/plugins\/acme__x\) has no index\.ts or index\.js: not loaded \(it holds plugin\.ts\); a folder plugin's entry, which default-exports its factory, is index\.ts or index\.js$/);
      const paths = t.routes().map((r) => r.path);
      expect(paths).toContain('/acme__ok/ping');
      expect(paths.filter((p) => p.startsWith('/acme__x') || p.startsWith('/acme__pkg'))).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
