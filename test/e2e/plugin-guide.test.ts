import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { fileBlocks } from '../support/docs.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe("plugin author's guide (docs/plugins.md)", () => {
  let t: TestApp;
  let user: TestClient;
  let userId: string;
  // Inside the repository, so `@svc/core` (the package's own name) and `hono` resolve as in an app.
  const appRoot = (() => {
    mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
    return mkdtempSync(path.join(ROOT, 'test/.tmp/guide-'));
  })();

  beforeAll(async () => {
    const files = fileBlocks('docs/plugins.md');
    expect([...files.keys()].sort()).toEqual([
      'packages/svc-plugin-greet/index.js',
      'packages/svc-plugin-greet/package.json',
      'plugins/acme__notes/index.ts',
      'svc.config.json',
      'tsconfig.json', // for type-checking only (test/e2e/npm-start.test.ts runs tsc with it)
    ]);
    for (const [file, text] of files) {
      mkdirSync(path.dirname(path.join(appRoot, file)), { recursive: true });
      writeFileSync(path.join(appRoot, file), text);
    }
    // What the guide's `npm install ./packages/svc-plugin-greet` leaves in node_modules: a link to the folder.
    expect(readFileSync(path.join(ROOT, 'docs/plugins.md'), 'utf8')).toContain('npm install ./packages/svc-plugin-greet');
    mkdirSync(path.join(appRoot, 'node_modules/@acme'), { recursive: true });
    symlinkSync('../../packages/svc-plugin-greet', path.join(appRoot, 'node_modules/@acme/svc-plugin-greet'), 'dir');
    const config = JSON.parse(files.get('svc.config.json')!);
    t = await createTestApp({ config, env: { SVC_APP_PATH: appRoot } });
    const u = await t.createUser();
    userId = u.id;
    user = t.client();
    await user.login(u.email, u.password);
  });
  afterAll(async () => {
    await t?.close();
    rmSync(appRoot, { recursive: true, force: true });
  });

  it('the folder plugin is mounted at /<key>, validates, stores, reads back and emits', async () => {
    const events: unknown[] = [];
    t.instance.on('acmeNoteAdded', (p) => {
      events.push(p);
    });
    const created = await user.fetch('/acme__notes/notes', { method: 'POST', json: { text: 'remember the milk' } });
    expect(created.status).toBe(201);
    const { data } = await created.json();
    expect(data).toMatchObject({ owner: userId, text: 'remember the milk' });
    const read = await user.fetch(`/api/acme__notes/notes/${data._id}`);
    expect((await read.json()).data.text).toBe('remember the milk');
    expect((await user.fetch('/acme__notes/notes', { method: 'POST', json: { text: 5 } })).status).toBe(400);
    expect((await t.fetch(`/acme__notes/notes/${data._id}`)).status).toBe(401);
    expect(events).toHaveLength(1);
  });

  it('a public route of the folder plugin answers anonymous callers', async () => {
    const res = await t.fetch('/acme__notes/hello');
    expect(await res.json()).toEqual({ data: 'hello from acme__notes' });
  });

  it('the package plugin is mounted at /plugin/<scope>/<name> with its pluginOptions', async () => {
    const res = await user.fetch('/plugin/acme/svc-plugin-greet/greet');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ data: `good morning, ${userId}` });
    expect((await t.fetch('/plugin/acme/svc-plugin-greet/greet')).status).toBe(401);
  });

  it("the guide's routes are in the OpenAPI document", async () => {
    const doc = await (await t.fetch('/openapi.json')).json();
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/acme__notes/notes', '/acme__notes/notes/{id}', '/acme__notes/hello']));
  });
});
