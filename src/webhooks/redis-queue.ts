/**
 * The delivery queue on Redis: a stream read by a consumer group, Redis's own queue primitive. It gives
 * what CONTRACT 13 asks and a timer loop would not: jobs live in Redis (an instance killed with SIGKILL
 * loses nothing: a job it held stays in the group's pending list and is claimed by another instance once
 * idle for LOCK_MS), each job is read by one consumer of the cluster (XREADGROUP), and retries wait in a
 * sorted set by due time on `auth.webhooks.retrySchedule`, moved to the stream when due.
 *
 * Why not BullMQ (svc's queue until 2026-12): a job there took 5 scripts and 2 blocking reads when events
 * trickle in (as logins cause them), about 2.4 ms of svc's CPU and 0.85 ms of Redis's per job; here one
 * script to add, one read, one script to finish: about half, and a third of Redis's (docs/benchmarks.md).
 *
 * Keys, all under `<auth.store.keyPrefix>{svc-webhooks}:queue:` (one hash tag: the scripts touch several
 * keys, which on Redis Cluster must share a slot): `jobs` (the stream; an entry is deleted once its job
 * is done), `later` (the sorted set of jobs waiting for their time), `seen:<job id>` (a day: a job queued
 * twice is one job). Needs Redis 6.2 or later (XAUTOCLAIM; an older one is named in the log at start).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import type { RedisStore } from '../store/redis.ts';
import { jobId, type AttemptRunner, type DeliveryJob, type DeliveryQueue } from './queue.ts';

const GROUP = 'deliver';
/** Attempts under way at once per instance (each waits at most the delivery timeout). */
const CONCURRENCY = 16;
/**
 * A job read by an instance that died is claimed by another once its entry was idle this long. An
 * instance alive resets the idle time of its jobs under way at each tick (an attempt may take the 10 s
 * delivery timeout, with its records written after).
 */
const LOCK_MS = 15_000;
/**
 * How often each instance claims idle jobs, keeps its own, and moves due ones from `later` (its own
 * retries move at their time): a job of an instance that died is made within LOCK_MS + TICK_MS.
 */
const TICK_MS = 5000;
/** Every this many ticks (5 minutes), consumers of instances gone are removed from the group. */
const PRUNE_TICKS = 60;
/** A job claimed this many times (each time its instance died with it) is dropped, logged: it is not run again. */
const MAX_READS = 4;
/** How long the consumer's read blocks; a shorter wait costs a command per wait, no more. */
const BLOCK_MS = 5000;
/** An attempt that could not run (the database is down) runs again after this long. */
const RUN_AGAIN_MS = 30_000;
/** How long an enqueue may take before the event is logged as not queued (the request waits for it). */
const ADD_TIMEOUT_MS = 3000;
/** A job id is remembered this long: a job queued again with the same id within it stays one job. */
const SEEN_SECONDS = 86_400;
/** How long start-up waits for the queue's connection to Redis. */
const OPEN_TIMEOUT_MS = 10_000;
/** The longest a shutdown waits for the attempts under way (each takes at most the 10 s delivery timeout). */
const CLOSE_TIMEOUT_MS = 15_000;
/** Errors of a down Redis are logged once per this interval, not once per retry. */
const ERROR_LOG_INTERVAL_MS = 30_000;
/** A consumer with no job pending, idle this long, is an instance gone. */
const GONE_CONSUMER_MS = 3_600_000;

/** KEYS: seen, jobs, later. ARGV: job, dueAt (0: now). Adds the job unless its id was seen within the day. */
const ADD = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ${SEEN_SECONDS}) then return 0 end
if ARGV[2] == '0' then redis.call('XADD', KEYS[2], '*', 'job', ARGV[1]) else redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1]) end
return 1`;
/**
 * KEYS: jobs, later. ARGV: group, entry id, [job, dueAt]. The job is done: its entry acknowledged and
 * deleted, and (a retry) the job's next attempt put in `later`, in one step. Not when another instance
 * acknowledged it first (it claimed the job as idle): its retry is that instance's.
 */
const FINISH = `
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
if ARGV[3] then redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3]) end
return 1`;
/** KEYS: later, jobs. ARGV: now, most. Moves the jobs whose time came to the stream. */
const PROMOTE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, job in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'job', job)
  redis.call('ZREM', KEYS[1], job)
end
return #due`;

