// Webhooks on a real Redis Cluster (3 masters + 3 replicas, test/cluster/support/topology.ts): the
// queue's scripts touch several keys of it at once, which a Cluster allows only within one slot, so the
// queue's prefix carries a hash tag. Two svc instances sharing the Cluster and one database deliver
// each event exactly once (webhook-ids counted at a loopback receiver) and retry with the same id.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { redisServerAvailable } from '../support/private-redis.ts';
import { startReceiver, type Receiver } from '../support/webhook-receiver.ts';
import { startCluster, stopAll, type ClusterTopology } from './support/topology.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe.skipIf(!redisServerAvailable)('webhooks on Redis Cluster', () => {
  let cluster: ClusterTopology;
  let one: TestApp;
  let two: TestApp;
  let admins: TestClient[];
  let rx: Receiver;
  const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;

  beforeAll(async () => {
    cluster = await startCluster();
    rx = await startReceiver();
    const db = EmbeddedDatabase.inMemory();
    const config = { auth: { store: { keyPrefix }, webhooks: { retrySchedule: [0.5] } } };
    const env = { SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1' };
    [one, two] = [await createTestApp({ redisUrl: cluster.url, db, env, config }), await createTestApp({ redisUrl: cluster.url, db, env, config })];
    const admin = await one.createUser({ admin: true });
    admins = [one.client(), two.client()];
    for (const c of admins) expect((await c.login(admin.email, admin.password)).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await one?.close();
    await two?.close().catch(() => {});
    await rx?.close();
    await stopAll();
  });

  it('each event once, from either instance; a failed attempt retried with the same webhook-id', async () => {
    const created = await admins[0]!.fetch('/auth/webhooks', { method: 'POST', json: { url: `${rx.url}/cluster`, events: ['webhook.updated'] } });
    expect(created.status).toBe(201);
    const hook = (await created.json()) as { id: string; secret: string };
    rx.secrets.set('/cluster', hook.secret);
    rx.plan('/cluster', { status: 500 });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await admins[i % 2]!.fetch(`/auth/webhooks/${hook.id}/test`, { method: 'POST' });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { eventId: string }).eventId);
      expect((await admins[(i + 1) % 2]!.fetch(`/auth/webhooks/${hook.id}`, { method: 'PATCH', json: { description: `${i}` } })).status).toBe(200);
    }
    // 12 events, one of them answered 500 once and made again.
    await rx.waitFor(13, { path: '/cluster' });
    await sleep(1500);
    const got = rx.received.filter((r) => r.path === '/cluster');
    expect(got).toHaveLength(13);
    const counts = new Map<string, number>();
    for (const r of got) counts.set(r.headers['webhook-id'] as string, (counts.get(r.headers['webhook-id'] as string) ?? 0) + 1);
    expect(counts.size).toBe(12);
    expect([...counts.values()].sort()).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]);
    for (const id of ids) expect(counts.has(id)).toBe(true);
    const retried = [...counts].find(([, n]) => n === 2)![0];
    expect(got.filter((r) => r.headers['webhook-id'] === retried).map((r) => r.answered)).toEqual([500, 200]);
    for (const r of got) expect(r.verified).toBe(true);
  });
});
