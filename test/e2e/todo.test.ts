import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Database } from '../../src/db/db.ts';
import { MongoDatabase } from '../../src/db/mongo.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';

const mongoUrl = inject('mongoUrl');
const V1_UUID = '6ba7b810-9dad-11d1-80b4-00c04fd430c8';

for (const [name, openDb] of [
  ['embedded database', undefined],
  ['MongoDB', mongoUrl ? () => MongoDatabase.connect(mongoUrl) : null],
] as const) {
  describe.skipIf(openDb === null)(`svc__todo reference plugin (${name})`, () => {
    let t: TestApp;
    let alice: TestClient;
    let bob: TestClient;
    let admin: TestClient;
    let aliceId: string;
    let db: Database | undefined;

    beforeAll(async () => {
      db = openDb ? await openDb() : undefined;
      if (db) await (await db.collection('svc__todo-todo')).deleteMany({});
      t = await createTestApp({ db });
      const [a, b, root] = await Promise.all([t.createUser(), t.createUser(), t.createUser({ admin: true })]);
      aliceId = a.id;
      alice = t.client();
      bob = t.client();
      admin = t.client();
      await alice.login(a.email, a.password);
      await bob.login(b.email, b.password);
      await admin.login(root.email, root.password);
    });
    afterAll(() => t?.close());

    const create = (c: TestClient, json: unknown) => c.fetch('/svc__todo/todo', { method: 'POST', json });

    it('creates with a generated UUID v4, owner and lastEditor from the session, timestamps, the {data} wrapper', async () => {
      const res = await create(alice, { name: 'Buy milk', content: '2 l', tags: ['home'] });
      expect(res.status).toBe(201);
      const { data } = await res.json();
      expect(data).toMatchObject({ name: 'Buy milk', content: '2 l', tags: ['home'], owner: aliceId, lastEditor: aliceId, isDeleted: false });
      expect(data._id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(Date.parse(data.createdAt)).not.toBeNaN();
      expect(data.updatedAt).toBe(data.createdAt);
    });

    it('accepts a client-chosen UUID v4 and answers the two create errors of CONTRACT section 7', async () => {
      const id = randomUUID();
      expect((await create(alice, { _id: id, name: 'mine' })).status).toBe(201);
      const dup = await create(bob, { _id: id, name: 'again' });
      expect(dup.status).toBe(409);
      expect(await dup.json()).toEqual({ error: { code: 'already_exists', message: 'an entry with this id already exists' } });
      for (const bad of [V1_UUID, 'not-a-uuid', '']) {
        const res = await create(alice, { _id: bad, name: 'x' });
        expect(res.status).toBe(400);
        const body = await res.json();
        expect(body.error.code).toBe('validation_failed');
        expect(body.error.message).toBe('_id is not a valid uuid v4');
      }
    });

    it("finding 9: ids are global (SPEC): another user's id answers the same 409 as one's own, and nothing of the item", async () => {
      const { data } = await (await create(alice, { name: 'private name' })).json();
      const mineAgain = await create(alice, { _id: data._id, name: 'x' });
      const theirs = await create(bob, { _id: data._id, name: 'x' });
      expect(theirs.status).toBe(409);
      const body = await theirs.text();
      expect(body).toBe(await mineAgain.text());
      expect(body).not.toContain('private name');
      expect(body).not.toContain(aliceId);
    });

    it('lists only the caller\'s items; an admin lists everyone\'s', async () => {
      await create(bob, { name: 'bob item' });
      const mine = await (await alice.fetch('/svc__todo/all')).json();
      expect(mine.data.every((i: { owner: string }) => i.owner === aliceId)).toBe(true);
      expect(mine.meta.total).toBe(mine.data.length);
      const all = await (await admin.fetch('/svc__todo/all')).json();
      expect(new Set(all.data.map((i: { owner: string }) => i.owner)).size).toBeGreaterThanOrEqual(2);
    });

    it('reads and updates; another user gets 404; an admin may change it and becomes lastEditor', async () => {
      const { data } = await (await create(alice, { name: 'shared?' })).json();
      expect((await alice.fetch(`/svc__todo/todo/${data._id}`)).status).toBe(200);
      expect((await bob.fetch(`/svc__todo/todo/${data._id}`)).status).toBe(404);
      expect((await bob.fetch(`/svc__todo/todo/${data._id}`, { method: 'PATCH', json: { name: 'stolen' } })).status).toBe(404);
      expect((await bob.fetch(`/svc__todo/todo/${data._id}`, { method: 'DELETE' })).status).toBe(404);
      const patched = await alice.fetch(`/svc__todo/todo/${data._id}`, { method: 'PATCH', json: { name: 'renamed', tags: ['a'] } });
      expect(patched.status).toBe(200);
      expect((await patched.json()).data).toMatchObject({ name: 'renamed', tags: ['a'], owner: aliceId });
      const byAdmin = await (await admin.fetch(`/svc__todo/todo/${data._id}`, { method: 'PATCH', json: { content: 'checked' } })).json();
      expect(byAdmin.data.owner).toBe(aliceId);
      expect(byAdmin.data.lastEditor).not.toBe(aliceId);
    });

    it('soft delete hides the item (404 on GET/PATCH/DELETE, gone from /all) but keeps its _id taken', async () => {
      const { data } = await (await create(alice, { name: 'to delete' })).json();
      const del = await alice.fetch(`/svc__todo/todo/${data._id}`, { method: 'DELETE' });
      expect(del.status).toBe(200);
      expect((await del.json()).data.isDeleted).toBe(true);
      expect((await alice.fetch(`/svc__todo/todo/${data._id}`)).status).toBe(404);
      expect((await alice.fetch(`/svc__todo/todo/${data._id}`, { method: 'PATCH', json: { name: 'x' } })).status).toBe(404);
      expect((await alice.fetch(`/svc__todo/todo/${data._id}`, { method: 'DELETE' })).status).toBe(404);
      const all = await (await alice.fetch('/svc__todo/all')).json();
      expect(all.data.map((i: { _id: string }) => i._id)).not.toContain(data._id);
      expect((await create(alice, { _id: data._id, name: 'reuse' })).status).toBe(409);
    });

    it('hard delete removes the record', async () => {
      const { data } = await (await create(alice, { name: 'gone for good' })).json();
      expect((await alice.fetch(`/svc__todo/todo/${data._id}/hard`, { method: 'DELETE' })).status).toBe(200);
      expect((await alice.fetch(`/svc__todo/todo/${data._id}`)).status).toBe(404);
      expect((await create(alice, { _id: data._id, name: 'reuse after hard delete' })).status).toBe(201);
    });

    it('emits coreTodoCreated with the response payload when broadcast is true, and not otherwise', async () => {
      const events: unknown[] = [];
      t.instance.on('coreTodoCreated', (payload) => {
        events.push(payload);
      });
      await create(alice, { name: 'quiet' });
      const res = await create(alice, { name: 'loud', broadcast: true });
      const body = await res.json();
      await new Promise((r) => setTimeout(r, 20));
      expect(events).toEqual([body]);
    });

    it('refuses bad input with 400 validation_failed naming the field', async () => {
      const cases: [unknown, string][] = [
        [{}, 'name'],
        [{ name: 42 }, 'name'],
        [{ name: '' }, 'name'],
        [{ name: 'x'.repeat(201) }, 'name'],
        [{ name: 'x', content: 'y'.repeat(10_001) }, 'content'],
        [{ name: 'x', tags: 'notarray' }, 'tags'],
        [{ name: 'x', owner: 'someone-else' }, 'owner'],
        [{ name: 'x', lastEditor: 'x' }, 'lastEditor'],
        [{ name: 'x', extra: true }, 'extra'],
      ];
      for (const [json, field] of cases) {
        const res = await create(alice, json);
        expect(res.status, JSON.stringify(json)).toBe(400);
        const body = await res.json();
        expect(body.error.code).toBe('validation_failed');
        expect(body.error.details.map((d: { path: string }) => d.path)).toContain(field);
      }
      const { data } = await (await create(alice, { name: 'patch target' })).json();
      for (const json of [{ owner: 'x' }, { _id: randomUUID() }, { name: 7 }]) {
        expect((await alice.fetch(`/svc__todo/todo/${data._id}`, { method: 'PATCH', json })).status).toBe(400);
      }
      expect((await alice.fetch(`/svc__todo/todo/${V1_UUID}`)).status).toBe(400);
      expect((await alice.fetch('/svc__todo/todo/not-a-uuid')).status).toBe(400);
    });

    it('refuses anonymous callers with 401 unauthenticated (no session, no work-session header)', async () => {
      const res = await t.fetch('/svc__todo/all');
      expect(res.status).toBe(401);
      expect((await res.json()).error.code).toBe('unauthenticated');
    });

    it('a work-session guest reads the sharing user\'s items and cannot write (403 read_only_guest)', async () => {
      const shared = await (await create(alice, { name: 'shared with guests' })).json();
      const ws = await t.instance.auth.workSessions.docs.insertOne({
        _id: randomUUID(),
        isActive: true,
        expiresAt: null,
        pluginData: { svc__todo: { owner: aliceId } },
        createdAt: new Date().toISOString(),
      });
      const guest = { 'x-work-session-id': ws._id };
      const list = await t.fetch('/svc__todo/all', { headers: guest });
      expect(list.status).toBe(200);
      expect((await list.json()).data.map((i: { _id: string }) => i._id)).toContain(shared.data._id);
      expect(list.headers.getSetCookie()).toEqual([]); // guests get no session cookie
      const write = await t.fetch('/svc__todo/todo', { method: 'POST', headers: { ...guest, 'content-type': 'application/json' }, body: '{"name":"x"}' });
      expect(write.status).toBe(403);
      expect((await write.json()).error.code).toBe('read_only_guest');
      for (const method of ['PATCH', 'DELETE']) {
        const res = await t.fetch(`/svc__todo/todo/${shared.data._id}`, { method, headers: { ...guest, 'content-type': 'application/json' }, body: method === 'PATCH' ? '{"name":"y"}' : undefined });
        expect(res.status).toBe(403);
      }
      // inactive, expired, or not granting this plugin: 401 invalid_work_session
      const docs = t.instance.auth.workSessions.docs;
      const bad = [
        { isActive: false, expiresAt: null, pluginData: { svc__todo: {} } },
        { isActive: true, expiresAt: new Date(Date.now() - 1000).toISOString(), pluginData: { svc__todo: {} } },
        { isActive: true, expiresAt: null, pluginData: { other_plugin: {} } },
      ];
      for (const fields of bad) {
        const doc = await docs.insertOne({ _id: randomUUID(), createdAt: new Date().toISOString(), ...fields });
        const res = await t.fetch('/svc__todo/all', { headers: { 'x-work-session-id': doc._id } });
        expect(res.status).toBe(401);
        expect((await res.json()).error.code).toBe('invalid_work_session');
      }
      expect((await t.fetch('/svc__todo/all', { headers: { 'x-work-session-id': randomUUID() } })).status).toBe(401);
      expect((await t.fetch('/svc__todo/all', { headers: { 'x-work-session-id': 'garbage' } })).status).toBe(401);
      // a guest header does not open routes without a work-session hook
      expect((await t.fetch('/auth/session', { headers: guest })).status).toBe(401);
    });
  });
}
