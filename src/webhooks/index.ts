/**
 * Signed webhooks (CONTRACT 13, docs/events.md): each audit record whose type an active endpoint
 * subscribes to is queued for it once, by the instance that wrote the record, and delivered off the
 * request path (the request waits for the queueing only) by one instance of the cluster: a BullMQ
 * worker on Redis, or this process's own timers with the embedded store. Each attempt is written to
 * the endpoint's delivery records, which the deliveries route lists and `svc doctor` reads.
 */
import type { AuditActor, AuditRecord } from '../audit/record.ts';
import { uuidv7 } from '../audit/record.ts';
import type { AuditLog } from '../audit/log.ts';
import type { SecretBox } from '../auth/oauth/secrets.ts';
import type { Config } from '../config/load.ts';
import type { Database } from '../db/index.ts';
import type { Logger } from '../logger.ts';
import type { Store } from '../store/index.ts';
import { RedisStore } from '../store/redis.ts';
import { deliveryId, DeliveryLog, type WebhookEvent } from './deliveries.ts';
import { WebhookEndpoints, type WebhookDoc } from './endpoints.ts';
import { MemoryDeliveryQueue } from './memory-queue.ts';
import type { AttemptOutcome, DeliveryJob, DeliveryQueue } from './queue.ts';
import { RedisDeliveryQueue } from './redis-queue.ts';
import { DELIVERY_TIMEOUT_MS, sendWebhook } from './send.ts';

export { toPublicWebhook } from './endpoints.ts';
export { toPublicDelivery } from './deliveries.ts';

/** Deliveries still owed that a start queues again (the oldest first). */
const RESUME_LIMIT = 10_000;
/** How often each instance removes old delivery records. */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;

export interface WebhooksDeps {
  config: Config;
  db: Database;
  /** The store of the `sessions` role: Redis (BullMQ) or the embedded one (in process). */
  store: Store;
  logger: Logger;
  audit: AuditLog;
  /** The seal of secrets at rest (the providers' SecretBox): webhook secrets are kept like client secrets. */
  secrets: SecretBox;
}

export class Webhooks {
  readonly endpoints: WebhookEndpoints;
  readonly deliveries: DeliveryLog;
  /** How long a receiver has to answer; shorter only in tests. */
  deliveryTimeoutMs = DELIVERY_TIMEOUT_MS;
  private queue!: DeliveryQueue;
  private sweeper?: NodeJS.Timeout;
  private readonly schedule: number[];
  private readonly allowInsecure: boolean;

  private constructor(
    endpoints: WebhookEndpoints,
    deliveries: DeliveryLog,
    private readonly deps: WebhooksDeps,
  ) {
    this.endpoints = endpoints;
    this.deliveries = deliveries;
    this.schedule = deps.config.auth.webhooks.retrySchedule;
    this.allowInsecure = deps.config.env.allowInsecureWebhookUrls;
  }

  static async open(deps: WebhooksDeps): Promise<Webhooks> {
    const { config, db, store, logger } = deps;
    const endpoints = await WebhookEndpoints.open(db, deps.secrets, config.env.allowInsecureWebhookUrls);
    for (const webhookId of await endpoints.resealSecrets()) {
      logger.warn({ webhookId }, 'a webhook secret was stored without the current seal: sealed again with SVC_SECRET_ENCRYPTION_KEY');
    }
    const webhooks = new Webhooks(endpoints, await DeliveryLog.open(db), deps);
    const run = webhooks.attempt.bind(webhooks);
    const retryDelayMs = (attempt: number) => (webhooks.schedule[attempt - 1] ?? 0) * 1000;
    webhooks.queue =
      store instanceof RedisStore
        ? await RedisDeliveryQueue.open({ store, keyPrefix: config.auth.store.keyPrefix, totalAttempts: webhooks.totalAttempts, retryDelayMs, run, logger })
        : new MemoryDeliveryQueue(run, retryDelayMs, logger);
    deps.audit.onRecord((record) => webhooks.publish(record));
    await webhooks.resume();
    const sweep = () => void webhooks.sweep().catch((err: unknown) => logger.warn({ err }, 'webhook delivery sweep failed'));
    sweep();
    webhooks.sweeper = setInterval(sweep, SWEEP_INTERVAL_MS).unref();
    return webhooks;
  }

  /** 1 + the retry schedule's length (CONTRACT 13). */
  get totalAttempts(): number {
    return 1 + this.schedule.length;
  }

  /** Queues `record` for each active endpoint subscribed to its type (an audit listener). */
  async publish(record: AuditRecord): Promise<void> {
    const targets = await this.endpoints.subscribedTo(record.type);
    if (!targets.length) return;
    const event: WebhookEvent = { type: record.type, timestamp: record.at, data: record as unknown as WebhookEvent['data'] };
    await Promise.all(targets.map((doc) => this.owe(doc, event)));
  }

  /** `POST /auth/webhooks/:id/test`: a `webhook.test` event to this endpoint alone, through the same queue. */
  async sendTest(webhookId: string, actor: AuditActor): Promise<string> {
    const doc = await this.endpoints.get(webhookId);
    const at = new Date().toISOString();
    const id = uuidv7();
    const data = { id, type: 'webhook.test', at, actor, subject: {}, details: { webhookId } };
    await this.owe(doc, { type: 'webhook.test', timestamp: at, data }, { throwOnFailure: true });
    return id;
  }

