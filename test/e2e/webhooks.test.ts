// Signed webhooks (CONTRACT 13, issue 54) on the embedded store: the admin routes and their bad
// input, the URL rule, a test event signed as Standard Webhooks says (verified with `standardwebhooks`
// by a real receiver on loopback), audit records pushed to the endpoints that subscribe, retries with
// the same webhook-id on a short schedule until `failed`, answers that hang, redirect, fail or are huge,
// and no secret in anything a receiver gets. Redis and restarts: webhooks-redis.test.ts, webhooks-restart.test.ts.

import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELIVERY_COLLECTION } from '../../src/webhooks/deliveries.ts';
import { WEBHOOK_COLLECTION } from '../../src/webhooks/endpoints.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { startReceiver, type Receiver } from '../support/webhook-receiver.ts';

const SCHEDULE = [0.5, 0.5];
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Created {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  active: boolean;
  secret: string;
  createdAt: string;
}
interface Delivery {
  eventId: string;
  type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatusCode: number | null;
  nextAttemptAt: string | null;
  at: string;
}

let t: TestApp;
let admin: TestClient;
let rx: Receiver;
/** Every secret handed out, to prove none reaches a receiver. */
const secrets: string[] = [];

async function create(body: Record<string, unknown>, client = admin): Promise<Created> {
  const res = await client.fetch('/auth/webhooks', { method: 'POST', json: body });
  expect(res.status, await res.clone().text()).toBe(201);
  const created = (await res.json()) as Created;
  secrets.push(created.secret);
  return created;
}

/** An endpoint on its own path of the receiver, verified with its secret. */
async function endpoint(events: string[], extra: Record<string, unknown> = {}): Promise<Created & { path: string }> {
  const path = `/hook-${randomUUID().slice(0, 8)}`;
  const created = await create({ url: `${rx.url}${path}`, events, ...extra });
  rx.secrets.set(path, created.secret);
  return { ...created, path };
}

