// Webhooks owed when svc dies are still made (CONTRACT 13):
// - embedded store and database (no Redis): the delivery records are the queue; a delivery owed when
//   svc is killed (SIGKILL) is made after the restart, with the same webhook-id;
// - Redis: an instance killed in the middle of an attempt (the receiver hangs) leaves its job pending
//   in the consumer group; once idle, the instance that is left claims it and makes it.

import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { dropPrefix } from '../support/redis.ts';
import { sleep, startSvc, stopAll, tempDir, type SvcProcess } from '../support/spawn.ts';
import { startReceiver, type Receiver } from '../support/webhook-receiver.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');
const ADMIN = { email: 'root@example.com', password: 'correct horse battery staple' };

let rx: Receiver;
/** The key prefix of the Redis case, dropped once its processes are gone. */
const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(async () => {
  await stopAll();
  await rx?.close();
  if (redisUrl) await dropPrefix(redisUrl, keyPrefix);
});

function start(appRoot: string, env: Record<string, string>, dataDir?: string): Promise<SvcProcess> {
  return startSvc({ appRoot, ...(dataDir ? { dataDir } : {}), env: { ...env, SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1', SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password }, startTimeoutMs: 40_000 });
}

async function adminOf(svc: SvcProcess) {
  const login = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
  expect(login.status, svc.output()).toBe(200);
  // Every cookie of the login (the session's and the device's, in either order).
  const cookie = login.headers.getSetCookie().map((line) => line.split(';')[0]!).join('; ');
  return (p: string, init: { method?: string; json?: unknown } = {}) =>
    fetch(`${svc.url}${p}`, { method: init.method ?? 'GET', headers: { cookie, 'content-type': 'application/json' }, ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}) });
}

type Call = Awaited<ReturnType<typeof adminOf>>;

async function delivered(call: Call, webhookId: string): Promise<{ status: string; attempts: number; lastStatusCode: number | null }> {
  let delivery: { status: string; attempts: number; lastStatusCode: number | null } | undefined;
  for (let i = 0; i < 200 && delivery?.status !== 'delivered'; i++) {
    delivery = ((await (await call(`/auth/webhooks/${webhookId}/deliveries`)).json()) as { items: (typeof delivery)[] }).items[0];
    await sleep(50);
  }
  return delivery!;
}

async function hookOn(call: Call, receiver: Receiver, hookPath: string): Promise<string> {
  const res = await call('/auth/webhooks', { method: 'POST', json: { url: `${receiver.url}${hookPath}`, events: ['login.failed'] } });
  expect(res.status).toBe(201);
  const hook = (await res.json()) as { id: string; secret: string };
  receiver.secrets.set(hookPath, hook.secret);
  return hook.id;
}

// The two run side by side (each waits on timers and locks, not on the CPU).
describe.concurrent('deliveries owed when svc dies', () => {
  it('embedded store and database: a delivery owed when svc is killed (SIGKILL) is made after the restart', async () => {
    const appRoot = tempDir('svc-webhooks-');
    const dataDir = tempDir('svc-webhooks-data-');
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { webhooks: { retrySchedule: [2, 2] } } }));
    const env = { CACHE_URL: '', MONGODB_URL: '' };
    const first = await start(appRoot, env, dataDir);
    expect(first.ready, first.output()).toBe(true);
    const call = await adminOf(first);
    const webhookId = await hookOn(call, rx, '/embedded');
    rx.plan('/embedded', { status: 500 });
    const { eventId } = (await (await call(`/auth/webhooks/${webhookId}/test`, { method: 'POST' })).json()) as { eventId: string };
    await rx.waitFor(1, { path: '/embedded' });
    await first.waitForLog((l) => l.eventId === eventId && l.attempt === 1, 10_000);
    await first.stop('SIGKILL');

    const second = await start(appRoot, env, dataDir);
    expect(second.ready, second.output()).toBe(true);
    const got = await rx.waitFor(2, { path: '/embedded', timeoutMs: 20_000 });
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
    expect(got[1]!.verified).toBe(true);
    expect(await delivered(await adminOf(second), webhookId)).toMatchObject({ status: 'delivered', attempts: 2, lastStatusCode: 200 });
    expect(second.logs().some((l) => l.msg === 'webhook deliveries still owed are queued again')).toBe(true);
    await sleep(2500);
    expect(rx.byId(eventId)).toHaveLength(2);
    await second.stop();
  });

  it.skipIf(!redisUrl || !mongoUrl)('Redis: an instance killed in the middle of an attempt: the stalled job is made by the instance that is left, with the same webhook-id', async () => {
    const appRoot = tempDir('svc-webhooks-');
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { store: { keyPrefix }, webhooks: { retrySchedule: [60] } } }));
    const env = { CACHE_URL: redisUrl, MONGODB_URL: mongoUrl.replace(/\/[^/?]*(\?|$)/, `/webhooks_${randomUUID().slice(0, 8)}$1`) };
    const a = await start(appRoot, env);
    expect(a.ready, a.output()).toBe(true);
    const call = await adminOf(a);
    const webhookId = await hookOn(call, rx, '/stalled');
    // The receiver holds the first attempt; `a` is killed while it waits, its job locked in Redis.
    rx.plan('/stalled', { hang: true });
    const { eventId } = (await (await call(`/auth/webhooks/${webhookId}/test`, { method: 'POST' })).json()) as { eventId: string };
    const [held] = await rx.waitFor(1, { path: '/stalled' });
    expect(held!.answered).toBeNull();
    await a.stop('SIGKILL');
    const b = await start(appRoot, env);
    expect(b.ready, b.output()).toBe(true);
    // Made again (the receiver answers now) once the lock expired and a stalled check ran: well under 60 s.
    const got = await rx.waitFor(2, { path: '/stalled', timeoutMs: 60_000 });
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
    expect(got[1]!.verified).toBe(true);
    expect(got[1]!.answered).toBe(200);
    expect(await delivered(await adminOf(b), webhookId)).toMatchObject({ status: 'delivered', attempts: 1, lastStatusCode: 200 });
  }, 120_000);
});
