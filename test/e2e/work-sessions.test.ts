// Work sessions over HTTP (CONTRACT sections 4 and 6, SPEC.md "Work session" and Authentication rules
// 4-5): the admin API (shapes, paging, 400/401/403/404), and what guests may do with the header
// `x-work-session-id`: read, never write, never get a cookie; the two 401 codes a frontend acts on.
// Runs on the embedded database and on the MongoDB wire-protocol server.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Database } from '../../src/db/db.ts';
import { MongoDatabase } from '../../src/db/mongo.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { ISO_RE } from '../support/auth.ts';

const mongoUrl = inject('mongoUrl');
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** An app plugin with one guest-enabled path for every method (the todo plugin has no PUT). */
function appRootWithGuestPlugin(): string {
  mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
  const root = mkdtempSync(path.join(ROOT, 'test/.tmp/ws-'));
  mkdirSync(path.join(root, 'plugins/acme__board'), { recursive: true });
  writeFileSync(
    path.join(root, 'plugins/acme__board/index.js'),
    `import { Hono } from 'hono';
export default (instance) => {
  const app = new Hono();
  const guard = instance.auth.authenticatedOrWorksession(instance.plugin.key);
  for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) {
    app.on(method, '/thing', guard, (c) => c.json({ method, guest: c.get('workSession')?.id ?? null, user: c.get('authUser')?.userId ?? null }));
  }
  return app;
};
`,
  );
  return root;
}

