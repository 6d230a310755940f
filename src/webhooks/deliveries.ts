import type { Collection, Database } from '../db/index.ts';

export const DELIVERY_COLLECTION = 'svc__core-webhook-delivery';

/** At most this many finished deliveries are kept per endpoint (the newest); older ones go at the sweep. */
export const KEPT_PER_ENDPOINT = 1000;

/** The body of a webhook (Standard Webhooks): the event's type, its time and the audit record. */
export interface WebhookEvent {
  type: string;
  /** ISO 8601: when the event happened (the record's `at`). */
  timestamp: string;
  data: { id: string } & Record<string, unknown>;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One event owed to one endpoint, in `svc__core-webhook-delivery`: what the deliveries route lists. */
export interface DeliveryDoc {
  /** `<webhookId>.<eventId>`: one delivery per endpoint and event, however often it is queued. */
  _id: string;
  webhookId: string;
  eventId: string;
  type: string;
  status: DeliveryStatus;
  attempts: number;
  lastStatusCode: number | null;
  /** ISO 8601 while another attempt is due, else null. */
  nextAttemptAt: string | null;
  /** ISO 8601: when the event happened, and so was queued (its `timestamp`). */
  at: string;
  updatedAt: string;
  /** Why the last attempt failed (status code, timeout, refused address...), for operators. */
  lastError?: string;
  /**
   * The body's content while the delivery is pending, so a delivery owed when svc stopped is made
   * after a restart (the embedded queue), or queued again when queueing failed (Redis); kept on a
   * failed delivery too, so that it can be sent again (`POST .../deliveries/:eventId/resend`).
   */
  event?: WebhookEvent;
  /**
   * The queue's job id of the delivery's last resend (`<eventId>.resend.<uuid>`): the queue remembers a
   * job's id for a day and ignores a new job with it, so a resend is a job of its own id.
   */
  resendJob?: string;
}

/** The most first records one gathered insert writes. */
const MAX_GATHERED = 200;

export const deliveryId = (webhookId: string, eventId: string) => `${webhookId}.${eventId}`;

/** What the API shows of a delivery (CONTRACT 13). */
export function toPublicDelivery(doc: DeliveryDoc) {
  return { eventId: doc.eventId, type: doc.type, status: doc.status, attempts: doc.attempts, lastStatusCode: doc.lastStatusCode, nextAttemptAt: doc.nextAttemptAt, at: doc.at };
}

/** A delivery's record before any attempt; `at` is when the event happened (it was queued then). */
function firstRecord(webhookId: string, event: WebhookEvent, now: string): DeliveryDoc {
  return {
    _id: deliveryId(webhookId, event.data.id),
    webhookId,
    eventId: event.data.id,
    type: event.type,
    status: 'pending',
    attempts: 0,
    lastStatusCode: null,
    nextAttemptAt: null,
    at: event.timestamp,
    updatedAt: now,
  };
}

/** The outcome of one attempt, as the delivery record keeps it. */
export interface AttemptOutcome {
  attempts: number;
  status: DeliveryStatus;
  statusCode: number | null;
  nextAttemptAt: Date | null;
  error?: string;
}

/**
 * The delivery records: written after each attempt, and also when an event is queued where the queue
 * is not durable itself (the embedded store) or could not take it (`owe`).
 */
export class DeliveryLog {
  /** First records waiting for the write under way to end: they go together in the next one. */
  private gathered: { doc: DeliveryDoc; done: (err?: unknown) => void }[] = [];
  private writing = false;

  private constructor(private readonly docs: Collection<DeliveryDoc>) {}

  static async open(db: Database): Promise<DeliveryLog> {
    return new DeliveryLog(
      await db.collection<DeliveryDoc>(DELIVERY_COLLECTION, [
        { fields: ['webhookId', 'eventId'], unique: false },
        { fields: ['status'], unique: false },
        { fields: ['at'], unique: false },
      ]),
    );
  }

  /** Records a delivery as owed; false when it already was (queued twice). */
  async owe(webhookId: string, event: WebhookEvent): Promise<boolean> {
    const now = new Date().toISOString();
    try {
      await this.docs.insertOne({ ...firstRecord(webhookId, event, now), nextAttemptAt: now, event });
      return true;
    } catch (err) {
      if ((err as { code?: string }).code === 'already_exists') return false;
      throw err;
    }
  }