async function deliveries(id: string, query = ''): Promise<Delivery[]> {
  const res = await admin.fetch(`/auth/webhooks/${id}/deliveries${query}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: Delivery[] }).items;
}

/** Polls the deliveries route until the delivery of `eventId` has `status`. */
async function settled(id: string, eventId: string, status: Delivery['status'], timeoutMs = 15_000): Promise<Delivery> {
  const until = Date.now() + timeoutMs;
  let last: Delivery | undefined;
  while (Date.now() < until) {
    last = (await deliveries(id)).find((d) => d.eventId === eventId);
    if (last?.status === status) return last;
    await sleep(50);
  }
  throw new Error(`delivery ${eventId} is ${JSON.stringify(last)}, not ${status}`);
}

async function sendTest(id: string): Promise<string> {
  const res = await admin.fetch(`/auth/webhooks/${id}/test`, { method: 'POST' });
  expect(res.status).toBe(202);
  return ((await res.json()) as { eventId: string }).eventId;
}

beforeAll(async () => {
  rx = await startReceiver();
  t = await createTestApp({ env: { SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1' }, config: { auth: { webhooks: { retrySchedule: SCHEDULE } } } });
  // A receiver that never answers costs 1 s here, not 10 (the 10 s bound: test/unit/webhook-send.test.ts).
  t.instance.auth.webhooks.deliveryTimeoutMs = 1000;
  const a = await t.createUser({ admin: true });
  admin = t.client();
  expect((await admin.login(a.email, a.password)).status).toBe(200);
});
afterAll(async () => {
  await t?.close();
  await rx?.close();
});

describe('webhook endpoints (admin)', () => {
  it('POST answers 201 with the secret once; the list, PATCH and the database never show it', async () => {
    const created = await create({ url: `${rx.url}/crud`, events: ['login.*', 'user.created', 'login.*'], description: 'SIEM' });
    expect(created).toMatchObject({ url: `${rx.url}/crud`, events: ['login.*', 'user.created'], description: 'SIEM', active: true });
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.createdAt).toMatch(ISO);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(created.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);

    const listed = await admin.fetch('/auth/webhooks');
    const text = await listed.text();
    expect(listed.status).toBe(200);
    expect(text).not.toContain(created.secret.slice(6));
    const items = (JSON.parse(text) as { items: Record<string, unknown>[] }).items;
    const mine = items.find((i) => i.id === created.id)!;
    expect(mine).toMatchObject({ url: created.url, events: created.events, description: 'SIEM', active: true, createdAt: created.createdAt });
    expect(mine).not.toHaveProperty('secret');

    const patched = await admin.fetch(`/auth/webhooks/${created.id}`, { method: 'PATCH', json: { events: ['session.revoked'], description: null, active: false } });
    const patchedText = await patched.text();
    expect(patched.status).toBe(200);
    expect(patchedText).not.toContain(created.secret.slice(6));
    expect(JSON.parse(patchedText)).toMatchObject({ id: created.id, events: ['session.revoked'], description: null, active: false });

    const docs = await (await t.instance.db.collection(WEBHOOK_COLLECTION)).find({ _id: created.id });
    expect(docs).toHaveLength(1);
    // No SVC_SECRET_ENCRYPTION_KEY here: stored as given, as provider client secrets are (secrets-at-rest below).
    expect(JSON.stringify(docs[0])).toContain('"secret"');

    expect((await admin.fetch(`/auth/webhooks/${created.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await (await admin.fetch('/auth/webhooks')).json()).items.map((i: { id: string }) => i.id)).not.toContain(created.id);
  });

  it('an unknown id is 404 not_found on every route', async () => {
    const id = randomUUID();
    for (const [method, path, json] of [
      ['PATCH', `/auth/webhooks/${id}`, { active: false }],
      ['DELETE', `/auth/webhooks/${id}`, undefined],
      ['POST', `/auth/webhooks/${id}/test`, undefined],
      ['GET', `/auth/webhooks/${id}/deliveries`, undefined],
      ['DELETE', '/auth/webhooks/No_Such', undefined],
    ] as const) {
      const res = await admin.fetch(path, { method, ...(json ? { json } : {}) });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect((await res.json()).error.code).toBe('not_found');
    }
  });

  it('bad input is 400 validation_failed naming the field, and nothing is saved', async () => {
    const before = (await (await admin.fetch('/auth/webhooks')).json()).items.length;
    const url = `${rx.url}/bad`;
    const cases: [Record<string, unknown>, string][] = [
      [{ url: 'not a url', events: ['login.*'] }, 'url'],
      [{ url: 'ftp://example.com/hook', events: ['login.*'] }, 'url'],
      [{ url: 'https://user:pw@example.com/hook', events: ['login.*'] }, 'url'],
      [{ url, events: ['login.nope'] }, 'events.0'],
      [{ url, events: ['nope.*'] }, 'events.0'],
      [{ url, events: ['*'] }, 'events.0'],
      [{ url, events: 'login.*' }, 'events'],
      [{ url, events: [] }, 'events'],
      [{ url, events: [1] }, 'events.0'],
      [{ url }, 'events'],
      [{ events: ['login.*'] }, 'url'],
      [{ url, events: ['login.*'], description: 'x'.repeat(501) }, 'description'],
      [{ url, events: ['login.*'], description: 'two\nlines' }, 'description'],
      [{ url, events: ['login.*'], secret: 'whsec_mine' }, 'secret'],
    ];
    for (const [body, path] of cases) {
      const res = await admin.fetch('/auth/webhooks', { method: 'POST', json: body });
      const text = await res.text();
      expect(res.status, `${JSON.stringify(body)} -> ${text}`).toBe(400);
      const error = JSON.parse(text).error;
      expect(error.code).toBe('validation_failed');
      expect(error.details.map((d: { path: string }) => d.path), JSON.stringify(body)).toContain(path);
    }
    const { id } = await endpoint(['login.*']);
    for (const body of [{ url: 'http://' }, { events: [] }, { active: 'yes' }, { id: 'x' }]) {
      expect((await admin.fetch(`/auth/webhooks/${id}`, { method: 'PATCH', json: body })).status, JSON.stringify(body)).toBe(400);
    }
    for (const limit of ['0', '201', 'abc', '-1', '1.5']) {
      const res = await admin.fetch(`/auth/webhooks/${id}/deliveries?limit=${limit}`);
      expect(res.status, limit).toBe(400);
      expect((await res.json()).error.code).toBe('validation_failed');
    }
    expect((await admin.fetch(`/auth/webhooks/${id}/deliveries?limit=200`)).status).toBe(200);
    expect((await (await admin.fetch('/auth/webhooks')).json()).items.length).toBe(before + 1);
  });

  it('only admins: 401 without a session, 403 for a user', async () => {
    const anonymous = t.client();
    expect((await anonymous.fetch('/auth/webhooks')).status).toBe(401);
    const u = await t.createUser();
    const user = t.client();
    await user.login(u.email, u.password);
    for (const [method, path] of [
      ['GET', '/auth/webhooks'],
      ['POST', '/auth/webhooks'],
      ['PATCH', `/auth/webhooks/${randomUUID()}`],
      ['DELETE', `/auth/webhooks/${randomUUID()}`],
      ['POST', `/auth/webhooks/${randomUUID()}/test`],
      ['GET', `/auth/webhooks/${randomUUID()}/deliveries`],
    ] as const) {
      const res = await user.fetch(path, { method, ...(method === 'POST' || method === 'PATCH' ? { json: { url: 'https://example.com', events: ['login.*'] } } : {}) });
      expect(res.status, `${method} ${path}`).toBe(403);
    }
  });

  it('each change writes webhook.created|updated|deleted with details.webhookId', async () => {
    const { id } = await endpoint(['user.deleted']);
    await admin.fetch(`/auth/webhooks/${id}`, { method: 'PATCH', json: { description: 'x' } });
    await admin.fetch(`/auth/webhooks/${id}`, { method: 'DELETE' });
    const page = await t.instance.auth.audit.query({ type: 'webhook.*', limit: 200 });
    const mine = page.items.filter((r) => r.details.webhookId === id);
    expect(mine.map((r) => r.type)).toEqual(['webhook.deleted', 'webhook.updated', 'webhook.created']);
    for (const r of mine) expect(r.actor.type).toBe('admin');
  });
});