for (const [name, openDb] of [
  ['embedded database', undefined],
  ['MongoDB', mongoUrl ? () => MongoDatabase.connect(mongoUrl) : null],
] as const) {
  describe.skipIf(openDb === null)(`work sessions (${name})`, () => {
    let t: TestApp;
    let admin: TestClient;
    let user: TestClient;
    let userId: string;
    let db: Database | undefined;
    const appRoot = appRootWithGuestPlugin();

    beforeAll(async () => {
      db = openDb ? await openDb() : undefined;
      if (db) await (await db.collection('svc__core-worksession')).deleteMany({});
      t = await createTestApp({ db, env: { SVC_APP_PATH: appRoot } });
      const [root, u] = await Promise.all([t.createUser({ admin: true }), t.createUser()]);
      userId = u.id;
      admin = t.client();
      user = t.client();
      await admin.login(root.email, root.password);
      await user.login(u.email, u.password);
    });
    afterAll(async () => {
      await t?.close();
      rmSync(appRoot, { recursive: true, force: true });
    });

    const create = (json: unknown, c = admin) => c.fetch('/auth/work-sessions', { method: 'POST', json });
    async function created(json: unknown = { pluginData: { svc__todo: { owner: userId }, acme__board: {} } }) {
      const res = await create(json);
      expect(res.status, await res.clone().text()).toBe(201);
      return (await res.json()) as { id: string; [k: string]: unknown };
    }
    const guest = (id: string, extra: Record<string, string> = {}) => ({ 'x-work-session-id': id, ...extra });
    const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

    describe('admin API', () => {
      it('POST creates a work session: 201 with id (UUID v4), isActive, expiresAt, pluginData, composition, label, createdAt', async () => {
        const res = await create({ pluginData: { svc__todo: { owner: userId } } });
        expect(res.status).toBe(201);
        const body = await res.json();
        expect(body).toEqual({
          id: expect.stringMatching(UUID_V4),
          isActive: true,
          expiresAt: null,
          pluginData: { svc__todo: { owner: userId } },
          composition: null,
          label: null,
          createdAt: expect.stringMatching(ISO_RE),
        });
        const full = await (
          await create({ pluginData: { svc__todo: {}, '@svc/plugin-cli-connector': [1, 2] }, composition: 'home', expiresAt: '2099-01-31T12:00:00+01:00', label: ' Review ' })
        ).json();
        expect(full).toMatchObject({ composition: 'home', expiresAt: '2099-01-31T11:00:00.000Z', label: 'Review', pluginData: { '@svc/plugin-cli-connector': [1, 2] } });
        expect((await admin.fetch('/api/auth/work-sessions', { method: 'POST', json: { pluginData: { x: null } } })).status).toBe(201);
      });

      it('GET lists with offset/limit/total; GET/PATCH/DELETE by id; unknown id 404 not_found', async () => {
        const ids = [];
        for (let i = 0; i < 3; i++) ids.push((await created({ pluginData: { svc__todo: {} }, label: `page ${i}` })).id);
        const all = await (await admin.fetch('/auth/work-sessions?limit=500')).json();
        expect(all).toMatchObject({ offset: 0, limit: 500 });
        expect(all.total).toBe(all.items.length);
        expect(all.items.map((i: { id: string }) => i.id)).toEqual(expect.arrayContaining(ids));
        const page = await (await admin.fetch(`/auth/work-sessions?offset=${all.total - 2}&limit=1`)).json();
        expect(page).toEqual({ items: [all.items[all.total - 2]], offset: all.total - 2, limit: 1, total: all.total });
        expect((await (await admin.fetch('/auth/work-sessions')).json()).limit).toBe(50);

        const one = await admin.fetch(`/auth/work-sessions/${ids[0]}`);
        expect(one.status).toBe(200);
        expect(await one.json()).toMatchObject({ id: ids[0], label: 'page 0', isActive: true });

        const patched = await admin.fetch(`/auth/work-sessions/${ids[0]}`, {
          method: 'PATCH',
          json: { isActive: false, expiresAt: '2098-05-01T00:00:00Z', pluginData: { acme__board: { n: 1 } }, label: 'renamed' },
        });
        expect(patched.status).toBe(200);
        expect(await patched.json()).toMatchObject({ id: ids[0], isActive: false, expiresAt: '2098-05-01T00:00:00.000Z', pluginData: { acme__board: { n: 1 } }, label: 'renamed' });
        const cleared = await (await admin.fetch(`/auth/work-sessions/${ids[0]}`, { method: 'PATCH', json: { expiresAt: null } })).json();
        expect(cleared.expiresAt).toBeNull();
        expect(cleared.label).toBe('renamed'); // fields not sent stay as they were

        const del = await admin.fetch(`/auth/work-sessions/${ids[0]}`, { method: 'DELETE' });
        expect(del.status).toBe(204);
        expect(await del.text()).toBe('');
        for (const [method, json] of [['GET'], ['PATCH', { label: 'x' }], ['DELETE']] as const) {
          for (const id of [ids[0]!, randomUUID(), 'not-a-uuid']) {
            const res = await admin.fetch(`/auth/work-sessions/${id}`, { method, json });
            expect(res.status, `${method} ${id}`).toBe(404);
            expect(await errorCode(res)).toBe('not_found');
          }
        }
      });

      it('401 unauthenticated without a session and 403 forbidden for a non-admin, on every route', async () => {
        const id = (await created()).id;
        const calls: [string, string, unknown?][] = [
          ['POST', '/auth/work-sessions', { pluginData: { svc__todo: {} } }],
          ['GET', '/auth/work-sessions'],
          ['GET', `/auth/work-sessions/${id}`],
          ['PATCH', `/auth/work-sessions/${id}`, { isActive: false }],
          ['DELETE', `/auth/work-sessions/${id}`],
        ];
        for (const [method, p, json] of calls) {
          const anon = await t.client().fetch(p, { method, json });
          expect(anon.status, `${method} ${p}`).toBe(401);
          expect(await errorCode(anon)).toBe('unauthenticated');
          const notAdmin = await user.fetch(p, { method, json });
          expect(notAdmin.status, `${method} ${p}`).toBe(403);
          expect(await errorCode(notAdmin)).toBe('forbidden');
          // A guest of a valid work session is no admin either.
          expect((await t.fetch(p, { method, headers: guest(id, { 'content-type': 'application/json' }), body: json ? JSON.stringify(json) : undefined })).status).toBe(401);
        }
        expect((await (await admin.fetch(`/auth/work-sessions/${id}`)).json()).isActive).toBe(true);
        // An admin's browser on a foreign page: 403 csrf_failed before anything changes.
        for (const [method, p, json] of calls.filter(([m]) => m !== 'GET')) {
          const res = await admin.fetch(p, { method, json, headers: { origin: 'https://evil.example' } });
          expect(res.status, `${method} ${p}`).toBe(403);
          expect(await errorCode(res)).toBe('csrf_failed');
        }
        expect((await (await admin.fetch(`/auth/work-sessions/${id}`)).json()).isActive).toBe(true);
      });

      it('POST refuses bad input with 400 validation_failed naming the field', async () => {
        const cases: [unknown, string][] = [
          [{}, 'pluginData'],
          [{ pluginData: {} }, 'pluginData'],
          [{ pluginData: [] }, 'pluginData'],
          [{ pluginData: 'svc__todo' }, 'pluginData'],
          [{ pluginData: { 'Bad.Key': {} } }, 'pluginData.Bad.Key'],
          [{ pluginData: { svc__todo: { $where: 'x' } } }, 'pluginData'],
          [{ pluginData: { svc__todo: { 'a.b': 1 } } }, 'pluginData'],
          [{ pluginData: { svc__todo: {} }, expiresAt: 'tomorrow' }, 'expiresAt'],
          [{ pluginData: { svc__todo: {} }, expiresAt: '2030-02-30T00:00:00Z' }, 'expiresAt'],
          [{ pluginData: { svc__todo: {} }, expiresAt: 1893456000000 }, 'expiresAt'],
          [{ pluginData: { svc__todo: {} }, composition: '' }, 'composition'],
          [{ pluginData: { svc__todo: {} }, composition: 7 }, 'composition'],
          [{ pluginData: { svc__todo: {} }, label: 'x'.repeat(201) }, 'label'],
          [{ pluginData: { svc__todo: {} }, isActive: false }, 'isActive'],
          [{ pluginData: { svc__todo: {} }, id: randomUUID() }, 'id'],
        ];
        for (const [json, field] of cases) {
          const res = await create(json);
          expect(res.status, JSON.stringify(json)).toBe(400);
          const body = await res.json();
          expect(body.error.code).toBe('validation_failed');
          expect(body.error.details.map((d: { path: string }) => d.path), JSON.stringify(json)).toContain(field);
        }
        const deep = { pluginData: { svc__todo: JSON.parse('{"a":'.repeat(40) + '1' + '}'.repeat(40)) } };
        expect((await create(deep)).status).toBe(400);
        expect((await admin.fetch('/auth/work-sessions', { method: 'POST', body: 'pluginData=1', headers: { 'content-type': 'text/plain' } })).status).toBe(415);
        expect(await errorCode(await admin.fetch('/auth/work-sessions', { method: 'POST', body: '{', headers: { 'content-type': 'application/json' } }))).toBe('invalid_json');
      });

      it('pluginData given as an array (not an object of plugin keys) is 400 validation_failed on POST and PATCH, and nothing changes (issue 39)', async () => {
        const id = (await created({ pluginData: { svc__todo: {} } })).id;
        for (const pluginData of [[1, 2], [{ svc__todo: {} }], ['svc__todo']]) {
          for (const res of [await create({ pluginData }), await admin.fetch(`/auth/work-sessions/${id}`, { method: 'PATCH', json: { pluginData } })]) {
            expect(res.status, JSON.stringify(pluginData)).toBe(400);
            const body = await res.json();
            expect(body.error.code).toBe('validation_failed');
            expect(body.error.details.map((d: { path: string }) => d.path)).toContain('pluginData');
          }
        }
        expect((await (await admin.fetch(`/auth/work-sessions/${id}`)).json()).pluginData).toEqual({ svc__todo: {} });
      });

      it('PATCH and GET ?query refuse bad input with 400 validation_failed naming the field', async () => {
        const id = (await created()).id;
        const cases: [unknown, string][] = [
          [{ isActive: 'no' }, 'isActive'],
          [{ expiresAt: 'soon' }, 'expiresAt'],
          [{ pluginData: {} }, 'pluginData'],
          [{ label: 5 }, 'label'],
          [{ composition: 'other' }, 'composition'],
          [{ createdAt: new Date().toISOString() }, 'createdAt'],
        ];
        for (const [json, field] of cases) {
          const res = await admin.fetch(`/auth/work-sessions/${id}`, { method: 'PATCH', json });
          expect(res.status, JSON.stringify(json)).toBe(400);
          const body = await res.json();
          expect(body.error.code).toBe('validation_failed');
          expect(body.error.details.map((d: { path: string }) => d.path)).toContain(field);
        }
        for (const [query, field] of [
          ['limit=0', 'limit'],
          ['limit=501', 'limit'],
          ['limit=ten', 'limit'],
          ['offset=-1', 'offset'],
          ['page=2', 'page'],
        ]) {
          const res = await admin.fetch(`/auth/work-sessions?${query}`);
          expect(res.status, query).toBe(400);
          expect((await res.json()).error.details.map((d: { path: string }) => d.path)).toContain(field);
        }
        expect((await (await admin.fetch(`/auth/work-sessions/${id}`)).json()).isActive).toBe(true); // nothing changed
      });

      it('routes are in the OpenAPI document with their schemas', async () => {
        const doc = await (await t.fetch('/openapi.json')).json();
        expect(Object.keys(doc.paths['/auth/work-sessions'])).toEqual(expect.arrayContaining(['get', 'post']));
        expect(Object.keys(doc.paths['/auth/work-sessions/{id}'])).toEqual(expect.arrayContaining(['get', 'patch', 'delete']));
        expect(doc.paths['/auth/work-sessions'].post.requestBody.content['application/json'].schema.required).toEqual(['pluginData']);
      });
    });

    describe('guests (x-work-session-id)', () => {
      it('read what the work session grants, get no cookie, and every write is 403 read_only_guest', async () => {
        await user.fetch('/svc__todo/todo', { method: 'POST', json: { name: 'visible to guests' } });
        const { id } = await created();
        const list = await t.fetch('/svc__todo/all', { headers: guest(id) });
        expect(list.status).toBe(200);
        expect((await list.json()).data.map((i: { name: string }) => i.name)).toContain('visible to guests');
        expect(list.headers.getSetCookie()).toEqual([]);
        const read = await t.fetch('/api/acme__board/thing', { headers: guest(id) });
        expect(await read.json()).toEqual({ method: 'GET', guest: id, user: null });
        expect(read.headers.getSetCookie()).toEqual([]);
        for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
          const res = await t.fetch('/acme__board/thing', { method, headers: guest(id, { 'content-type': 'application/json' }), body: '{}' });
          expect(res.status, method).toBe(403);
          expect(await errorCode(res)).toBe('read_only_guest');
          expect(res.headers.getSetCookie()).toEqual([]);
        }
        const todoWrite = await t.fetch('/svc__todo/todo', { method: 'POST', headers: guest(id, { 'content-type': 'application/json' }), body: '{"name":"x"}' });
        expect(await errorCode(todoWrite)).toBe('read_only_guest');
      });

      it('a logged-in user who also sends the header is the user (writes allowed)', async () => {
        const { id } = await created();
        const res = await user.fetch('/acme__board/thing', { method: 'PUT', headers: guest(id) });
        expect(await res.json()).toEqual({ method: 'PUT', guest: null, user: userId });
      });

      it('no session and no header: 401 unauthenticated, also on guest-enabled routes', async () => {
        for (const p of ['/svc__todo/all', '/acme__board/thing', '/api/svc__todo/all']) {
          const res = await t.fetch(p);
          expect(res.status).toBe(401);
          expect(await errorCode(res)).toBe('unauthenticated');
        }
        // An expired or forged session cookie without the header is the same anonymous caller.
        const res = await t.fetch('/svc__todo/all', { headers: { cookie: `${t.instance.auth.cookieName}=${'A'.repeat(43)}` } });
        expect(await errorCode(res)).toBe('unauthenticated');
      });

      it('a header naming no valid work session for this plugin: 401 invalid_work_session (unknown, forged, inactive, expired, deleted, other plugin)', async () => {
        const inactive = await created({ pluginData: { svc__todo: {} } });
        expect((await admin.fetch(`/auth/work-sessions/${inactive.id}`, { method: 'PATCH', json: { isActive: false } })).status).toBe(200);
        const expired = await created({ pluginData: { svc__todo: {} }, expiresAt: new Date(Date.now() - 1000).toISOString() });
        const expiredLater = await created({ pluginData: { svc__todo: {} } });
        expect((await t.fetch('/svc__todo/all', { headers: guest(expiredLater.id) })).status).toBe(200);
        await admin.fetch(`/auth/work-sessions/${expiredLater.id}`, { method: 'PATCH', json: { expiresAt: new Date(Date.now() - 1).toISOString() } });
        const deleted = await created({ pluginData: { svc__todo: {} } });
        await admin.fetch(`/auth/work-sessions/${deleted.id}`, { method: 'DELETE' });
        const otherPlugin = await created({ pluginData: { acme__board: {} } });
        const cases: [string, string][] = [
          ['unknown', randomUUID()],
          ['forged', 'garbage'],
          ['empty', ''],
          ['too long', 'x'.repeat(5000)],
          ['inactive', inactive.id],
          ['expired at creation', expired.id],
          ['expired by PATCH', expiredLater.id],
          ['deleted', deleted.id],
          ['other plugin key', otherPlugin.id],
          ['upper-cased id', otherPlugin.id.toUpperCase()],
        ];
        for (const [what, id] of cases) {
          for (const [method, p] of [['GET', '/svc__todo/all'], ['POST', '/svc__todo/todo']]) {
            const res = await t.fetch(p!, { method, headers: guest(id, { 'content-type': 'application/json' }), body: method === 'POST' ? '{"name":"x"}' : undefined });
            expect(res.status, `${what} ${method}`).toBe(401);
            expect(await errorCode(res), what).toBe('invalid_work_session');
          }
        }
        // The other plugin's work session works where it is meant to.
        expect((await t.fetch('/acme__board/thing', { headers: guest(otherPlugin.id) })).status).toBe(200);
        // Reactivated: admitted again on the next request.
        await admin.fetch(`/auth/work-sessions/${inactive.id}`, { method: 'PATCH', json: { isActive: true } });
        expect((await t.fetch('/svc__todo/all', { headers: guest(inactive.id) })).status).toBe(200);
      });

      it('with global.requireAuthentication off, an anonymous caller of a guest route is still 401 unauthenticated', async () => {
        const open = await createTestApp({ config: { global: { requireAuthentication: false } } });
        try {
          const res = await open.fetch('/svc__todo/all');
          expect(res.status).toBe(401);
          expect(await errorCode(res)).toBe('unauthenticated');
        } finally {
          await open.close();
        }
      });
    });
  });
}