  /**
   * Writes an attempt's outcome; false when the delivery is gone (its endpoint was deleted). `first`:
   * no record was written before the attempt (a queue that is durable itself, Redis): the record is
   * made now, in one write instead of two.
   */
  async attempted(id: string, outcome: AttemptOutcome, first?: { webhookId: string; event: WebhookEvent }): Promise<boolean> {
    const $set: Record<string, unknown> = {
      status: outcome.status,
      attempts: outcome.attempts,
      lastStatusCode: outcome.statusCode,
      nextAttemptAt: outcome.nextAttemptAt?.toISOString() ?? null,
      updatedAt: new Date().toISOString(),
    };
    if (first) {
      // Still pending: the event stays in the record, so a start can queue it again (Redis lost the job).
      const doc: DeliveryDoc = { ...firstRecord(first.webhookId, first.event, $set.updatedAt as string), ...($set as Pick<DeliveryDoc, 'status' | 'attempts' | 'lastStatusCode' | 'nextAttemptAt'>) };
      if (outcome.error) doc.lastError = outcome.error;
      // A failed one keeps it as well: it may be sent again (resend).
      if (outcome.status !== 'delivered') doc.event = first.event;
      try {
        await this.insertGathered(doc);
        return true;
      } catch (err) {
        // Written meanwhile (queued again after a failed enqueue): an update, as below.
        if ((err as { code?: string }).code !== 'already_exists') throw err;
      }
    }
    if (outcome.error) $set.lastError = outcome.error;
    // The event goes once delivered; pending and failed deliveries keep it (queued again at start; resend).
    const update = outcome.status !== 'delivered' ? { $set } : { $set, $unset: { event: true as const, ...(outcome.error ? {} : { lastError: true as const }) } };
    return (await this.docs.updateOne({ _id: id }, update)) !== null;
  }

  /**
   * A failed delivery owed again from its first attempt (resend): pending, 0 attempts, due now, under
   * the job id `resendJob`. Null when it is not failed (any more): another resend took it.
   */
  reopen(id: string, resendJob: string): Promise<DeliveryDoc | null> {
    const now = new Date().toISOString();
    return this.docs.updateOne({ _id: id, status: 'failed' }, { $set: { status: 'pending', attempts: 0, lastStatusCode: null, nextAttemptAt: now, updatedAt: now, resendJob }, $unset: { lastError: true } });
  }

  get(id: string): Promise<DeliveryDoc | null> {
    return this.docs.findOne({ _id: id });
  }

  /**
   * The records of these deliveries that exist, by id. One lookup by `_id` each, side by side: a `$in`
   * query was a scan of the collection on the MongoDB wire-protocol server of the tests and benches, and
   * slowed two instances' deliveries to a crawl there.
   */
  async getMany(ids: string[]): Promise<Map<string, DeliveryDoc>> {
    const docs = await Promise.all(ids.map((id) => this.get(id)));
    return new Map(docs.filter((doc) => doc !== null).map((doc) => [doc._id, doc]));
  }

  /**
   * Inserts `doc` with the first records made while the previous insert was under way: one write for
   * many (group commit). Each costs the embedded database an open, append and close of its file, and
   * MongoDB a round trip; the outcome of every attempt is written, so under load this was a delivery's
   * largest cost. An insert alone is written at once; nothing waits for a timer.
   */
  private insertGathered(doc: DeliveryDoc): Promise<void> {
    return new Promise((resolve, reject) => {
      this.gathered.push({ doc, done: (err) => (err === undefined ? resolve() : reject(err as Error)) });
      if (!this.writing) void this.writeGathered();
    });
  }

  private async writeGathered(): Promise<void> {
    this.writing = true;
    try {
      while (this.gathered.length) {
        const batch = this.gathered.splice(0, MAX_GATHERED);
        try {
          await this.docs.insertMany(batch.map((item) => item.doc));
          for (const item of batch) item.done();
        } catch (err) {
          if (batch.length === 1) batch[0]!.done(err);
          // One of them refused (a duplicate) or the write failed: each on its own, so each gets its own answer.
          else await Promise.all(batch.map((item) => this.docs.insertOne(item.doc).then(() => item.done(), (e: unknown) => item.done(e))));
        }
      }
    } finally {
      this.writing = false;
    }
  }

  /** An endpoint's deliveries, newest first (event ids sort by time). */
  list(webhookId: string, limit: number): Promise<DeliveryDoc[]> {
    return this.docs.find({ webhookId }, { sort: { eventId: -1 }, limit });
  }

  /** Deliveries still owed, oldest first. */
  pending(limit: number): Promise<DeliveryDoc[]> {
    return this.docs.find({ status: 'pending' }, { sort: { at: 1 }, limit });
  }

  /** Drops one delivery (its endpoint is gone). */
  async forget(id: string): Promise<void> {
    await this.docs.deleteOne({ _id: id });
  }

  async deleteFor(webhookId: string): Promise<number> {
    return this.docs.deleteMany({ webhookId });
  }

  /**
   * Removes finished deliveries older than `retentionDays` and, per endpoint, all but the newest
   * KEPT_PER_ENDPOINT; returns how many went.
   */
  async sweep(retentionDays: number, webhookIds: string[], now = Date.now()): Promise<number> {
    const cutoff = new Date(now - retentionDays * 86_400_000).toISOString();
    let removed = await this.docs.deleteMany({ at: { $lt: cutoff }, status: { $ne: 'pending' } });
    for (const webhookId of webhookIds) {
      const [oldestKept] = await this.docs.find({ webhookId }, { sort: { eventId: -1 }, skip: KEPT_PER_ENDPOINT - 1, limit: 1 });
      if (oldestKept) removed += await this.docs.deleteMany({ webhookId, eventId: { $lt: oldestKept.eventId }, status: { $ne: 'pending' } });
    }
    return removed;
  }
}
