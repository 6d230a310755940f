/**
 * Signed webhooks (CONTRACT 13, docs/events.md): each audit record whose type active endpoints
 * subscribe to is queued once for them (one job per event), by the instance that wrote the record, and
 * delivered off the request path (the request waits for the queueing only) by one instance of the
 * cluster: a Redis stream's consumer group, or this process's own timers with the embedded store. Each attempt
 * is written to the endpoint's delivery records, which the deliveries route lists and `svc doctor` reads.
 */
import type { AuditActor, AuditRecord } from '../audit/record.ts';
import { uuidv7 } from '../audit/record.ts';
import type { AuditLog } from '../audit/log.ts';
import type { SecretBox } from '../auth/oauth/secrets.ts';
import type { Config } from '../config/load.ts';
import { AppError, notFound } from '../http/errors.ts';
import { randomUUID } from 'node:crypto';
import type { Database } from '../db/index.ts';
import type { Logger } from '../logger.ts';
import type { Store } from '../store/index.ts';
import { RedisStore } from '../store/redis.ts';
import { deliveryId, DeliveryLog, type DeliveryDoc, type WebhookEvent } from './deliveries.ts';
import { WebhookEndpoints } from './endpoints.ts';
import { MemoryDeliveryQueue } from './memory-queue.ts';
import type { AttemptOutcome, DeliveryJob, DeliveryQueue } from './queue.ts';
import { RedisDeliveryQueue } from './redis-queue.ts';
import { DELIVERY_TIMEOUT_MS, sendWebhook } from './send.ts';

export { toPublicWebhook } from './endpoints.ts';
export { toPublicDelivery } from './deliveries.ts';

/** Deliveries still owed that a start queues again (the oldest first). */
const RESUME_LIMIT = 10_000;
/** How many queued jobs of each state (active, waiting, delayed) the deliveries route looks through on Redis. */
const QUEUED_LISTED = 250;
/** How often each instance removes old delivery records. */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;

export interface WebhooksDeps {
  config: Config;
  db: Database;
  /** The store of the `sessions` role: Redis (a stream) or the embedded one (in process). */
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

  /** Queues `record` for the active endpoints subscribed to its type, as one job (an audit listener). */
  async publish(record: AuditRecord): Promise<void> {
    const targets = await this.endpoints.subscribedTo(record.type);
    if (!targets.length) return;
    const event: WebhookEvent = { type: record.type, timestamp: record.at, data: record as unknown as WebhookEvent['data'] };
    await this.owe(targets.map((doc) => doc._id), event);
  }

  /** `POST /auth/webhooks/:id/test`: a `webhook.test` event to this endpoint alone, through the same queue. */
  async sendTest(webhookId: string, actor: AuditActor): Promise<string> {
    const doc = await this.endpoints.get(webhookId);
    const at = new Date().toISOString();
    const id = uuidv7();
    const data = { id, type: 'webhook.test', at, actor, subject: {}, details: { webhookId } };
    await this.owe([doc._id], { type: 'webhook.test', timestamp: at, data }, { test: true, throwOnFailure: true });
    return id;
  }

