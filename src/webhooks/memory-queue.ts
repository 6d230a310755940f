import type { Logger } from '../logger.ts';
import { jobId, type AttemptRunner, type DeliveryJob, type DeliveryQueue } from './queue.ts';

/** Attempts under way at once; more wait their turn. */
const CONCURRENCY = 16;
/** An attempt that could not run (the database is down) runs again after this long. */
const RUN_AGAIN_MS = 30_000;

/**
 * The delivery queue of a process without Redis (the embedded store): timers in this process. It
 * keeps nothing itself: each delivery record says what is owed and when (status `pending`,
 * `nextAttemptAt`), and svc queues those again at start, so a delivery owed when svc stopped or was
 * killed is made after the restart. One process only, as the embedded database is.
 */
export class MemoryDeliveryQueue implements DeliveryQueue {
  readonly durable = false;
  /** Jobs waiting for their time, by job id: a job queued twice is one job. */
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Jobs whose time came, waiting for a free slot. */
  private readonly ready: DeliveryJob[] = [];
  private readonly running = new Map<string, Promise<void>>();
  private readonly stopping = new AbortController();

  constructor(
    private readonly run: AttemptRunner,
    /** Delay before retry n (1-based), in ms. */
    private readonly retryDelayMs: (attempt: number) => number,
    private readonly logger: Logger,
  ) {}

  add(job: DeliveryJob, delayMs: number): Promise<void> {
    const id = jobId(job);
    if (this.stopping.signal.aborted || this.timers.has(id) || this.running.has(id) || this.ready.some((j) => jobId(j) === id)) return Promise.resolve();
    const timer = setTimeout(() => {
      this.timers.delete(id);
      this.ready.push(job);
      this.next();
    }, Math.max(0, delayMs));
    timer.unref();
    this.timers.set(id, timer);
    return Promise.resolve();
  }

  private next(): void {
    while (this.running.size < CONCURRENCY && this.ready.length && !this.stopping.signal.aborted) {
      const job = this.ready.shift()!;
      const id = jobId(job);
      const attempt = job.done + 1;
      const work = this.run(job, attempt, this.stopping.signal)
        .then((outcome) => {
          this.running.delete(id);
          if (outcome === 'retry') void this.add({ ...job, done: attempt }, this.retryDelayMs(attempt));
        })
        .catch((err: unknown) => {
          // The database could not be read or written (it is down): the same attempt again a little later.
          this.running.delete(id);
          this.logger.error({ err, webhookIds: job.webhookIds, eventId: job.eventId }, `a webhook delivery attempt could not run; trying again in ${RUN_AGAIN_MS / 1000} s`);
          void this.add(job, RUN_AGAIN_MS);
        })
        .finally(() => this.next());
      this.running.set(id, work);
    }
  }

  /** Stops the timers and aborts the attempts under way: those deliveries stay pending for the next start. */
  async close(): Promise<void> {
    this.stopping.abort();
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.ready.length = 0;
    await Promise.allSettled([...this.running.values()]);
  }
}
