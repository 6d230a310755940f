// Landing seeds (SPEC.md "Landing seeds" and migration step 5, CONTRACT section 6): the app root's
// config/compositions.js and config/interactionLinks.js (or .ts, .mjs, ...) plus plugin seeds, checked together and
// upserted by _id at start-up; every rule stops start-up with a message naming the file and the id.

import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Database } from '../../src/db/db.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { MongoDatabase } from '../../src/db/mongo.ts';
import { applySeeds } from '../../src/plugins/seeds.ts';
import { createTestApp } from '../support/app.ts';
import { startSvc, stopAll } from '../support/spawn.ts';

const mongoUrl = inject('mongoUrl');
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const roots: string[] = [];
afterAll(async () => {
  await stopAll();
  roots.forEach((r) => rmSync(r, { recursive: true, force: true }));
});

/** An app root inside the repository (plugins resolve `hono`) holding the given files. */
function appRoot(files: Record<string, string>): string {
  mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
  const root = mkdtempSync(path.join(ROOT, 'test/.tmp/seeds-'));
  roots.push(root);
  write(root, files);
  return root;
}
function write(root: string, files: Record<string, string>) {
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
}

const home = (extra: Record<string, unknown> = {}) => ({
  _id: 'home',
  pathname: { default: 'home', de: 'start' },
  widgetsLayout: [[{ column: 12, widget: { uuid: 'w-1', name: 'TodoList', pluginKey: 'svc__todo' } }]],
  ...extra,
});
const homeLink = (extra: Record<string, unknown> = {}) => ({
  _id: 'homeLink',
  composition: 'home',
  slotType: 'page',
  triggers: [{ type: 'page-navigation', settings: { icon: 'mdi-home', title: { default: 'Home' }, sortOrder: 1, navigationBarType: 'main' } }],
  isLandingPage: true,
  ...extra,
});
const esm = (value: unknown) => `export default ${JSON.stringify(value, null, 2)};\n`;
const cjs = (value: unknown) => `module.exports = ${JSON.stringify(value, null, 2)};\n`;
const files = (compositions: unknown, links: unknown, format = esm) => ({
  'config/compositions.js': format(compositions),
  'config/interactionLinks.js': format(links),
});

