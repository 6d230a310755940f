import type { WebhookEvent } from './deliveries.ts';

/** One event owed to one endpoint, as the queue carries it (never the secret: the worker reads it). */
export interface DeliveryJob {
  webhookId: string;
  eventId: string;
  event: WebhookEvent;
  /** Attempts made before this job was queued (a delivery queued again at start-up); usually 0. */
  done: number;
  /** A `webhook.test` event: sent to an inactive endpoint too. */
  test?: boolean;
}

/** What an attempt came to: the queue retries on `retry` only. */
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'dropped' | 'aborted';

/**
 * Makes attempt `attempt` (1-based, counting the attempts of `job.done`) and records it in the
 * delivery record; `signal` ends it early at shutdown (`aborted`: not made, not recorded).
 */
export type AttemptRunner = (job: DeliveryJob, attempt: number, signal?: AbortSignal) => Promise<AttemptOutcome>;

/**
 * Where deliveries wait and who makes them: BullMQ on Redis (`redis-queue.ts`), or the process
 * itself with the embedded store (`memory-queue.ts`), durable through the delivery records. Either
 * retries on the same schedule: retry n comes `retryDelayMs(n)` after attempt n.
 */
export interface DeliveryQueue {
  /** Queues `job`, its next attempt after `delayMs`; a job queued twice is one job. */
  add(job: DeliveryJob, delayMs: number): Promise<void>;
  /** Stops taking jobs and ends (or lets finish) the attempts under way. */
  close(): Promise<void>;
}

/** The job id of a delivery: one per endpoint and event (BullMQ refuses `:` in custom ids). */
export const jobId = (job: Pick<DeliveryJob, 'webhookId' | 'eventId'>) => `${job.webhookId}.${job.eventId}`;