  /**
   * `POST /auth/webhooks/:id/deliveries/:eventId/resend`: a failed delivery owed again, from its first
   * attempt (the retry schedule applies again), with the same body and `webhook-id` (the event id:
   * receivers dedupe on it) and a fresh timestamp and signature at each attempt. Only a failed one: a
   * pending one is still being attempted (409 `delivery_pending`), a delivered one was received
   * (409 `delivery_delivered`); an inactive endpoint takes none (409 `webhook_inactive`).
   */
  async resend(webhookId: string, eventId: string): Promise<string> {
    const endpoint = await this.endpoints.get(webhookId);
    const id = deliveryId(webhookId, eventId);
    const record = (await this.deliveries.get(id)) ?? (await this.stillQueued(webhookId, eventId));
    if (!record) throw notFound('No delivery of this event to this webhook');
    if (!endpoint.active) throw new AppError(409, 'webhook_inactive', 'This webhook is inactive: activate it before sending a delivery again');
    if (record === 'queued' || record.status === 'pending') throw new AppError(409, 'delivery_pending', 'This delivery is still being attempted: it can be sent again once it has failed');
    if (record.status === 'delivered') throw new AppError(409, 'delivery_delivered', 'This delivery was received: only a failed delivery can be sent again');
    if (!record.event) throw new AppError(409, 'delivery_event_gone', 'This delivery failed before svc kept the events of failed deliveries: it cannot be sent again');
    const jobKey = `${eventId}.resend.${randomUUID()}`;
    const reopened = await this.deliveries.reopen(id, jobKey);
    if (!reopened) throw new AppError(409, 'delivery_pending', 'This delivery is already being sent again');
    const job: DeliveryJob = { webhookIds: [webhookId], eventId, event: record.event, done: 0, jobKey, ...(record.type === 'webhook.test' ? { test: true } : {}) };
    try {
      await this.queue.add(job, 0);
    } catch (err) {
      // The record says pending with its event: the next start queues it again.
      this.deps.logger.error({ err, code: 'webhook_enqueue_failed', webhookId, eventId, type: record.type }, 'webhook_enqueue_failed: a webhook delivery sent again could not be queued (it is queued again at the next start)');
      throw err;
    }
    this.deps.logger.info({ webhookId, eventId, type: record.type }, 'a failed webhook delivery is sent again');
    return eventId;
  }

  /**
   * A delivery without a record: on Redis it has none until its first attempt ends (`owe`), and the
   * deliveries list shows it as pending while its job is queued, so `resend` answers 409 for it as for a
   * pending record, not 404. The queue first, the record again after (as `listDeliveries`): a first attempt
   * writes its record before its job leaves the queue. Null: neither (or Redis out of reach, logged).
   */
  private async stillQueued(webhookId: string, eventId: string): Promise<'queued' | DeliveryDoc | null> {
    if (!this.queue.waiting) return null;
    if ((await this.queuedFor(webhookId)).some(({ job }) => job.eventId === eventId)) return 'queued';
    return this.deliveries.get(deliveryId(webhookId, eventId));
  }

  /**
   * The jobs on Redis's queue for this endpoint (within the first QUEUED_LISTED of each state). Redis out of
   * reach: none, logged (the records alone answer, as before the queue was asked).
   */
  private async queuedFor(webhookId: string): Promise<{ job: DeliveryJob; dueAt: number }[]> {
    if (!this.queue.waiting) return [];
    const all = await this.queue.waiting(QUEUED_LISTED).catch((err: unknown) => {
      this.deps.logger.warn({ err, webhookId }, 'the webhook queue could not be read: deliveries not attempted yet are left out');
      return [];
    });
    return all.filter(({ job }) => job.webhookIds.includes(webhookId));
  }

  /** Deletes an endpoint and its delivery records (a job still queued for it is dropped when it runs). */
  async remove(webhookId: string): Promise<void> {
    await this.endpoints.delete(webhookId);
    await this.deliveries.deleteFor(webhookId);
  }

  /**
   * Queues the event for `webhookIds`. On Redis the job is all: the delivery records are written at
   * the first attempt (a record written first cost the request a database write per endpoint, for a
   * job's entry in Redis anyway). In process (embedded store), the records are written first: they are what
   * a restart queues again. A failure is logged (`webhook_enqueue_failed`), never the action's: the
   * deliveries are then recorded as owed, and queued again at the next start.
   */
  private async owe(webhookIds: string[], event: WebhookEvent, { test = false, throwOnFailure = false } = {}): Promise<void> {
    const job: DeliveryJob = { webhookIds, eventId: event.data.id, event, done: 0, ...(test ? { test: true } : {}) };
    try {
      if (!this.queue.durable) {
        const owed = await Promise.all(webhookIds.map((id) => this.deliveries.owe(id, event)));
        job.webhookIds = webhookIds.filter((_, i) => owed[i]);
        if (!job.webhookIds.length) return;
      }
      await this.queue.add(job, 0);
    } catch (err) {
      this.deps.logger.error({ err, code: 'webhook_enqueue_failed', webhookIds, eventId: job.eventId, type: event.type }, 'webhook_enqueue_failed: a webhook delivery could not be queued (it is queued again at the next start if its record was written)');
      if (this.queue.durable) {
        await Promise.all(webhookIds.map((id) => this.deliveries.owe(id, event))).catch((e: unknown) =>
          this.deps.logger.error({ err: e, webhookIds, eventId: job.eventId }, 'the owed webhook deliveries could not be recorded either: they are lost'),
        );
      }
      if (throwOnFailure) throw err;
    }
  }