describe('the URL rule without SVC_ALLOW_INSECURE_WEBHOOK_URLS', () => {
  it('https to a public host only: http, loopback, private and link-local addresses are refused', async () => {
    const strict = await createTestApp();
    try {
      const a = await strict.createUser({ admin: true });
      const c = strict.client();
      await c.login(a.email, a.password);
      for (const url of [
        'http://example.com/hook',
        `${rx.url}/hook`,
        'https://127.0.0.1/hook',
        'https://127.1.2.3:8443/hook',
        'https://2130706433/hook',
        'https://0x7f.0.0.1/hook',
        'https://localhost/hook',
        'https://api.localhost/hook',
        'https://[::1]/hook',
        'https://[::ffff:127.0.0.1]/hook',
        'https://10.0.0.8/hook',
        'https://172.16.5.4/hook',
        'https://192.168.1.1/hook',
        'https://169.254.169.254/latest/meta-data',
        'https://[fd00::1]/hook',
        'https://[fe80::1]/hook',
        'https://0.0.0.0/hook',
        'https://100.64.0.1/hook',
      ]) {
        const res = await c.fetch('/auth/webhooks', { method: 'POST', json: { url, events: ['login.*'] } });
        const body = await res.json();
        expect(res.status, url).toBe(400);
        expect(body.error.code).toBe('validation_failed');
        expect(body.error.details[0].path).toBe('url');
      }
      const ok = await c.fetch('/auth/webhooks', { method: 'POST', json: { url: 'https://hooks.example.com/svc', events: ['login.*'] } });
      expect(ok.status).toBe(201);
      const { id } = await ok.json();
      const moved = await c.fetch(`/auth/webhooks/${id}`, { method: 'PATCH', json: { url: 'https://10.1.1.1/' } });
      expect(moved.status).toBe(400);
      expect((await (await c.fetch('/auth/webhooks')).json()).items[0].url).toBe('https://hooks.example.com/svc');
    } finally {
      await strict.close();
    }
  });
});

