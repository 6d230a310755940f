// `svc doctor` and webhooks (issue 54): an endpoint whose last 5 deliveries failed is flagged (WARN,
// with its id, URL and why), on the embedded database and on MongoDB; a healthy one, or one with fewer
// failures, is not; an embedded database in use by a running svc is left alone.

import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { uuidv7 } from '../../src/audit/record.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import type { Database } from '../../src/db/index.ts';
import { runChecks } from '../../src/doctor.ts';
import { DELIVERY_COLLECTION, type DeliveryDoc } from '../../src/webhooks/deliveries.ts';
import { WEBHOOK_COLLECTION, type WebhookDoc } from '../../src/webhooks/endpoints.ts';

const mongoUrl = inject('mongoUrl');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** An endpoint with deliveries of these statuses, oldest first. */
async function seed(db: Database, statuses: DeliveryDoc['status'][], url = 'https://hooks.example.com/down'): Promise<string> {
  const id = randomUUID();
  const now = new Date().toISOString();
  const endpoint: WebhookDoc = { _id: id, url, events: ['login.*'], description: null, active: true, secret: 'whsec_x', createdAt: now, updatedAt: now };
  await (await db.collection<WebhookDoc>(WEBHOOK_COLLECTION)).insertOne(endpoint);
  const deliveries = await db.collection<DeliveryDoc>(DELIVERY_COLLECTION);
  for (const status of statuses) {
    const eventId = uuidv7();
    await deliveries.insertOne({
      _id: `${id}.${eventId}`,
      webhookId: id,
      eventId,
      type: 'login.failed',
      status,
      attempts: status === 'delivered' ? 1 : 3,
      lastStatusCode: status === 'delivered' ? 200 : 503,
      nextAttemptAt: status === 'pending' ? now : null,
      at: now,
      updatedAt: now,
      ...(status === 'delivered' ? {} : { lastError: 'answered 503' }),
    });
  }
  return id;
}

function appRoot() {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-doctor-webhooks-'));
  dirs.push(dir);
  return dir;
}

const webhookCheck = async (env: Record<string, string>) => (await runChecks({ ...env, PATH: process.env.PATH })).find((c) => c.name === 'webhooks');

describe('svc doctor: webhooks', () => {
  it('embedded database: the endpoint that failed its last 5 deliveries is named, the others are not', async () => {
    const root = appRoot();
    const dataDir = path.join(root, '.svc-data');
    const db = new EmbeddedDatabase(dataDir);
    const down = await seed(db, ['delivered', 'failed', 'failed', 'failed', 'failed', 'pending']);
    const fine = await seed(db, ['failed', 'failed', 'failed', 'failed', 'delivered'], 'https://hooks.example.com/fine');
    const young = await seed(db, ['failed', 'failed', 'failed', 'failed'], 'https://hooks.example.com/young');
    const env = { SVC_APP_PATH: root, SVC_DATA_DIR: dataDir };

    await db.close();
    // While a running svc (another live process: here the test runner's parent) holds the database, doctor leaves it alone and says so.
    writeFileSync(path.join(dataDir, 'LOCK'), String(process.ppid));
    const locked = await webhookCheck(env);
    // A check that did not run is a warning with the way to run it, not an "ok" (the exit code stays 0).
    expect(locked?.verdict).toBe('warn');
    expect(locked!.detail).toMatch(/^not checked: .*in use by process/);
    expect(locked!.fix).toMatch(/while svc is stopped/);
    rmSync(path.join(dataDir, 'LOCK'));

    const check = await webhookCheck(env);
    expect(check?.verdict).toBe('warn');
    expect(check!.detail).toContain(down);
    expect(check!.detail).toContain('https://hooks.example.com/down');
    expect(check!.detail).toContain('answered 503');
    expect(check!.detail).not.toContain(fine);
    expect(check!.detail).not.toContain(young);
    expect(check!.fix).toContain('/deliveries');

    // Delivered once more: no longer flagged.
    const again = new EmbeddedDatabase(dataDir);
    await seed(again, ['delivered']);
    await (await again.collection<DeliveryDoc>(DELIVERY_COLLECTION)).deleteMany({ webhookId: down });
    await again.close();
    expect((await webhookCheck(env))?.verdict).toBe('ok');
  });

  it('no endpoints on the embedded database: no check, and no data folder made', async () => {
    const root = appRoot();
    const dataDir = path.join(root, 'never-made');
    expect(await webhookCheck({ SVC_APP_PATH: root, SVC_DATA_DIR: dataDir })).toBeUndefined();
    expect(existsSync(dataDir)).toBe(false);
  });

  it.skipIf(!mongoUrl)('MongoDB: the same check', async () => {
    const { MongoDatabase } = await import('../../src/db/mongo.ts');
    const url = mongoUrl.replace(/\/[^/?]*(\?|$)/, `/doctor_webhooks_${randomUUID().slice(0, 8)}$1`);
    const db = await MongoDatabase.connect(url);
    let down: string;
    try {
      down = await seed(db, ['failed', 'failed', 'pending', 'failed', 'failed']);
    } finally {
      await db.close();
    }
    const check = await webhookCheck({ SVC_APP_PATH: appRoot(), MONGODB_URL: url });
    expect(check?.verdict).toBe('warn');
    expect(check!.detail).toContain(down);
  });
});
