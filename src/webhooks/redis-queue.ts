/**
 * The delivery queue on Redis: BullMQ, the Node field's standard job queue. It gives what CONTRACT 13
 * asks and a timer loop would not: jobs live in Redis (an instance killed with SIGKILL loses nothing;
 * a job it held is found stalled and run again by another), each job is taken by one worker of the
 * cluster, and retries wait as delayed jobs on `auth.webhooks.retrySchedule` (a custom backoff).
 *
 * Redis Cluster: BullMQ's scripts touch several keys of a queue, which must hash to one slot, so the
 * queue's prefix holds a hash tag: `<auth.store.keyPrefix>{svc-webhooks}`.
 */
import { Queue, Worker, type Job } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import type { RedisStore } from '../store/redis.ts';
import { jobId, type AttemptRunner, type DeliveryJob, type DeliveryQueue } from './queue.ts';

const QUEUE_NAME = 'webhooks';
const BACKOFF = 'svc-retry-schedule';
/** Attempts under way at once per instance (each waits at most the delivery timeout). */
const CONCURRENCY = 16;
/**
 * A job whose worker died is run again by another once its lock expired and a stalled check ran:
 * within about LOCK_MS + STALLED_CHECK_MS. The lock is renewed every LOCK_MS / 2 while an attempt runs.
 */
const LOCK_MS = 15_000;
const STALLED_CHECK_MS = 5000;
/** How long an enqueue may take before the event is logged as not queued (the request waits for it). */
const ADD_TIMEOUT_MS = 3000;
/** Finished jobs are kept this long (a job queued again with the same id within it stays one job). */
const KEEP_FINISHED = { age: 86_400, count: 10_000 };
/** The longest a shutdown waits for the worker (an attempt takes at most the 10 s delivery timeout). */
const CLOSE_TIMEOUT_MS = 15_000;
/** Errors of a down Redis are logged once per this interval, not once per retry. */
const ERROR_LOG_INTERVAL_MS = 30_000;

export interface RedisQueueOptions {
  store: RedisStore;
  /** `auth.store.keyPrefix`: the queue's keys live under `<keyPrefix>{svc-webhooks}:webhooks:`. */
  keyPrefix: string;
  /** How many attempts a delivery has in all: 1 + the retry schedule's length. */
  totalAttempts: number;
  retryDelayMs: (attempt: number) => number;
  run: AttemptRunner;
  logger: Logger;
}

export class RedisDeliveryQueue implements DeliveryQueue {
  readonly durable = true;
  private constructor(
    private readonly queue: Queue<DeliveryJob>,
    private readonly worker: Worker<DeliveryJob>,
    private readonly connections: (Redis | Cluster)[],
    private readonly totalAttempts: number,
  ) {}

  static async open(opts: RedisQueueOptions): Promise<RedisDeliveryQueue> {
    const prefix = `${opts.keyPrefix}{svc-webhooks}`;
    // Enqueueing happens inside the request that caused the event: the store's own settings (no
    // offline queue, a command timeout) make it fail fast when Redis is down, as the request's other commands do.
    const client = opts.store.client;
    const producer: Redis | Cluster = (client as Cluster).isCluster ? (client as Cluster).duplicate() : (client as Redis).duplicate();
    // The worker blocks on Redis and must ride out an outage (BullMQ requires maxRetriesPerRequest: null).
    const consumer = opts.store.dedicatedConnection() as Redis | Cluster;
    let lastLogged = 0;
    const onError = (what: string) => (err: Error) => {
      if (Date.now() - lastLogged < ERROR_LOG_INTERVAL_MS) return;
      lastLogged = Date.now();
      opts.logger.error({ err: err.message, store: opts.store.name }, `webhook ${what}: Redis error (deliveries wait until it is back)`);
    };
    const queue = new Queue<DeliveryJob>(QUEUE_NAME, { connection: producer, prefix });
    queue.on('error', onError('queue'));
    const worker = new Worker<DeliveryJob>(
      QUEUE_NAME,
      async (job: Job<DeliveryJob>) => {
        const attempt = job.data.done + job.attemptsMade + 1;
        const outcome = await opts.run(job.data, attempt);
        // BullMQ retries a job whose processor throws, after the custom backoff below.
        if (outcome === 'retry') throw new Error(`attempt ${attempt} failed`);
      },
      {
        connection: consumer,
        prefix,
        concurrency: CONCURRENCY,
        lockDuration: LOCK_MS,
        stalledInterval: STALLED_CHECK_MS,
        // A job that stalls (its instance died mid-attempt) is run again, not failed.
        maxStalledCount: 3,
        removeOnComplete: KEEP_FINISHED,
        removeOnFail: KEEP_FINISHED,
        settings: { backoffStrategy: (attemptsMade: number, _type?: string, _err?: Error, job?: { data: DeliveryJob }) => opts.retryDelayMs((job?.data.done ?? 0) + attemptsMade) },
      },
    );
    worker.on('error', onError('worker'));
    const connections = [producer, consumer];
    try {
      await Promise.all([queue.waitUntilReady(), worker.waitUntilReady()]);
    } catch (err) {
      await Promise.allSettled([worker.close(true), queue.close()]);
      for (const c of connections) c.disconnect();
      throw err;
    }
    return new RedisDeliveryQueue(queue, worker, connections, opts.totalAttempts);
  }

  async add(job: DeliveryJob, delayMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`not queued within ${ADD_TIMEOUT_MS / 1000} s`)), ADD_TIMEOUT_MS);
    });
    try {
      await Promise.race([
        this.queue.add('deliver', job, {
          jobId: jobId(job),
          delay: Math.max(0, delayMs),
          attempts: Math.max(1, this.totalAttempts - job.done),
          backoff: { type: BACKOFF },
          removeOnComplete: KEEP_FINISHED,
          removeOnFail: KEEP_FINISHED,
        }),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  async waiting(limit: number): Promise<{ job: DeliveryJob; dueAt: number }[]> {
    const jobs = await this.queue.getJobs(['active', 'waiting', 'prioritized', 'delayed'], 0, limit - 1);
    return jobs.filter(Boolean).map((j) => ({ job: j.data, dueAt: j.timestamp + (j.delay ?? 0) }));
  }

  /**
   * Lets the attempts under way finish (each within the delivery timeout), then lets go of Redis. Never
   * longer than CLOSE_TIMEOUT_MS (Redis down at shutdown): a job cut short is found stalled and made again.
   */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_TIMEOUT_MS)));
    await Promise.race([Promise.allSettled([this.worker.close(), this.queue.close()]), late]);
    clearTimeout(timer);
    for (const c of this.connections) c.disconnect();
  }
}