/** The start-up error of an app root (createTestApp runs the same loaders and seeds as `npm start`). */
async function startupError(root: string): Promise<string> {
  try {
    const t = await createTestApp({ env: { SVC_APP_PATH: root } });
    await t.close();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('start-up succeeded');
}

/** The bundled cache list plugin seeds its own page (SPEC.md cache list rule 8); these tests look at the rest. */
const notBundled = <T extends { _id: string }>(docs: T[]) => docs.filter((d) => d._id !== 'cacheList' && d._id !== 'cacheListLink');

describe('landing seeds', () => {
  it('ES module and CommonJS seed files are upserted into svc__core-composition and svc__core-interactionlink', async () => {
    for (const format of [esm, cjs]) {
      const t = await createTestApp({ env: { SVC_APP_PATH: appRoot(files([home()], [homeLink()], format)) } });
      expect(notBundled(await (await t.instance.db.collection('svc__core-composition')).find({}))).toEqual([home()]);
      expect(notBundled(await (await t.instance.db.collection('svc__core-interactionlink')).find({}))).toEqual([homeLink()]);
      await t.close();
    }
  });

  it('TypeScript seed files (config/compositions.ts, config/interactionLinks.mts) load as the .js ones do; two forms of one file stop start-up', async () => {
    const ts = (type: string, value: unknown) => `type Seed = ${type};\nconst seeds: Seed[] = ${JSON.stringify(value)};\nexport default seeds;\n`;
    const root = appRoot({
      'config/compositions.ts': ts('{ _id: string; pathname: Record<string, string>; widgetsLayout: unknown[] }', [home()]),
      'config/interactionLinks.mts': ts('{ _id: string; composition: string; isLandingPage?: boolean }', [homeLink()]),
    });
    const t = await createTestApp({ env: { SVC_APP_PATH: root } });
    expect(notBundled(await (await t.instance.db.collection('svc__core-composition')).find({}))).toEqual([home()]);
    expect(notBundled(await (await t.instance.db.collection('svc__core-interactionlink')).find({}))).toEqual([homeLink()]);
    await t.close();
    // Messages name the file as it is.
    expect(await startupError(appRoot({ ...files([home()], [homeLink()]), 'config/compositions.js': '', 'config/compositions.ts': ts('object', [home({ pathname: 'x' })]) })))
      .toMatch(/more than one compositions seed file: config\/compositions\.js, config\/compositions\.ts \(keep one\)/);
    expect(await startupError(appRoot({ 'config/compositions.ts': ts('object', [home({ pathname: 'x' })]), 'config/interactionLinks.js': esm([homeLink()]) })))
      .toMatch(/config\/compositions\.ts: composition "home" is not valid: pathname/);
  });

  it('app seeds and plugin seeds go together; the plugin loader\'s seeds take the same checks', async () => {
    const root = appRoot({
      ...files([home()], [homeLink()]),
      'plugins/acme__cache/index.js': `import { Hono } from 'hono';
export default () => new Hono();
export const seeds = {
  compositions: [{ _id: 'acmeList', pathname: { default: 'acme-list' }, widgetsLayout: [[{ column: 12, widget: { uuid: 'c-1', name: 'AcmeList', pluginKey: 'acme__cache' } }]] }],
  interactionLinks: [{ _id: 'acmeListLink', composition: 'acmeList', slotType: 'page', triggers: [{ type: 'page-navigation', settings: { icon: 'mdi-database' } }], isLandingPage: false }],
};
`,
    });
    const t = await createTestApp({ env: { SVC_APP_PATH: root } });
    const ids = notBundled(await (await t.instance.db.collection('svc__core-composition')).find({})).map((d) => d._id).sort();
    expect(ids).toEqual(['acmeList', 'home']);
    await t.close();

    // (A fresh app root each: the plugin module is imported once per path.)
    const plugin = (seeds: string) => ({ ...files([home()], [homeLink()]), 'plugins/acme__cache/index.js': `import { Hono } from 'hono';\nexport default () => new Hono();\nexport const seeds = ${seeds};\n` });
    expect(await startupError(appRoot(plugin("{ compositions: [{ _id: 'home', pathname: { default: 'x' }, widgetsLayout: [] }] }")))).toMatch(/composition "home" is seeded twice: by config\/compositions\.js and by plugin "acme__cache" seeds/);
    expect(await startupError(appRoot(plugin("{ compositions: [{ _id: 'bad', pathname: { default: 'logout' }, widgetsLayout: [] }] }")))).toMatch(/plugin "acme__cache" seeds: composition "bad": pathname.default "logout" is reserved/);
  });

  it('exactly one landing page: zero or two stop start-up, naming the file and the ids', async () => {
    const none = await startupError(appRoot(files([home()], [homeLink({ isLandingPage: false })])));
    expect(none).toMatch(/exactly one interaction link must have isLandingPage: true; found 0 in config\/interactionLinks\.js/);
    const two = await startupError(appRoot(files([home()], [homeLink(), homeLink({ _id: 'second' })])));
    expect(two).toMatch(/found 2: "homeLink" \(config\/interactionLinks\.js\), "second" \(config\/interactionLinks\.js\)/);
    const onlyCompositions = await startupError(appRoot({ 'config/compositions.js': esm([home()]) }));
    expect(onlyCompositions).toMatch(/found 0 in config\/interactionLinks\.js \(the file is missing\)/);
  });

  it('/login and /logout cannot be composition pages (any locale, any slashes or case)', async () => {
    for (const pathname of [{ default: 'login' }, { default: '/logout' }, { default: 'home', fr: '/Login/' }]) {
      const message = await startupError(appRoot(files([home({ pathname })], [homeLink()])));
      expect(message, JSON.stringify(pathname)).toMatch(/config\/compositions\.js: composition "home": pathname\.\w+ ".*" is reserved/);
    }
    // Paths that merely start with the word are fine.
    const t = await createTestApp({ env: { SVC_APP_PATH: appRoot(files([home({ pathname: { default: 'login-help' } })], [homeLink()])) } });
    await t.close();
  });

  it('a malformed file stops start-up naming the file (and the id or index of the bad entry)', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ ...files([home()], [homeLink()]), 'config/compositions.js': 'export default [{ _id: "home", \n' }, /config\/compositions\.js cannot be loaded/],
      [{ ...files([home()], [homeLink()]), 'config/interactionLinks.js': 'export default { _id: "homeLink" };\n' }, /config\/interactionLinks\.js: the default export must be an array/],
      [{ ...files([home()], [homeLink()]), 'config/interactionLinks.js': 'export const links = [];\n' }, /config\/interactionLinks\.js: the default export must be an array/],
      [files([{ pathname: { default: 'x' }, widgetsLayout: [] }], [homeLink()]), /config\/compositions\.js: composition at index 0 is not valid: _id: /],
      [files([home({ widgetsLayout: [[{ column: 6, widget: { uuid: 'u', name: 'N' } }]] })], [homeLink()]), /composition "home" is not valid: widgetsLayout\.0\.0\.widget\.pluginKey/],
      [files([home({ widgetsLayout: [{ column: 6 }] })], [homeLink()]), /composition "home" is not valid: widgetsLayout\.0/],
      [files([home({ pathname: 'home' })], [homeLink()]), /composition "home" is not valid: pathname/],
      [files([home()], [homeLink({ isLandingPage: 'yes' })]), /config\/interactionLinks\.js: interaction link "homeLink" is not valid: isLandingPage/],
      [files([home()], [homeLink({ composition: 'nowhere' })]), /interaction link "homeLink": composition "nowhere" is neither seeded nor in svc__core-composition/],
      [files([home(), home()], [homeLink()]), /composition "home" is seeded twice/],
      [{ ...files([home()], [homeLink()]), 'config/compositions.js': 'throw new Error("no config for you");\n' }, /config\/compositions\.js cannot be loaded: no config for you/],
    ];
    for (const [content, pattern] of cases) expect(await startupError(appRoot(content))).toMatch(pattern);
  });

  it('the real process stops before listening, naming the file and the ids (exit 1)', async () => {
    const svc = await startSvc({ appRoot: appRoot(files([home()], [homeLink(), homeLink({ _id: 'second' })])) });
    expect(svc.ready).toBe(false);
    expect(await svc.exited).toBe(1);
    expect(svc.stderr()).toMatch(/svc failed to start: exactly one interaction link must have isLandingPage: true; found 2: "homeLink" \(config\/interactionLinks\.js\), "second"/);
  });

  /** What applySeeds logs at warn and at info for an app root with neither file. */
  async function seedLogs(before?: (db: Database) => Promise<unknown>) {
    const t = await createTestApp({ env: { SVC_APP_PATH: appRoot({}) } });
    // A database with nothing but what seeds wrote (the plugins' seeds are not passed below).
    for (const name of ['svc__core-composition', 'svc__core-interactionlink']) await (await t.instance.db.collection(name)).deleteMany({});
    await before?.(t.instance.db);
    const logged = { warn: [] as string[], info: [] as string[] };
    const logger = { ...t.instance.logger, warn: (...args: unknown[]) => logged.warn.push(String(args.at(-1))), info: (...args: unknown[]) => logged.info.push(String(args.at(-1))) };
    await applySeeds({ ...t.instance, logger: logger as never }, []);
    await t.close();
    return logged;
  }

  it('a new app with neither file starts with a warning (CONTRACT 6) that says what a landing page is for, not the migration', async () => {
    const { warn } = await seedLogs();
    expect(warn).toEqual([expect.stringMatching(/no landing page is seeded: a frontend that lands on \/ after login needs config\/compositions\.js and config\/interactionLinks\.js/)]);
    expect(warn.join()).not.toContain('migration');
  });

  it('an app from 0.1.x (compositions already in its database) without a landing page: the migration warning (step 5)', async () => {
    const { warn } = await seedLogs(async (db) => (await db.collection('svc__core-composition')).insertOne({ _id: 'old-home', pathname: { default: 'home' }, widgetsLayout: [] } as never));
    expect(warn).toEqual([expect.stringMatching(/no landing page is seeded: add config\/compositions\.js and config\/interactionLinks\.js .*migration step 5/)]);
  });

  for (const [name, openDb] of [
    ['embedded database on disk', () => Promise.resolve(new EmbeddedDatabase(mkdtempSync(path.join(tmpdir(), 'svc-seeds-db-'))))],
    ['MongoDB', mongoUrl ? () => MongoDatabase.connect(mongoUrl.replace(/\/([^/?]*)(\?|$)/, `/svc_seeds_${randomUUID().slice(0, 8)}$2`)) : null],
  ] as const) {
    it.skipIf(openDb === null)(`a seed changed between two starts is upserted, not duplicated (${name})`, async () => {
      const root = appRoot(files([home()], [homeLink()]));
      let db: Database = await openDb!();
      const dir = (db as unknown as { dir: string | null }).dir;
      let t = await createTestApp({ db, env: { SVC_APP_PATH: root } });
      // Something the seeds do not know, e.g. made in the workbench: left alone.
      await (await t.instance.db.collection('svc__core-interactionlink')).insertOne({ _id: 'manual', composition: 'home', isLandingPage: false } as never);
      await t.instance.realtime.close();
      t.instance.auth.close();
      await t.instance.stores.close();
      if (name !== 'MongoDB') await db.close(); // the embedded files are reopened by a new process-like start

      write(root, files([home({ pathname: { default: 'start' }, widgetsLayout: [] }), { _id: 'about', pathname: { default: 'about' }, widgetsLayout: [] }], [homeLink({ isLandingPage: false }), homeLink({ _id: 'aboutLink', composition: 'about' })]));
      if (name !== 'MongoDB') db = new EmbeddedDatabase(dir);
      t = await createTestApp({ db, env: { SVC_APP_PATH: root } });
      const compositions = notBundled(await (await t.instance.db.collection('svc__core-composition')).find({}, { sort: { _id: 1 } }));
      expect(compositions).toEqual([
        { _id: 'about', pathname: { default: 'about' }, widgetsLayout: [] },
        { _id: 'home', pathname: { default: 'start' }, widgetsLayout: [] },
      ]);
      const links = notBundled(await (await t.instance.db.collection<{ _id: string; isLandingPage?: boolean }>('svc__core-interactionlink')).find({}, { sort: { _id: 1 } }));
      expect(links.map((l) => [l._id, l.isLandingPage])).toEqual([
        ['aboutLink', true],
        ['homeLink', false],
        ['manual', false],
      ]);
      await t.close();
    });
  }
});