  /** Deletes an endpoint and its delivery records (a job still queued for it is dropped when it runs). */
  async remove(webhookId: string): Promise<void> {
    await this.endpoints.delete(webhookId);
    await this.deliveries.deleteFor(webhookId);
  }

  /**
   * Records the delivery as owed, then queues it. A failure is logged (`webhook_enqueue_failed`), never
   * the action's: a delivery whose record was written is queued again at the next start.
   */
  private async owe(doc: WebhookDoc, event: WebhookEvent, { throwOnFailure = false } = {}): Promise<void> {
    const job: DeliveryJob = { webhookId: doc._id, eventId: event.data.id, event, done: 0, ...(event.type === 'webhook.test' ? { test: true } : {}) };
    try {
      if (!(await this.deliveries.owe(doc._id, event))) return;
      await this.queue.add(job, 0);
    } catch (err) {
      this.deps.logger.error({ err, code: 'webhook_enqueue_failed', webhookId: doc._id, eventId: job.eventId, type: event.type }, 'webhook_enqueue_failed: a webhook delivery could not be queued (it is queued again at the next start if its record was written)');
      if (throwOnFailure) throw err;
    }
  }

  /** Queues again what is owed (the embedded queue's durability; on Redis, a delivery whose queueing failed). */
  private async resume(): Promise<void> {
    const now = Date.now();
    const owed = await this.deliveries.pending(RESUME_LIMIT);
    for (const doc of owed) {
      if (!doc.event) continue;
      const job: DeliveryJob = { webhookId: doc.webhookId, eventId: doc.eventId, event: doc.event, done: doc.attempts, ...(doc.type === 'webhook.test' ? { test: true } : {}) };
      const due = doc.nextAttemptAt ? Date.parse(doc.nextAttemptAt) - now : 0;
      await this.queue.add(job, due).catch((err: unknown) => this.deps.logger.error({ err, webhookId: doc.webhookId, eventId: doc.eventId }, 'an owed webhook delivery could not be queued again'));
    }
    if (owed.length) this.deps.logger.info({ deliveries: owed.length }, 'webhook deliveries still owed are queued again');
  }

  /** One attempt of one delivery (both queues call this); the outcome is in the delivery record. */
  private async attempt(job: DeliveryJob, attempt: number, signal?: AbortSignal): Promise<AttemptOutcome> {
    const { logger } = this.deps;
    const id = deliveryId(job.webhookId, job.eventId);
    const ids = { webhookId: job.webhookId, eventId: job.eventId, type: job.event.type };
    const record = await this.deliveries.get(id);
    // Gone with its endpoint, or already made (a job run twice): nothing to send.
    if (!record || record.status !== 'pending') return 'dropped';
    const endpoint = await this.endpoints.current(job.webhookId);
    if (!endpoint) {
      await this.deliveries.forget(id);
      return 'dropped';
    }
    if (!endpoint.active && !job.test) {
      await this.deliveries.attempted(id, { attempts: attempt - 1, status: 'failed', statusCode: null, nextAttemptAt: null, error: 'the endpoint was deactivated' });
      return 'failed';
    }
    let secret: string;
    try {
      secret = this.endpoints.secretOf(endpoint);
    } catch (err) {
      logger.error({ ...ids, err: (err as Error).message, code: 'webhook_delivery_failed' }, 'webhook_delivery_failed: the endpoint\'s secret cannot be opened (SVC_SECRET_ENCRYPTION_KEY)');
      await this.deliveries.attempted(id, { attempts: attempt - 1, status: 'failed', statusCode: null, nextAttemptAt: null, error: 'the secret cannot be opened' });
      return 'failed';
    }
    const result = await sendWebhook({ url: endpoint.url, secret, id: job.eventId, body: JSON.stringify(job.event), allowInsecure: this.allowInsecure, timeoutMs: this.deliveryTimeoutMs, signal });
    if (signal?.aborted) return 'aborted';
    if (result.delivered) {
      const kept = await this.deliveries.attempted(id, { attempts: attempt, status: 'delivered', statusCode: result.statusCode, nextAttemptAt: null });
      if (attempt > 1) logger.info({ ...ids, attempt, statusCode: result.statusCode }, 'webhook delivered after retrying');
      return kept ? 'delivered' : 'dropped';
    }
    const last = attempt >= this.totalAttempts;
    const nextAttemptAt = last ? null : new Date(Date.now() + (this.schedule[attempt - 1] ?? 0) * 1000);
    const kept = await this.deliveries.attempted(id, { attempts: attempt, status: last ? 'failed' : 'pending', statusCode: result.statusCode, nextAttemptAt, error: result.error });
    if (!kept) return 'dropped';
    const detail = { ...ids, url: endpoint.url, attempt, of: this.totalAttempts, statusCode: result.statusCode, error: result.error };
    if (last) logger.error({ ...detail, code: 'webhook_delivery_failed' }, `webhook_delivery_failed: ${result.error ?? 'failed'}; no attempts left`);
    else logger.warn({ ...detail, nextAttemptAt: nextAttemptAt!.toISOString() }, `webhook delivery attempt failed (${result.error ?? 'failed'}); retrying`);
    return last ? 'failed' : 'retry';
  }

  /** Removes delivery records past the audit retention, and per endpoint all but the newest thousand. */
  async sweep(now = Date.now()): Promise<number> {
    const ids = (await this.endpoints.list()).map((doc) => doc._id);
    return this.deliveries.sweep(this.deps.config.auth.audit.retentionDays, ids, now);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await this.queue.close();
  }
}