  /**
   * Queues again what is owed, one job per event (the embedded queue's durability; on Redis, deliveries
   * whose queueing failed, or that Redis lost; a job still in Redis is the same job and stays one).
   */
  private async resume(): Promise<void> {
    const now = Date.now();
    const owed = await this.deliveries.pending(RESUME_LIMIT);
    const jobs = new Map<string, { job: DeliveryJob; due: number }>();
    for (const doc of owed) {
      if (!doc.event) continue;
      const due = doc.nextAttemptAt ? Date.parse(doc.nextAttemptAt) - now : 0;
      // A resend is its own job, of its own id (the event's first job id is remembered by the queue for a day).
      const key = doc.resendJob ?? doc.eventId;
      const queued = jobs.get(key);
      if (queued) {
        // The endpoints of one event had the same attempts (one job made them): the earliest due wins.
        queued.job.webhookIds.push(doc.webhookId);
        queued.job.done = Math.min(queued.job.done, doc.attempts);
        queued.due = Math.min(queued.due, due);
        continue;
      }
      jobs.set(key, { job: { webhookIds: [doc.webhookId], eventId: doc.eventId, event: doc.event, done: doc.attempts, ...(doc.type === 'webhook.test' ? { test: true } : {}), ...(doc.resendJob ? { jobKey: doc.resendJob } : {}) }, due });
    }
    for (const { job, due } of jobs.values()) {
      await this.queue.add(job, due).catch((err: unknown) => this.deps.logger.error({ err, webhookIds: job.webhookIds, eventId: job.eventId }, 'an owed webhook delivery could not be queued again'));
    }
    if (owed.length) this.deps.logger.info({ deliveries: owed.length }, 'webhook deliveries still owed are queued again');
  }

  /**
   * Attempt `attempt` of an event to each endpoint of the job still owed it, side by side (both queues
   * call this). `retry` when any is to be tried again: the others, done, are skipped then.
   */
  private async attempt(job: DeliveryJob, attempt: number, signal?: AbortSignal): Promise<AttemptOutcome> {
    const records = await this.deliveries.getMany(job.webhookIds.map((webhookId) => deliveryId(webhookId, job.eventId)));
    const body = JSON.stringify(job.event);
    const outcomes = await Promise.all(job.webhookIds.map((webhookId) => this.attemptOne(webhookId, records.get(deliveryId(webhookId, job.eventId)) ?? null, job, body, attempt, signal)));
    if (outcomes.length === 1) return outcomes[0]!;
    for (const outcome of ['retry', 'aborted', 'delivered', 'failed'] as const) if (outcomes.includes(outcome)) return outcome;
    return 'dropped';
  }

