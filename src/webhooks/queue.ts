import type { WebhookEvent } from './deliveries.ts';

/**
 * One event owed to the endpoints it names, as the queue carries it (never a secret: the worker reads
 * it). One job per event, not per endpoint: an event's deliveries are queued, taken, and finished
 * together, which halves the queue's work with two endpoints (a job costs several Redis scripts and
 * their parsing on the instance). Each endpoint keeps its own delivery record, so an endpoint that
 * was delivered is skipped when the job runs again for another that failed.
 */
export interface DeliveryJob {
  /** The endpoints owed the event: each one subscribed when it was written, or one (a test event). */
  webhookIds: string[];
  eventId: string;
  event: WebhookEvent;
  /** Attempts made before this job was queued (a delivery queued again at start-up); usually 0. */
  done: number;
  /** A `webhook.test` event: sent to an inactive endpoint too. */
  test?: boolean;
  /**
   * A resend's own job id (`<eventId>.resend.<uuid>`): the event's id is taken by its first job, which
   * the queue remembers for a day (a new job with that id would be ignored). `webhook-id` stays
   * the event id.
   */
  jobKey?: string;
}

/**
 * What an attempt came to: the queue retries on `retry` only. For a job of several endpoints, `retry`
 * when any of them is to be tried again (the others are done and skipped then).
 */
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'dropped' | 'aborted';

/**
 * Makes attempt `attempt` (1-based, counting the attempts of `job.done`) to each endpoint of the job
 * still owed it, and records each in its delivery record; `signal` ends it early at shutdown
 * (`aborted`: not made, not recorded).
 */
export type AttemptRunner = (job: DeliveryJob, attempt: number, signal?: AbortSignal) => Promise<AttemptOutcome>;

/**
 * Where deliveries wait and who makes them: a stream's consumer group on Redis (`redis-queue.ts`), or the process
 * itself with the embedded store (`memory-queue.ts`), durable through the delivery records. Either
 * retries on the same schedule: retry n comes `retryDelayMs(n)` after attempt n.
 */
export interface DeliveryQueue {
  /**
   * True when the queue itself outlives the process (Redis): a delivery needs no record before its
   * first attempt. False (in process): the delivery records are what a restart queues again.
   */
  readonly durable: boolean;
  /** Queues `job`, its next attempt after `delayMs`; a job queued twice is one job. */
  add(job: DeliveryJob, delayMs: number): Promise<void>;
  /**
   * A durable queue's jobs still to be made or under way (at most `limit` of each state), with when each
   * is due: the deliveries that have no record before their first attempt ends.
   */
  waiting?(limit: number): Promise<{ job: DeliveryJob; dueAt: number }[]>;
  /** Stops taking jobs and ends (or lets finish) the attempts under way. */
  close(): Promise<void>;
}

/** The job id of an event's deliveries: the event id (one job per event, however often it is queued), or a resend's own. */
export const jobId = (job: Pick<DeliveryJob, 'eventId' | 'jobKey'>) => job.jobKey ?? job.eventId;
