// Webhooks on a real Redis (a stream read by a consumer group, CONTRACT 13 "once per cluster"): two instances sharing one Redis
// and one database deliver each event exactly once (counted by webhook-id at a loopback receiver),
// retry across instances with the same id, keep every queue key in one Redis Cluster slot (hash tag),
// and a delivery owed by an instance killed with SIGKILL is made later, once, by another instance.

import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { redisServerAvailable, startPrivateRedis } from '../support/private-redis.ts';
import { dropPrefix } from '../support/redis.ts';
import { freePort, sleep, startSvc, stopAll, tempDir, type SvcProcess } from '../support/spawn.ts';
import { startReceiver, type Receiver } from '../support/webhook-receiver.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');
const ALLOW = { SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1' };

/** The hash tag Redis Cluster hashes a key by: the first `{...}` with something inside, else the whole key. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

describe.skipIf(!redisUrl)('two instances on one Redis', () => {
  const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;
  const db = EmbeddedDatabase.inMemory();
  let one: TestApp;
  let two: TestApp;
  let adminOne: TestClient;
  let adminTwo: TestClient;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
    const config = { auth: { store: { keyPrefix }, webhooks: { retrySchedule: [0.5, 0.5] } } };
    one = await createTestApp({ redisUrl, db, env: ALLOW, config });
    two = await createTestApp({ redisUrl, db, env: ALLOW, config });
    const a = await one.createUser({ admin: true });
    adminOne = one.client();
    adminTwo = two.client();
    expect((await adminOne.login(a.email, a.password)).status).toBe(200);
    expect((await adminTwo.login(a.email, a.password)).status).toBe(200);
  });
  afterAll(async () => {
    await one?.close();
    await two?.close().catch(() => {}); // the shared database is closed by the first
    await rx?.close();
  });

  async function endpoint(client: TestClient, events: string[]) {
    const hookPath = `/hook-${randomUUID().slice(0, 8)}`;
    const res = await client.fetch('/auth/webhooks', { method: 'POST', json: { url: `${rx.url}${hookPath}`, events } });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; secret: string };
    rx.secrets.set(hookPath, created.secret);
    return { ...created, path: hookPath };
  }

  it('each event is delivered exactly once, whichever instance caused it', async () => {
    const hook = await endpoint(adminOne, ['webhook.*']);
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const client = i % 2 ? adminTwo : adminOne;
      const res = await client.fetch(`/auth/webhooks/${hook.id}/test`, { method: 'POST' });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { eventId: string }).eventId);
      // An audit record too, from the other instance (webhook.updated).
      expect((await (i % 2 ? adminOne : adminTwo).fetch(`/auth/webhooks/${hook.id}`, { method: 'PATCH', json: { description: `change ${i}` } })).status).toBe(200);
    }
    // 12 tests, 12 changes and its own webhook.created.
    const got = await rx.waitFor(25, { path: hook.path });
    await sleep(1500); // room for a duplicate to show up
    const all = rx.received.filter((r) => r.path === hook.path);
    const counts = new Map<string, number>();
    for (const r of all) counts.set(r.headers['webhook-id'] as string, (counts.get(r.headers['webhook-id'] as string) ?? 0) + 1);
    expect(all.length).toBe(25);
    expect([...counts.values()].every((n) => n === 1), JSON.stringify([...counts])).toBe(true);
    for (const id of ids) expect(counts.get(id)).toBe(1);
    for (const r of got) expect(r.verified).toBe(true);
    // Either instance answers the deliveries list, from the shared records.
    const listed = (await (await adminTwo.fetch(`/auth/webhooks/${hook.id}/deliveries?limit=200`)).json()) as { items: { status: string }[] };
    expect(listed.items).toHaveLength(25);
    expect(listed.items.every((d) => d.status === 'delivered')).toBe(true);
  });

  it('retries go through the queue with the same webhook-id until delivered', async () => {
    const hook = await endpoint(adminTwo, ['login.failed']);
    rx.plan(hook.path, { status: 500 }, { status: 502 });
    const res = await adminOne.fetch(`/auth/webhooks/${hook.id}/test`, { method: 'POST' });
    const { eventId } = (await res.json()) as { eventId: string };
    const got = await rx.waitFor(3, { path: hook.path });
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId, eventId]);
    expect(got.map((r) => r.answered)).toEqual([500, 502, 200]);
    let delivery: { status: string; attempts: number; lastStatusCode: number } | undefined;
    for (let i = 0; i < 100 && delivery?.status !== 'delivered'; i++) {
      delivery = ((await (await adminOne.fetch(`/auth/webhooks/${hook.id}/deliveries`)).json()) as { items: typeof delivery[] }).items[0];
      await sleep(50);
    }
    expect(delivery).toMatchObject({ status: 'delivered', attempts: 3, lastStatusCode: 200 });
  });

  it('a delivery whose first attempt is under way is listed as pending with 0 attempts (on Redis its record is written with the outcome)', async () => {
    for (const t of [one, two]) t.instance.auth.webhooks.deliveryTimeoutMs = 1500;
    try {
      const hook = await endpoint(adminOne, ['login.failed']);
      rx.plan(hook.path, { hang: true });
      const res = await adminTwo.fetch(`/auth/webhooks/${hook.id}/test`, { method: 'POST' });
      const { eventId } = (await res.json()) as { eventId: string };
      await rx.waitFor(1, { path: hook.path });
      type Listed = { eventId: string; status: string; attempts: number; lastStatusCode: number | null; nextAttemptAt: string | null; type: string };
      const list = async (client: TestClient) => ((await (await client.fetch(`/auth/webhooks/${hook.id}/deliveries`)).json()) as { items: Listed[] }).items;
      for (const client of [adminOne, adminTwo]) {
        expect(await list(client)).toEqual([{ eventId, type: 'webhook.test', status: 'pending', attempts: 0, lastStatusCode: null, nextAttemptAt: expect.any(String), at: expect.any(String) }]);
        // Sent again while listed as pending: 409 as for a pending record (it was 404, "no delivery").
        const resend = await client.fetch(`/auth/webhooks/${hook.id}/deliveries/${eventId}/resend`, { method: 'POST' });
        expect(resend.status).toBe(409);
        expect(await resend.json()).toMatchObject({ error: { code: 'delivery_pending' } });
      }
      // An unknown event is still 404.
      expect((await adminOne.fetch(`/auth/webhooks/${hook.id}/deliveries/${randomUUID()}/resend`, { method: 'POST' })).status).toBe(404);
      // The attempt times out, the retry (0.5 s later) is answered: one record, delivered on the second attempt.
      let last: Listed[] = [];
      for (let i = 0; i < 200 && last[0]?.status !== 'delivered'; i++) {
        last = await list(adminOne);
        await sleep(50);
      }
      expect(last).toEqual([expect.objectContaining({ eventId, status: 'delivered', attempts: 2, lastStatusCode: 200 })]);
      expect(rx.byId(eventId)).toHaveLength(2);
    } finally {
      for (const t of [one, two]) t.instance.auth.webhooks.deliveryTimeoutMs = 10_000;
    }
  });

  it('a failed delivery sent again (resend) is a job of its own id, made once, with the same webhook-id (the first job id is remembered for a day)', async () => {
    const hook = await endpoint(adminOne, ['login.failed']);
    rx.plan(hook.path, { status: 500 }, { status: 500 }, { status: 500 });
    rx.fallbacks.set(hook.path, { status: 204 });
    const res = await adminOne.fetch(`/auth/webhooks/${hook.id}/test`, { method: 'POST' });
    const { eventId } = (await res.json()) as { eventId: string };
    const state = async () => ((await (await adminTwo.fetch(`/auth/webhooks/${hook.id}/deliveries`)).json()) as { items: { eventId: string; status: string; attempts: number; lastStatusCode: number | null }[] }).items.find((d) => d.eventId === eventId);
    const until = async (status: string) => {
      for (let i = 0; i < 200 && (await state())?.status !== status; i++) await sleep(50);
      return state();
    };
    expect(await until('failed')).toMatchObject({ attempts: 3, lastStatusCode: 500 });
    // From the other instance: the queue is shared.
    const again = await adminTwo.fetch(`/auth/webhooks/${hook.id}/deliveries/${eventId}/resend`, { method: 'POST' });
    expect(again.status, await again.clone().text()).toBe(202);
    expect(await until('delivered')).toMatchObject({ attempts: 1, lastStatusCode: 204 });
    await sleep(800); // room for a duplicate
    const got = rx.byId(eventId, hook.path);
    expect(got.map((r) => r.answered)).toEqual([500, 500, 500, 204]);
    expect(got.at(-1)!.verified).toBe(true);
  });

  it('every key of the queue is under the key prefix and in one Redis Cluster slot (hash tag {svc-webhooks})', async () => {
    const client = new Redis(redisUrl);
    try {
      const keys = await client.keys(`${keyPrefix}*`);
      const queueKeys = keys.filter((k) => k.includes('webhooks'));
      expect(queueKeys.length).toBeGreaterThan(3);
      for (const key of queueKeys) {
        expect(key.startsWith(`${keyPrefix}{svc-webhooks}:queue:`), key).toBe(true);
        expect(hashTag(key)).toBe('svc-webhooks');
      }
      // Never the secret, never a body other than the audit record's: the jobs hold ids and the event.
      const secrets = [...rx.secrets.values()].map((s) => s.slice(6));
      for (const key of queueKeys) {
        const type = await client.type(key);
        const dump =
          type === 'stream' ? JSON.stringify(await client.xrange(key, '-', '+')) : type === 'zset' ? JSON.stringify(await client.zrange(key, '0', '-1')) : type === 'string' ? ((await client.get(key)) ?? '') : `<${type}>`;
        expect(['stream', 'zset', 'string'], key).toContain(type);
        for (const s of secrets) expect(dump).not.toContain(s);
      }
    } finally {
      client.disconnect();
    }
  });
});

describe.skipIf(!redisUrl || !mongoUrl)('an instance killed (SIGKILL) with a delivery owed', () => {
  const ADMIN = { email: 'root@example.com', password: 'correct horse battery staple' };
  let rx: Receiver;
  /** The processes' key prefix, dropped once they are gone. */
  const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;
  afterAll(async () => {
    await stopAll();
    await rx?.close();
    if (redisUrl) await dropPrefix(redisUrl, keyPrefix);
  });

  function start(appRoot: string, env: Record<string, string>): Promise<SvcProcess> {
    return startSvc({ appRoot, env: { ...env, ...ALLOW, SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password }, startTimeoutMs: 40_000 });
  }

  async function adminOf(svc: SvcProcess) {
    const login = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
    expect(login.status, svc.output()).toBe(200);
    // Every cookie of the login (the session's and the device's, in either order).
  const cookie = login.headers.getSetCookie().map((line) => line.split(';')[0]!).join('; ');
    return (p: string, init: { method?: string; json?: unknown } = {}) =>
      fetch(`${svc.url}${p}`, { method: init.method ?? 'GET', headers: { cookie, 'content-type': 'application/json' }, ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}) });
  }

  it('is made later, once, by the instance that is left', async () => {
    rx = await startReceiver();
    const appRoot = tempDir('svc-webhooks-');
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { store: { keyPrefix }, webhooks: { retrySchedule: [3, 3] } } }));
    const env = { CACHE_URL: redisUrl, MONGODB_URL: mongoUrl.replace(/\/[^/?]*(\?|$)/, `/webhooks_${randomUUID().slice(0, 8)}$1`) };

    const a = await start(appRoot, env);
    expect(a.ready, a.output()).toBe(true);
    const call = await adminOf(a);
    const res = await call('/auth/webhooks', { method: 'POST', json: { url: `${rx.url}/owed`, events: ['login.failed'] } });
    expect(res.status).toBe(201);
    const hook = (await res.json()) as { id: string; secret: string };
    rx.secrets.set('/owed', hook.secret);
    // The receiver is down (500) for the first attempt; the retry is owed in 3 s when `a` dies.
    rx.plan('/owed', { status: 500 });
    const { eventId } = (await (await call(`/auth/webhooks/${hook.id}/test`, { method: 'POST' })).json()) as { eventId: string };
    await rx.waitFor(1, { path: '/owed' });
    // What an operator sees: one warning per failed attempt, naming the endpoint, the event and the status.
    const warning = await a.waitForLog((l) => l.msg?.startsWith('webhook delivery attempt failed') === true && l.eventId === eventId, 10_000);
    expect(warning).toMatchObject({ webhookId: hook.id, attempt: 1, statusCode: 500 });
    await a.stop('SIGKILL');

    const b = await start(appRoot, env);
    expect(b.ready, b.output()).toBe(true);
    const got = await rx.waitFor(2, { path: '/owed', timeoutMs: 30_000 });
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
    expect(got[1]!.verified).toBe(true);
    expect(got[1]!.answered).toBe(200);
    const callB = await adminOf(b);
    let delivery: { status: string; attempts: number } | undefined;
    for (let i = 0; i < 100 && delivery?.status !== 'delivered'; i++) {
      delivery = ((await (await callB(`/auth/webhooks/${hook.id}/deliveries`)).json()) as { items: (typeof delivery)[] }).items[0];
      await sleep(50);
    }
    expect(delivery).toMatchObject({ status: 'delivered', attempts: 2 });
    await sleep(3500); // past the schedule's next slot: no third request
    expect(rx.byId(eventId)).toHaveLength(2);
  });
});