  /** One attempt of one delivery (`record`: its record, null before the first attempt on Redis); the outcome is in the record. */
  private async attemptOne(webhookId: string, record: DeliveryDoc | null, job: DeliveryJob, body: string, attempt: number, signal?: AbortSignal): Promise<AttemptOutcome> {
    const { logger } = this.deps;
    const id = deliveryId(webhookId, job.eventId);
    const ids = { webhookId, eventId: job.eventId, type: job.event.type };
    // Already made (a job run again, for another endpoint or after a stall): nothing to send.
    if (record && record.status !== 'pending') return 'dropped';
    const endpoint = await this.endpoints.current(webhookId);
    if (!endpoint) {
      // Gone, with its records.
      if (record) await this.deliveries.forget(id);
      return 'dropped';
    }
    // No record yet: this is the delivery's first attempt on a durable queue; the record is made with its outcome.
    const first = record ? undefined : { webhookId, event: job.event };
    if (!endpoint.active && !job.test) {
      await this.deliveries.attempted(id, { attempts: attempt - 1, status: 'failed', statusCode: null, nextAttemptAt: null, error: 'the endpoint was deactivated' }, first);
      return 'failed';
    }
    let secret: string;
    try {
      secret = this.endpoints.secretOf(endpoint);
    } catch (err) {
      logger.error({ ...ids, err: (err as Error).message, code: 'webhook_delivery_failed' }, 'webhook_delivery_failed: the endpoint\'s secret cannot be opened (SVC_SECRET_ENCRYPTION_KEY)');
      await this.deliveries.attempted(id, { attempts: attempt - 1, status: 'failed', statusCode: null, nextAttemptAt: null, error: 'the secret cannot be opened' }, first);
      return 'failed';
    }
    const result = await sendWebhook({ url: endpoint.url, secret, id: job.eventId, body, allowInsecure: this.allowInsecure, timeoutMs: this.deliveryTimeoutMs, signal });
    if (signal?.aborted) return 'aborted';
    if (result.delivered) {
      const kept = await this.deliveries.attempted(id, { attempts: attempt, status: 'delivered', statusCode: result.statusCode, nextAttemptAt: null }, first);
      if (attempt > 1) logger.info({ ...ids, attempt, statusCode: result.statusCode }, 'webhook delivered after retrying');
      return kept ? 'delivered' : 'dropped';
    }
    const last = attempt >= this.totalAttempts;
    const nextAttemptAt = last ? null : new Date(Date.now() + (this.schedule[attempt - 1] ?? 0) * 1000);
    const kept = await this.deliveries.attempted(id, { attempts: attempt, status: last ? 'failed' : 'pending', statusCode: result.statusCode, nextAttemptAt, error: result.error }, first);
    if (!kept) return 'dropped';
    const detail = { ...ids, url: endpoint.url, attempt, of: this.totalAttempts, statusCode: result.statusCode, error: result.error };
    if (last) logger.error({ ...detail, code: 'webhook_delivery_failed' }, `webhook_delivery_failed: ${result.error ?? 'failed'}; no attempts left`);
    else logger.warn({ ...detail, nextAttemptAt: nextAttemptAt!.toISOString() }, `webhook delivery attempt failed (${result.error ?? 'failed'}); retrying`);
    return last ? 'failed' : 'retry';
  }

  /**
   * An endpoint's deliveries, newest first (the deliveries route): the records, and on Redis also the
   * deliveries queued whose first attempt has not ended yet (they have no record until it does), as
   * `pending` with 0 attempts, as a record written when queued would have said.
   */
  async listDeliveries(webhookId: string, limit: number): Promise<DeliveryDoc[]> {
    if (!this.queue.waiting) return this.deliveries.list(webhookId, limit);
    // The queue first, the records after: a first attempt writes its record before its job leaves the
    // queue, so a delivery is in one or the other. Read the other way round, one that ended in between
    // was in neither (a test event's delivery missing from the list right after it was queued).
    const queued = await this.queuedFor(webhookId);
    const records = await this.deliveries.list(webhookId, limit);
    if (!queued.length) return records;
    const recorded = await this.deliveries.getMany(queued.map(({ job }) => deliveryId(webhookId, job.eventId)));
    const unrecorded = queued
      .filter(({ job }) => !recorded.has(deliveryId(webhookId, job.eventId)))
      .map(({ job, dueAt }): DeliveryDoc => {
        const at = job.event.timestamp;
        return { _id: deliveryId(webhookId, job.eventId), webhookId, eventId: job.eventId, type: job.event.type, status: 'pending', attempts: job.done, lastStatusCode: null, nextAttemptAt: new Date(dueAt).toISOString(), at, updatedAt: at };
      });
    return [...records, ...unrecorded].sort((a, b) => (a.eventId < b.eventId ? 1 : a.eventId > b.eventId ? -1 : 0)).slice(0, limit);
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