type Client = (Redis | Cluster) & {
  svcQueueAdd(seen: string, jobs: string, later: string, job: string, dueAt: string): Promise<number>;
  svcQueueFinish(jobs: string, later: string, group: string, id: string, ...retry: string[]): Promise<number>;
  svcQueuePromote(later: string, jobs: string, now: string, most: string): Promise<number>;
};
type Entry = [id: string, fields: string[]];

/** The queue's keys under an app's `auth.store.keyPrefix` (one hash tag: one Redis Cluster slot). */
export function webhookQueueKeys(keyPrefix: string): { base: string; jobs: string; later: string } {
  const base = `${keyPrefix}{svc-webhooks}:queue:`;
  return { base, jobs: `${base}jobs`, later: `${base}later` };
}

export interface RedisQueueOptions {
  store: RedisStore;
  /** `auth.store.keyPrefix`: the queue's keys live under `<keyPrefix>{svc-webhooks}:queue:`. */
  keyPrefix: string;
  /** How many attempts a delivery has in all: 1 + the retry schedule's length. */
  totalAttempts: number;
  retryDelayMs: (attempt: number) => number;
  run: AttemptRunner;
  logger: Logger;
}

/** Resolves once `client` can take commands (it has no offline queue), or rejects after OPEN_TIMEOUT_MS. */
function ready(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  // A duplicate of a lazy client (the store's) is lazy too: nothing connects it before its first command.
  if (client.status === 'wait') client.connect().catch(() => {});
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(new Error(`Redis did not answer within ${OPEN_TIMEOUT_MS / 1000} s (the webhook queue's connection)`));
    }, OPEN_TIMEOUT_MS);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}

export class RedisDeliveryQueue implements DeliveryQueue {
  readonly durable = true;
  private readonly keys: ReturnType<typeof webhookQueueKeys>;
  /** This instance's name in the group: unique per process, so a restart never inherits a dead one's jobs by name. */
  private readonly consumerName = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  /** Jobs under way, by entry id. */
  private readonly running = new Map<string, Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private closing = false;
  private reading?: Promise<void>;
  private ticking?: Promise<void>;
  /** What `wait` woke: the read loop waits while all CONCURRENCY slots are taken, or after an error. */
  private readonly waiters = new Set<() => void>();
  private tickTimer?: NodeJS.Timeout;
  private ticks = 0;
  private lastLogged = 0;

  private constructor(
    /** Fails fast when Redis is down (the store's settings): adds run inside requests. */
    private readonly producer: Client,
    /** Blocks on its reads and rides out an outage. */
    private readonly consumer: Redis | Cluster,
    private readonly opts: RedisQueueOptions,
  ) {
    this.keys = webhookQueueKeys(opts.keyPrefix);
  }

  static async open(opts: RedisQueueOptions): Promise<RedisDeliveryQueue> {
    const client = opts.store.client;
    const producer = ((client as Cluster).isCluster ? (client as Cluster).duplicate() : (client as Redis).duplicate()) as Client;
    producer.defineCommand('svcQueueAdd', { numberOfKeys: 3, lua: ADD });
    producer.defineCommand('svcQueueFinish', { numberOfKeys: 2, lua: FINISH });
    producer.defineCommand('svcQueuePromote', { numberOfKeys: 2, lua: PROMOTE });
    const consumer = opts.store.dedicatedConnection();
    const queue = new RedisDeliveryQueue(producer, consumer, opts);
    // A connection's errors (Redis down) are logged, once per interval: ioredis reconnects by itself.
    for (const connection of [producer, consumer]) connection.on('error', (err: Error) => queue.logError('connection', err));
    try {
      await ready(producer);
      await queue.createGroup();
      // Streams and groups came with Redis 5.0; claiming a dead instance's jobs (XAUTOCLAIM) with 6.2.
      const version = /redis_version:(\d+)\.(\d+)/.exec(await producer.info('server'));
      if (version && Number(version[1]) * 100 + Number(version[2]) < 602) {
        opts.logger.error({ store: opts.store.name, redisVersion: `${version[1]}.${version[2]}` }, 'webhook deliveries need Redis 6.2 or later: a delivery under way when its instance dies is not made by another');
      }
    } catch (err) {
      producer.disconnect();
      consumer.disconnect();
      throw err;
    }
    queue.reading = queue.read();
    const tick = () => {
      queue.ticking ??= queue.tick().finally(() => (queue.ticking = undefined));
    };
    queue.tickTimer = setInterval(tick, TICK_MS);
    queue.tickTimer.unref();
    tick();
    return queue;
  }

