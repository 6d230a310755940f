import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { packagePrefix } from '../../src/plugins/loader.ts';
import { createTestApp } from '../support/app.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
const roots: string[] = [];
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

/** An app root with the given files, inside the repo so `hono` resolves. */
function appWith(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(ROOT, 'test/.tmp/loader-'));
  roots.push(root);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  return root;
}

const okPlugin = "import { Hono } from 'hono';\nexport default () => new Hono().get('/ping', (c) => c.json({ ok: true }));\n";

describe('plugin loader', () => {
  it('maps package names to /plugin/<scope>/<name>', () => {
    expect(packagePrefix('@svc/plugin-cli-connector')).toBe('/plugin/svc/plugin-cli-connector');
    expect(packagePrefix('plain-name')).toBe('/plugin/plain-name');
    expect(() => packagePrefix('../evil')).toThrow(/not a valid npm package name/);
  });

  it('a key with capitals or dashes stops start-up naming the folder', async () => {
    const root = appWith({ 'plugins/Bad-Key/index.js': okPlugin });
    await expect(createTestApp({ env: { SVC_APP_PATH: root } })).rejects.toThrow(/plugin folder "Bad-Key".*lowercase letters, digits and underscores/);
  });

  it('a factory that throws stops start-up naming the plugin', async () => {
    const root = appWith({ 'plugins/acme__broken/index.js': "export default () => { throw new Error('no database for me'); };\n" });
    await expect(createTestApp({ env: { SVC_APP_PATH: root } })).rejects.toThrow(/plugin "acme__broken" .* failed to load: no database for me/);
  });

  it('a module without a default factory, or a factory returning something else, stops start-up', async () => {
    const noDefault = appWith({ 'plugins/acme__nodefault/index.js': 'export const x = 1;\n' });
    await expect(createTestApp({ env: { SVC_APP_PATH: noDefault } })).rejects.toThrow(/acme__nodefault.*no default export/);
    const notHono = appWith({ 'plugins/acme__nothono/index.js': 'export default () => ({});\n' });
    await expect(createTestApp({ env: { SVC_APP_PATH: notHono } })).rejects.toThrow(/acme__nothono.*did not return a Hono app/);
  });

  it('an app plugin with the key of a bundled one stops start-up naming both', async () => {
    const root = appWith({ 'plugins/svc__todo/index.js': okPlugin });
    await expect(createTestApp({ env: { SVC_APP_PATH: root } })).rejects.toThrow(/plugin "svc__todo" is defined twice/);
  });

  it('a listed package that is not installed stops start-up naming it', async () => {
    const root = appWith({});
    await expect(createTestApp({ config: { plugins: ['@acme/not-installed'] }, env: { SVC_APP_PATH: root } })).rejects.toThrow(/plugin "@acme\/not-installed"/);
  });

  it('app plugins are mounted beside the bundled ones', async () => {
    const root = appWith({ 'plugins/acme__ping/index.js': okPlugin });
    const t = await createTestApp({ env: { SVC_APP_PATH: root } });
    const u = await t.createUser();
    const c = t.client();
    await c.login(u.email, u.password);
    expect(await (await c.fetch('/acme__ping/ping')).json()).toEqual({ ok: true });
    expect((await c.fetch('/svc__todo/all')).status).toBe(200);
    await t.close();
  });
});