describe.skipIf(!redisServerAvailable)('Redis goes away and comes back', () => {
  it('the queue rides it out (no unhandled error, no crash) and delivers again once Redis is back', async () => {
    const port = await freePort();
    let redis = await startPrivateRedis(port);
    const rx = await startReceiver();
    const t = await createTestApp({ redisUrl: redis.url, env: ALLOW, config: { auth: { webhooks: { retrySchedule: [0.5] } } } });
    try {
      const a = await t.createUser({ admin: true });
      const admin = t.client();
      await admin.login(a.email, a.password);
      const res = await admin.fetch('/auth/webhooks', { method: 'POST', json: { url: `${rx.url}/outage`, events: ['login.failed'] } });
      const hook = (await res.json()) as { id: string; secret: string };
      rx.secrets.set('/outage', hook.secret);
      await redis.kill('SIGKILL');
      await sleep(3000); // the worker's blocking read, lock renewals and stalled checks all fail meanwhile
      redis = await startPrivateRedis(port);
      // The session was in the Redis that went away: log in again once svc is back on it.
      for (let i = 0; i < 100 && (await t.fetch('/health')).status !== 200; i++) await sleep(100);
      await admin.login(a.email, a.password);
      const sent = await admin.fetch(`/auth/webhooks/${hook.id}/test`, { method: 'POST' });
      expect(sent.status).toBe(202);
      const { eventId } = (await sent.json()) as { eventId: string };
      const [got] = await rx.waitFor(1, { path: '/outage', timeoutMs: 20_000 });
      expect(got!.headers['webhook-id']).toBe(eventId);
      expect(got!.verified).toBe(true);
    } finally {
      await t.close();
      await rx.close();
      await redis.kill('SIGTERM');
    }
  });
});