  /** The group, from the stream's start (and the stream with it); one that exists already is kept. */
  private async createGroup(): Promise<void> {
    try {
      await this.producer.xgroup('CREATE', this.keys.jobs, GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!/BUSYGROUP/.test((err as Error).message)) throw err;
    }
  }

  async add(job: DeliveryJob, delayMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`not queued within ${ADD_TIMEOUT_MS / 1000} s`)), ADD_TIMEOUT_MS);
    });
    const dueAt = delayMs > 0 ? Date.now() + delayMs : 0;
    try {
      await Promise.race([this.producer.svcQueueAdd(`${this.keys.base}seen:${jobId(job)}`, this.keys.jobs, this.keys.later, JSON.stringify(job), String(dueAt)), timeout]);
    } finally {
      clearTimeout(timer);
    }
    if (dueAt) this.promoteAt(dueAt);
  }

  async waiting(limit: number): Promise<{ job: DeliveryJob; dueAt: number }[]> {
    const [entries, later] = await Promise.all([
      this.producer.xrange(this.keys.jobs, '-', '+', 'COUNT', String(limit)) as Promise<Entry[]>,
      this.producer.zrange(this.keys.later, '0', String(limit - 1), 'WITHSCORES'),
    ]);
    const listed = entries.map(([id, fields]) => ({ job: JSON.parse(fields[1]!) as DeliveryJob, dueAt: Number(id.split('-')[0]) }));
    for (let i = 0; i < later.length; i += 2) listed.push({ job: JSON.parse(later[i]!) as DeliveryJob, dueAt: Number(later[i + 1]) });
    return listed;
  }

  /** The read loop: takes as many new jobs as there are free slots, waiting up to BLOCK_MS for one. */
  private async read(): Promise<void> {
    while (!this.closing) {
      const free = CONCURRENCY - this.running.size;
      if (free <= 0) {
        await this.wait();
        continue;
      }
      try {
        const streams = (await this.consumer.xreadgroup('GROUP', GROUP, this.consumerName, 'COUNT', free, 'BLOCK', BLOCK_MS, 'STREAMS', this.keys.jobs, '>')) as [string, Entry[]][] | null;
        for (const [, entries] of streams ?? []) for (const entry of entries) this.start(entry);
      } catch (err) {
        if (this.closing) return;
        // The stream went with Redis's data (a restart without persistence, a flush): the group again.
        if (/NOGROUP/.test((err as Error).message)) await this.createGroup().catch(() => {});
        this.logError('read', err);
        await this.wait(1000);
      }
    }
  }

  /** Runs one attempt of the entry's job, then finishes it: done, or its next attempt in `later`. */
  private start([id, fields]: Entry): void {
    const job = JSON.parse(fields[1]!) as DeliveryJob;
    const attempt = job.done + 1;
    const work = this.opts
      .run(job, attempt)
      .then(
        (outcome) => (outcome === 'retry' ? this.finish(id, { ...job, done: attempt }, this.opts.retryDelayMs(attempt)) : this.finish(id)),
        (err: unknown) => {
          // The database could not be read or written (it is down): the same attempt again a little later.
          this.opts.logger.error({ err, webhookIds: job.webhookIds, eventId: job.eventId }, `a webhook delivery attempt could not run; trying again in ${RUN_AGAIN_MS / 1000} s`);
          return this.finish(id, job, RUN_AGAIN_MS);
        },
      )
      // Not finished (Redis went away): the entry stays pending, and is claimed again once idle.
      .catch((err: unknown) => this.logError('finish', err))
      .finally(() => {
        this.running.delete(id);
        this.wakeAll();
      });
    this.running.set(id, work);
  }

  private async finish(id: string, next?: DeliveryJob, delayMs = 0): Promise<void> {
    const dueAt = Date.now() + delayMs;
    await this.producer.svcQueueFinish(this.keys.jobs, this.keys.later, GROUP, id, ...(next ? [JSON.stringify(next), String(dueAt)] : []));
    if (next) this.promoteAt(dueAt);
  }

  /** A job this instance put in `later` is moved at its time (other instances' by the ticks, should this one die). */
  private promoteAt(dueAt: number): void {
    if (this.closing) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.promote();
    }, Math.max(0, dueAt - Date.now()));
    timer.unref();
    this.timers.add(timer);
  }

  private async promote(): Promise<void> {
    try {
      while ((await this.producer.svcQueuePromote(this.keys.later, this.keys.jobs, String(Date.now()), '100')) === 100);
    } catch (err) {
      this.logError('schedule', err);
    }
  }

  /** Every TICK_MS: due jobs moved, jobs under way kept, jobs of instances gone claimed. */
  private async tick(): Promise<void> {
    if (this.closing) return;
    await this.promote();
    try {
      // Jobs under way stay this instance's: their idle time starts again (XCLAIM to itself, JUSTID).
      const mine = [...this.running.keys()];
      if (mine.length) await this.producer.call('XCLAIM', this.keys.jobs, GROUP, this.consumerName, '0', ...mine, 'JUSTID');
      const free = CONCURRENCY - this.running.size;
      if (free > 0) await this.claimIdle(free);
      if (++this.ticks % PRUNE_TICKS === 0) await this.removeGoneConsumers();
    } catch (err) {
      this.logError('claim', err);
    }
  }

  /** Jobs read by an instance that died (idle LOCK_MS and more): this instance makes them. */
  private async claimIdle(free: number): Promise<void> {
    const [, entries] = (await this.producer.xautoclaim(this.keys.jobs, GROUP, this.consumerName, LOCK_MS, '0-0', 'COUNT', free)) as [string, (Entry | null)[]];
    for (const entry of entries) {
      if (!entry?.[1] || this.closing) continue;
      const [[, , , reads] = []] = (await this.producer.xpending(this.keys.jobs, GROUP, entry[0], entry[0], 1)) as [string, string, number, number][];
      if ((reads ?? 0) > MAX_READS) {
        const job = JSON.parse(entry[1][1]!) as DeliveryJob;
        this.opts.logger.error({ code: 'webhook_job_dropped', webhookIds: job.webhookIds, eventId: job.eventId, reads }, `webhook_job_dropped: a delivery job whose instance died ${MAX_READS} times with it is not run again`);
        await this.producer.svcQueueFinish(this.keys.jobs, this.keys.later, GROUP, entry[0]);
        continue;
      }
      this.opts.logger.warn({ webhookIds: JSON.parse(entry[1][1]!).webhookIds as string[] }, 'a webhook delivery job left by an instance that stopped is made by this one');
      this.start(entry);
    }
  }

  private async removeGoneConsumers(): Promise<void> {
    const consumers = (await this.producer.xinfo('CONSUMERS', this.keys.jobs, GROUP)) as (string | number)[][];
    for (const fields of consumers) {
      const info = Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i], fields[2 * i + 1]]));
      if (info.name !== this.consumerName && Number(info.pending) === 0 && Number(info.idle) > GONE_CONSUMER_MS) {
        await this.producer.xgroup('DELCONSUMER', this.keys.jobs, GROUP, String(info.name));
      }
    }
  }

  /** Until `wakeAll` (a slot freed, the queue closing), or `ms` at most. */
  private wait(ms?: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.add(done);
    });
  }

  private wakeAll(): void {
    for (const done of this.waiters) done();
    this.waiters.clear();
  }

  private logError(what: string, err: unknown): void {
    if (Date.now() - this.lastLogged < ERROR_LOG_INTERVAL_MS) return;
    this.lastLogged = Date.now();
    this.opts.logger.error({ err: (err as Error).message, store: this.opts.store.name }, `webhook queue (${what}): Redis error (deliveries wait until it is back)`);
  }

  /**
   * Stops reading, lets the attempts under way finish (each within the delivery timeout), then lets go
   * of Redis. Never longer than CLOSE_TIMEOUT_MS (Redis down at shutdown): a job cut short stays
   * pending and is claimed by another instance, or by this one's next start.
   */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.tickTimer);
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.wakeAll();
    // The blocking read ends with its connection; a job it had read just then stays pending (claimed later).
    this.consumer.disconnect();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_TIMEOUT_MS)));
    await Promise.race([Promise.allSettled([this.reading, this.ticking, ...this.running.values()]), late]);
    clearTimeout(timer);
    // This instance leaves the group, unless a job is still pending under its name (removing it would lose that job).
    await this.producer
      .xpending(this.keys.jobs, GROUP, '-', '+', 1, this.consumerName)
      .then((pending) => (pending as unknown[]).length === 0 && this.producer.xgroup('DELCONSUMER', this.keys.jobs, GROUP, this.consumerName))
      .catch(() => {});
    this.producer.disconnect();
  }
}