describe('delivery', () => {
  it('POST /test sends webhook.test, signed (Standard Webhooks), once; the deliveries list says delivered', async () => {
    const hook = await endpoint(['login.failed']);
    const eventId = await sendTest(hook.id);
    const [got] = await rx.waitFor(1, { path: hook.path });
    expect(got!.verified).toBe(true);
    expect(new Webhook(hook.secret).verify(got!.body, got!.headers as Record<string, string>)).toMatchObject({ type: 'webhook.test' });
    expect(got!.headers['content-type']).toBe('application/json');
    expect(got!.headers['webhook-id']).toBe(eventId);
    expect(got!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(Math.abs(Number(got!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    const body = JSON.parse(got!.body);
    expect(Object.keys(body).sort()).toEqual(['data', 'timestamp', 'type']);
    expect(body.timestamp).toMatch(ISO);
    expect(body.data).toMatchObject({ id: eventId, type: 'webhook.test', at: body.timestamp, actor: { type: 'admin' }, subject: {}, details: { webhookId: hook.id } });
    // The signature is HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed with the secret's bytes, as the spec says.
    const { createHmac } = await import('node:crypto');
    const expected = createHmac('sha256', Buffer.from(hook.secret.slice(6), 'base64')).update(`${eventId}.${got!.headers['webhook-timestamp']}.${got!.body}`).digest('base64');
    expect(got!.headers['webhook-signature']).toBe(`v1,${expected}`);

    const delivery = await settled(hook.id, eventId, 'delivered');
    expect(delivery).toEqual({ eventId, type: 'webhook.test', status: 'delivered', attempts: 1, lastStatusCode: 200, nextAttemptAt: null, at: expect.stringMatching(ISO) });
    await sleep(300);
    expect(rx.byId(eventId, hook.path)).toHaveLength(1);
  });

  it('audit records go to the active endpoints whose events match, with the record as data and its id as webhook-id', async () => {
    const all = await endpoint(['webhook.*']);
    const created = await endpoint(['webhook.created']);
    const other = await endpoint(['login.succeeded']);
    const paused = await endpoint(['webhook.*']);
    await admin.fetch(`/auth/webhooks/${paused.id}`, { method: 'PATCH', json: { active: false } });
    // One more change: webhook.created goes to `all` and `created`, webhook.updated to `all` only.
    const target = await endpoint(['user.deleted']);
    await admin.fetch(`/auth/webhooks/${target.id}`, { method: 'PATCH', json: { description: 'renamed' } });
    // `all` itself (an endpoint gets its own webhook.created), created, other, paused and target made; paused and target changed.
    const toAll = await rx.waitFor(7, { path: all.path });
    const [toCreated] = await rx.waitFor(1, { path: created.path });
    const events = toAll.map((r) => JSON.parse(r.body));
    const createdEvent = events.find((e) => e.type === 'webhook.created' && e.data.details.webhookId === target.id);
    expect(createdEvent, JSON.stringify(events.map((e) => e.type))).toBeDefined();
    expect(events.find((e) => e.type === 'webhook.updated' && e.data.details.webhookId === target.id)).toBeDefined();
    // The audit record, as GET /auth/audit shows it.
    const record = (await t.instance.auth.audit.query({ type: 'webhook.created', limit: 200 })).items.find((r) => r.details.webhookId === target.id)!;
    expect(createdEvent.data).toEqual(JSON.parse(JSON.stringify(record)));
    expect(createdEvent.timestamp).toBe(record.at);
    expect(toAll.find((r) => JSON.parse(r.body).data.id === record.id)!.headers['webhook-id']).toBe(record.id);
    expect(JSON.parse(toCreated!.body).type).toBe('webhook.created');
    for (const r of [...toAll, toCreated!]) expect(r.verified).toBe(true);
    await sleep(300);
    expect(rx.received.filter((r) => r.path === other.path || r.path === paused.path)).toEqual([]);
    expect(rx.received.filter((r) => r.path === created.path).map((r) => JSON.parse(r.body).type).every((type) => type === 'webhook.created')).toBe(true);
  });

  it('a failing receiver (500, then a redirect, then 404) is retried with the same webhook-id on the schedule, then failed', async () => {
    const hook = await endpoint(['login.failed']);
    const redirect = { status: 302, headers: { location: `${rx.url}/elsewhere` } };
    rx.plan(hook.path, { status: 500, body: 'down' }, redirect, { status: 404 });
    const eventId = await sendTest(hook.id);
    const pending = await settled(hook.id, eventId, 'pending');
    expect(pending.type).toBe('webhook.test');
    const got = await rx.waitFor(3, { path: hook.path });
    const failed = await settled(hook.id, eventId, 'failed');
    expect(failed).toMatchObject({ attempts: 1 + SCHEDULE.length, lastStatusCode: 404, nextAttemptAt: null });
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId, eventId]);
    expect(got.map((r) => r.answered)).toEqual([500, 302, 404]);
    for (const r of got) expect(r.verified).toBe(true);
    // The same body each time; each attempt signed anew.
    expect(new Set(got.map((r) => r.body)).size).toBe(1);
    // Retry n comes schedule[n-1] s after attempt n (within the test machine's slack).
    for (let n = 1; n < got.length; n++) expect(got[n]!.at - got[n - 1]!.at).toBeGreaterThanOrEqual(SCHEDULE[n - 1]! * 1000 - 50);
    // The redirect was not followed.
    expect(rx.received.filter((r) => r.path === '/elsewhere')).toEqual([]);
    await sleep(1200);
    expect(rx.byId(eventId, hook.path)).toHaveLength(3);
  });

  it('a receiver that answers 500 once and then 200: delivered on the second attempt; nextAttemptAt said when', async () => {
    const hook = await endpoint(['login.failed']);
    rx.plan(hook.path, { status: 503 });
    const eventId = await sendTest(hook.id);
    await rx.waitFor(1, { path: hook.path });
    const pending = await settled(hook.id, eventId, 'pending');
    if (pending.attempts === 1) {
      expect(pending.lastStatusCode).toBe(503);
      expect(Date.parse(pending.nextAttemptAt!)).toBeGreaterThan(Date.now() - 1000);
    }
    const delivered = await settled(hook.id, eventId, 'delivered');
    expect(delivered).toMatchObject({ attempts: 2, lastStatusCode: 200, nextAttemptAt: null });
  });

  it('a receiver that never answers: each attempt ends at the timeout (lastStatusCode null), and the request that caused the event never waits for it', async () => {
    const hook = await endpoint(['webhook.updated']);
    rx.fallbacks.set(hook.path, { hang: true });
    try {
      const started = Date.now();
      const res = await admin.fetch(`/auth/webhooks/${hook.id}`, { method: 'PATCH', json: { description: 'causes webhook.updated' } });
      expect(res.status).toBe(200);
      // The answer came while the receiver still held the delivery (or before it even arrived).
      const [held] = await rx.waitFor(1, { path: hook.path });
      expect(held!.answered).toBeNull();
      expect(held!.at).toBeGreaterThanOrEqual(started);
      const eventId = held!.headers['webhook-id'] as string;
      const failed = await settled(hook.id, eventId, 'failed', 20_000);
      expect(failed).toMatchObject({ attempts: 3, lastStatusCode: null, nextAttemptAt: null });
      expect(rx.byId(eventId, hook.path)).toHaveLength(3);
    } finally {
      rx.releaseHanging();
    }
  });

  it('a 10 MB answer is not read: a 200 delivers, a 500 fails; svc keeps answering', async () => {
    const hook = await endpoint(['login.failed']);
    rx.plan(hook.path, { bytes: 10 * 1024 * 1024, status: 200 });
    const ok = await sendTest(hook.id);
    expect(await settled(hook.id, ok, 'delivered')).toMatchObject({ attempts: 1, lastStatusCode: 200 });
    rx.plan(hook.path, { bytes: 10 * 1024 * 1024, status: 500 }, { bytes: 10 * 1024 * 1024, status: 500 }, { bytes: 10 * 1024 * 1024, status: 500 });
    const bad = await sendTest(hook.id);
    expect(await settled(hook.id, bad, 'failed')).toMatchObject({ attempts: 3, lastStatusCode: 500 });
    expect((await t.fetch('/health')).status).toBe(200);
  });

  it('an endpoint made inactive gets nothing more; a test event still goes to it', async () => {
    const hook = await endpoint(['webhook.*']);
    await admin.fetch(`/auth/webhooks/${hook.id}`, { method: 'PATCH', json: { active: false } });
    // Its own webhook.updated was written after the change: not for it.
    await endpoint(['login.failed']);
    const eventId = await sendTest(hook.id);
    await settled(hook.id, eventId, 'delivered');
    await sleep(300);
    expect(rx.received.filter((r) => r.path === hook.path).map((r) => JSON.parse(r.body).type)).toEqual(['webhook.test']);
  });

  it('DELETE removes the endpoint and its delivery records', async () => {
    const hook = await endpoint(['login.failed']);
    const eventId = await sendTest(hook.id);
    await settled(hook.id, eventId, 'delivered');
    expect((await admin.fetch(`/auth/webhooks/${hook.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await admin.fetch(`/auth/webhooks/${hook.id}/deliveries`)).status).toBe(404);
    const records = await t.instance.db.collection(DELIVERY_COLLECTION);
    expect(await records.count({ webhookId: hook.id })).toBe(0);
  });

  it('the deliveries list is newest first and takes limit', async () => {
    const hook = await endpoint(['login.failed']);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await sendTest(hook.id));
    for (const id of ids) await settled(hook.id, id, 'delivered');
    expect((await deliveries(hook.id)).map((d) => d.eventId)).toEqual([...ids].reverse());
    expect((await deliveries(hook.id, '?limit=2')).map((d) => d.eventId)).toEqual([ids[2], ids[1]]);
  });

  it('no secret reaches a receiver: not in a body, not in a header', () => {
    expect(rx.received.length).toBeGreaterThan(10);
    for (const secret of secrets) {
      const raw = secret.slice('whsec_'.length);
      for (const r of rx.received) {
        const seen = `${r.body}\n${JSON.stringify(r.headers)}`;
        expect(seen).not.toContain(raw);
        expect(seen).not.toContain(Buffer.from(raw, 'base64').toString('hex'));
      }
    }
  });
});

describe('secrets at rest', () => {
  const KEY = 'a long enough passphrase for the tests 0123456789';

  it('with SVC_SECRET_ENCRYPTION_KEY the secret is sealed (enc:v1:) and still signs', async () => {
    const sealed = await createTestApp({ env: { SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1', SVC_SECRET_ENCRYPTION_KEY: KEY } });
    try {
      const a = await sealed.createUser({ admin: true });
      const c = sealed.client();
      await c.login(a.email, a.password);
      const path = `/sealed-${randomUUID().slice(0, 8)}`;
      const res = await c.fetch('/auth/webhooks', { method: 'POST', json: { url: `${rx.url}${path}`, events: ['login.failed'] } });
      const { secret, id } = (await res.json()) as Created;
      secrets.push(secret);
      rx.secrets.set(path, secret);
      const stored = (await (await sealed.instance.db.collection(WEBHOOK_COLLECTION)).findOne({ _id: id })) as unknown as { secret: string };
      expect(stored.secret).toMatch(/^enc:v1:r\./);
      expect(JSON.stringify(stored)).not.toContain(secret.slice(6));
      expect((await c.fetch(`/auth/webhooks/${id}/test`, { method: 'POST' })).status).toBe(202);
      const [got] = await rx.waitFor(1, { path });
      expect(got!.verified).toBe(true);
    } finally {
      await sealed.close();
    }
  });

  it('a secret stored in plaintext (saved before the key was set) is sealed again at start, and opens to the same secret', async () => {
    const { EmbeddedDatabase } = await import('../../src/db/embedded.ts');
    const { SecretBox } = await import('../../src/auth/oauth/secrets.ts');
    const { WebhookEndpoints } = await import('../../src/webhooks/endpoints.ts');
    const db = EmbeddedDatabase.inMemory();
    try {
      const before = await WebhookEndpoints.open(db, new SecretBox(undefined), true);
      const { doc, secret } = await before.create({ url: 'https://hooks.example.com/a', events: ['login.*'] });
      expect(doc.secret).toBe(secret);
      const after = await WebhookEndpoints.open(db, new SecretBox(KEY), true);
      expect(await after.resealSecrets()).toEqual([doc._id]);
      const stored = (await after.find(doc._id))!;
      expect(stored.secret).toMatch(/^enc:v1:r\./);
      expect(after.secretOf(stored)).toBe(secret);
      expect(await after.resealSecrets()).toEqual([]);
    } finally {
      await db.close();
    }
  });
});

describe('resend (POST /auth/webhooks/:id/deliveries/:eventId/resend)', () => {
  const resend = (id: string, eventId: string, client = admin) => client.fetch(`/auth/webhooks/${id}/deliveries/${eventId}/resend`, { method: 'POST' });
  const code = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

  it('a failed delivery is sent again with the same webhook-id and body, signed anew, its attempts counted from 1 on the schedule, then delivered', async () => {
    const hook = await endpoint(['webhook.updated']);
    // Failed in all its attempts, then one more 500 after the resend, then 204.
    rx.plan(hook.path, ...Array.from({ length: 2 + SCHEDULE.length }, () => ({ status: 500 })));
    rx.fallbacks.set(hook.path, { status: 204 });
    await admin.fetch(`/auth/webhooks/${hook.id}`, { method: 'PATCH', json: { description: 'resend me' } });
    const [first] = await rx.waitFor(1, { path: hook.path });
    const eventId = first!.headers['webhook-id'] as string;
    await settled(hook.id, eventId, 'failed');

    const res = await resend(hook.id, eventId);
    expect(res.status, await res.clone().text()).toBe(202);
    expect(await res.json()).toEqual({ eventId });
    const again = await settled(hook.id, eventId, 'pending');
    expect(again.attempts).toBeLessThanOrEqual(1);
    const delivered = await settled(hook.id, eventId, 'delivered');
    expect(delivered).toMatchObject({ attempts: 2, lastStatusCode: 204, nextAttemptAt: null });

    const got = rx.byId(eventId, hook.path);
    expect(got.map((r) => r.answered)).toEqual([...Array.from({ length: 2 + SCHEDULE.length }, () => 500), 204]);
    expect(new Set(got.map((r) => r.body)).size).toBe(1);
    // Verified as a receiver does, with the endpoint's secret: the resend's own timestamp and signature.
    const last = got.at(-1)!;
    const headers = { 'webhook-id': eventId, 'webhook-timestamp': last.headers['webhook-timestamp'] as string, 'webhook-signature': last.headers['webhook-signature'] as string };
    expect(new Webhook(hook.secret).verify(last.body, headers)).toMatchObject({ type: 'webhook.updated', data: { id: eventId } });
    expect(Number(last.headers['webhook-timestamp'])).toBeGreaterThanOrEqual(Number(got[0]!.headers['webhook-timestamp']));
    // Received now: only a failed delivery is sent again.
    const twice = await resend(hook.id, eventId);
    expect(twice.status).toBe(409);
    expect(await code(twice)).toBe('delivery_delivered');
  });

  it('404 not_found for an unknown endpoint or delivery, 409 delivery_pending while attempted, 409 webhook_inactive, 400 validation_failed for a bad id, 403 for a user', async () => {
    const hook = await endpoint(['login.failed']);
    rx.plan(hook.path, ...Array.from({ length: 1 + SCHEDULE.length }, () => ({ status: 500 })));
    const eventId = await sendTest(hook.id);
    await settled(hook.id, eventId, 'pending');
    const pending = await resend(hook.id, eventId);
    expect(pending.status).toBe(409);
    expect(await code(pending)).toBe('delivery_pending');
    await settled(hook.id, eventId, 'failed');

    for (const [id, ev] of [[randomUUID(), eventId], [hook.id, randomUUID()]] as const) {
      const res = await resend(id, ev);
      expect(res.status).toBe(404);
      expect(await code(res)).toBe('not_found');
    }
    const bad = await resend('x'.repeat(201), eventId);
    expect(bad.status).toBe(400);
    expect(await code(bad)).toBe('validation_failed');

    const u = await t.createUser();
    const user = t.client();
    await user.login(u.email, u.password);
    expect((await resend(hook.id, eventId, user)).status).toBe(403);
    expect((await resend(hook.id, eventId, t.client())).status).toBe(401);

    await admin.fetch(`/auth/webhooks/${hook.id}`, { method: 'PATCH', json: { active: false } });
    const inactive = await resend(hook.id, eventId);
    expect(inactive.status).toBe(409);
    expect(await code(inactive)).toBe('webhook_inactive');
    expect((await deliveries(hook.id)).find((d) => d.eventId === eventId)).toMatchObject({ status: 'failed' });
    expect(rx.byId(eventId, hook.path)).toHaveLength(1 + SCHEDULE.length);
  });

  it('is in /openapi.json', async () => {
    const doc = (await (await t.client().fetch('/openapi.json')).json()) as { paths: Record<string, Record<string, unknown>> };
    const path = Object.keys(doc.paths).find((p) => /^\/auth\/webhooks\/[:{]id}?\/deliveries\/[:{]eventId}?\/resend$/.test(p));
    expect(path).toBeDefined();
    expect(doc.paths[path!]).toHaveProperty('post');
  });
});
