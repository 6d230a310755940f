import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { packagePrefix, RESERVED_PLUGIN_KEYS } from '../../src/plugins/loader.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp } from '../support/app.ts';
import { RUNTIME, startSvc, stopAll } from '../support/spawn.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
const roots: string[] = [];
afterAll(async () => {
  await stopAll();
  roots.forEach((r) => rmSync(r, { recursive: true, force: true }));
});

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

  it("a folder named for svc's own routes (docs, plugin, auth, api, ...) stops start-up naming it; the list covers every core route", async () => {
    for (const key of ['docs', 'plugin', 'auth', 'api']) {
      const root = appWith({ [`plugins/${key}/index.js`]: okPlugin });
      await expect(createTestApp({ env: { SVC_APP_PATH: root } }), key).rejects.toThrow(new RegExp(`plugin folder "${key}" .*: /${key} belongs to svc's own routes`));
    }
    const t = await createTestApp();
    try {
      const plugins = new Set(['svc__todo', 'svc__cache']);
      const firstSegments = new Set(t.routes().map((r) => r.path.split('/')[1]!.replace(/\..*$/, '')).filter((s) => s && s !== '*' && !plugins.has(s)));
      expect([...firstSegments].filter((s) => !RESERVED_PLUGIN_KEYS.includes(s))).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('a factory that throws stops start-up naming the plugin and where in its files', async () => {
    const root = appWith({ 'plugins/acme__broken/index.js': "export default () => { throw new Error('no database for me'); };\n" });
    await expect(createTestApp({ env: { SVC_APP_PATH: root } })).rejects.toThrow(/plugin "acme__broken" .* failed to load: no database for me \(at .*\/plugins\/acme__broken\/index\.js:1:\d+\)/);
  });

  it('a plugin file that does not parse: the real process names the file and line (Node keeps them out of the error)', async () => {
    const root = appWith({ 'package.json': '{"type":"module"}', 'plugins/acme__typo/index.js': 'export default () => {\n  const x = ;\n};\n' });
    const svc = await startSvc({ appRoot: root });
    expect(svc.ready, svc.output()).toBe(false);
    expect(svc.stderr()).toContain(`plugin "acme__typo" (${path.join(root, 'plugins/acme__typo')}) failed to load: `);
    // Each runtime words the syntax error its own way (Node: "Unexpected token ';'"); the file and line are named on each.
    expect(svc.stderr()).toContain(`${path.join(root, 'plugins/acme__typo/index.js')}:2`);
    if (RUNTIME === 'node') expect(svc.stderr()).toContain(`failed to load: Unexpected token ';' (at ${path.join(root, 'plugins/acme__typo/index.js')}:2)`);
  });

  it("the API key scopes a plugin declares are its own <pluginKey>:<action>: auth:admin, another plugin's key or a bad action stops start-up naming the plugin and the scope", async () => {
    const hooked = (scope: string) =>
      `import { Hono } from 'hono';\nexport default (instance) => new Hono().get('/x', instance.auth.authenticate({ scopes: [${JSON.stringify(scope)}] }), (c) => c.json({}));\n`;
    const routed = (scope: string) =>
      "import { Hono } from 'hono';\nexport default (instance) => {\n  const app = new Hono();\n" +
      `  instance.http.mountRoutes(app, [instance.http.defineRoute({ method: 'GET', path: '/x', scopes: [${JSON.stringify(scope)}], onRequest: instance.auth.authenticate(), schema: { summary: 'x' }, handler: (c) => c.json({}) })]);\n` +
      '  return app;\n};\n';
    const cases: [string, RegExp][] = [
      ['auth:admin', /plugin "acme__keys" .* failed to load: it declares the scope "auth:admin", which is svc's own: .*authenticate\(\{ admin: true \}\)/],
      ['svc__todo:read', /plugin "acme__keys" .* failed to load: it declares the scope "svc__todo:read", which belongs to "svc__todo": this plugin's scopes are "acme__keys:<action>"/],
      ['read', /plugin "acme__keys" .* failed to load: it declares the scope "read", which is not <pluginKey>:<action>/],
      ['acme__keys:Read All', /plugin "acme__keys" .* failed to load: it declares the scope "acme__keys:Read All": the action after "acme__keys:" must be lowercase/],
    ];
    for (const [scope, error] of cases) {
      for (const [how, source] of [['authenticate', hooked(scope)], ['defineRoute', routed(scope)]] as const) {
        const root = appWith({ 'plugins/acme__keys/index.js': source });
        await expect(createTestApp({ env: { SVC_APP_PATH: root } }), `${scope} (${how})`).rejects.toThrow(error);
      }
    }
    // Its own scopes load, and a key may hold them.
    const root = appWith({ 'plugins/acme__keys/index.js': hooked('acme__keys:read'), 'plugins/acme__more/index.js': routed('acme__more:export.csv') });
    const t = await createTestApp({ env: { SVC_APP_PATH: root } });
    try {
      expect(t.instance.auth.apiKeys.knownScopes()).toEqual(expect.arrayContaining(['acme__keys:read', 'acme__more:export.csv']));
    } finally {
      await t.close();
    }
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

  it('seeds a plugin exports are upserted by _id at start-up', async () => {
    const root = appWith({
      'plugins/acme__seeded/index.js': `${okPlugin}export const seeds = {
  compositions: [{ _id: 'acmeHome', pathname: { default: 'acme-home' }, widgetsLayout: [] }],
  interactionLinks: [{ _id: 'acmeHomeLink', composition: 'acmeHome', slotType: 'page', isLandingPage: false }],
};\n`,
    });
    const t = await createTestApp({ env: { SVC_APP_PATH: root } });
    const compositions = await t.instance.db.collection('svc__core-composition');
    expect(await compositions.findOne({ _id: 'acmeHome' })).toMatchObject({ pathname: { default: 'acme-home' } });
    expect(await (await t.instance.db.collection('svc__core-interactionlink')).findOne({ _id: 'acmeHomeLink' })).toMatchObject({ composition: 'acmeHome' });
    await t.close();
  });

  it('plugins write settings.<integration> of a user through the auth API; core never does', async () => {
    const t = await createTestApp();
    const u = await t.createUser();
    await t.instance.auth.setUserSettings(u.id, 'acme__notes', { theme: 'dark' });
    await t.instance.auth.setUserSettings(u.id, 'other_plugin', 1);
    await t.instance.auth.setUserSettings(u.id, 'other_plugin', undefined);
    const c = t.client();
    await c.login(u.email, u.password);
    expect((await (await c.fetch('/auth/session?expand=user')).json()).user.settings).toEqual({ acme__notes: { theme: 'dark' } });
    await expect(t.instance.auth.setUserSettings(u.id, 'Bad.Key', 1)).rejects.toThrow(/must be a plugin key/);
    await expect(t.instance.auth.setUserSettings('no-such-user', 'acme__notes', 1)).rejects.toMatchObject({ code: 'not_found' });
    await t.close();
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

  it("a plain Hono plugin's path answers other methods 405 method_not_allowed with Allow, as defineRoute paths do; what it catches for every method it keeps", async () => {
    const root = appWith({
      'plugins/acme__plain/index.js': `import { Hono } from 'hono';
export default () => new Hono()
  .get('/', (c) => c.json({ root: true }))
  .get('/items/:id', (c) => c.json({ id: c.req.param('id') }))
  .delete('/items/:id', (c) => c.body(null, 204))
  .all('/any', (c) => c.json({ method: c.req.method }));
`,
    });
    const t = await createTestApp({ env: { SVC_APP_PATH: root } });
    const u = await t.createUser();
    const c = t.client();
    await c.login(u.email, u.password);
    for (const path of ['/acme__plain/items/7', '/api/acme__plain/items/7']) {
      const res = await c.fetch(path, { method: 'PUT', json: {} });
      expect(res.status, path).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, DELETE, HEAD');
      expect(await res.json()).toMatchObject({ error: { code: 'method_not_allowed' } });
    }
    expect((await c.fetch('/acme__plain', { method: 'POST', json: {} })).status).toBe(405);
    expect(await (await c.fetch('/acme__plain/items/7')).json()).toEqual({ id: '7' });
    expect(await (await c.fetch('/acme__plain/any', { method: 'PATCH', json: {} })).json()).toEqual({ method: 'PATCH' });
    expect((await c.fetch('/acme__plain/nothing', { method: 'POST', json: {} })).status).toBe(404);
    await t.close();
  });
});

// Issue 53: the bundled demo plugins never reach production by accident.
describe('the bundled demo plugins (svc__todo, svc__cache)', () => {
  const lines: string[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(line) });
  const mounted = async (opts: { env?: Record<string, string>; config?: Record<string, unknown> }) => {
    lines.length = 0;
    const t = await createTestApp({ ...opts, logger });
    const admin = await t.createUser({ admin: true });
    const c = t.client();
    expect((await c.login(admin.email, admin.password)).status).toBe(200);
    const todo = (await c.fetch('/svc__todo/all')).status;
    const cache = (await c.fetch('/svc__cache/cacheInstances')).status;
    await t.close();
    return { todo, cache, said: lines.map((l) => (JSON.parse(l) as { msg: string }).msg).filter((m) => m.startsWith('bundled demo plugins')) };
  };

  it('development, no list: both load, and one line says how to choose', async () => {
    const r = await mounted({});
    expect([r.todo, r.cache]).toEqual([200, 200]);
    expect(r.said).toEqual([expect.stringContaining('bundled demo plugins loaded (development): svc__cache, svc__todo')]);
  });

  it('NODE_ENV=production, no list: neither loads (404), and the log says so', async () => {
    const r = await mounted({ env: { NODE_ENV: 'production' } });
    expect([r.todo, r.cache]).toEqual([404, 404]);
    expect(r.said).toEqual([expect.stringContaining('not loaded (NODE_ENV=production): svc__cache, svc__todo')]);
  });

  it('a list decides, in production and in development: only the named ones load', async () => {
    expect(await mounted({ env: { NODE_ENV: 'production' }, config: { plugins: ['svc__todo'] } })).toMatchObject({ todo: 200, cache: 404, said: [] });
    expect(await mounted({ config: { plugins: ['svc__cache'] } })).toMatchObject({ todo: 404, cache: 200, said: [] });
  });
});
