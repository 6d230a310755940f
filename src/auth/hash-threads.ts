/**
 * Password checks under load, on threads of their own (node:worker_threads; Bun and Deno run them too).
 *
 * Why: svc hashes at most (cores - 1) passwords at once (auth/passwords.ts). On libuv's pool each next
 * hash starts only when the event loop has taken the last one's result, so whenever the loop is busy
 * (or waits for a core) the hashing core idles: with two webhook endpoints beside logins on 2 cores, 3 to
 * 4 ms per 12 ms hash (logins/s 0.78x of none, `npm run bench:webhooks`). A thread of our own takes its
 * next check from its message queue the moment the last one ends, whatever the loop is doing.
 *
 * Started when checks queue (an idle or lightly used server never starts one: each holds about 8 MB),
 * stopped after IDLE_MS without a check. A thread that fails is not replaced: the caller hashes on
 * libuv's pool again (`HashThreadsFailed`), with a warning.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** A thread with no check for this long is stopped (started again, in about 50 ms, when checks queue). */
const IDLE_MS = 10_000;

// CommonJS (an eval'd worker), so that the same text runs from the sources, from dist/ and on Bun and Deno.
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { hashSync, verifySync } = require(workerData.argon2);
parentPort.on('message', (m) => {
  let ok = true, value;
  try { value = m.op === 'hash' ? hashSync(m.password, workerData.params) : verifySync(m.stored, m.password); }
  catch (err) { ok = false; value = String((err && err.message) || err); }
  parentPort.postMessage({ id: m.id, ok, value });
});`;

export type HashJob = { op: 'hash'; password: string } | { op: 'verify'; stored: string; password: string };

/** The threads stopped working: the check is to be made another way. */
export class HashThreadsFailed extends Error {}

interface Pending {
  resolve: (value: string | boolean) => void;
  reject: (err: Error) => void;
}

class HashThread {
  readonly pending = new Map<number, Pending>();
  private idle?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly worker: Worker,
    private readonly idleMs: number,
    /** `err` when the thread failed; none when it stopped, idle. */
    private readonly onDead: (thread: HashThread, err?: Error) => void,
  ) {
    worker.unref();
    this.idle = setTimeout(() => this.stop(), idleMs).unref();
    worker.on('message', (m: { id: number; ok: boolean; value: string | boolean }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(new Error(String(m.value)));
      if (!this.pending.size) this.idle = setTimeout(() => this.stop(), this.idleMs).unref();
    });
    worker.on('error', (err: unknown) => this.die(err instanceof Error ? err : new Error(String(err))));
    worker.on('exit', (code) => this.die(new Error(`the hashing thread exited with code ${code}`)));
  }

  send(id: number, job: HashJob, p: Pending): void {
    clearTimeout(this.idle);
    this.pending.set(id, p);
    this.worker.postMessage({ id, ...job });
  }

  /** Stops an idle thread (its exit is then not a failure). */
  private stop(): void {
    if (this.pending.size) return;
    this.stopped = true;
    this.onDead(this);
    void this.worker.terminate();
  }

  private die(err: Error): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.idle);
    this.onDead(this, err);
    for (const p of this.pending.values()) p.reject(new HashThreadsFailed(err.message));
    this.pending.clear();
  }
}

export class HashThreads {
  private threads: HashThread[] = [];
  private nextId = 0;
  /** False once a thread failed: checks stay on libuv's pool for the life of the process. */
  usable = true;

  constructor(
    /** How many threads when started: the most hashes svc makes at once. */
    private readonly size: number,
    private readonly params: object,
    /** Shorter in tests, as is the thread's text (a thread that crashes). */
    private readonly options: { idleMs?: number; source?: string } = {},
  ) {}

  /** Whether threads are running (checks then go to them, so that they stay one queue). */
  get started(): boolean {
    return this.threads.length > 0;
  }

  /** Checks sent and not answered yet. */
  get outstanding(): number {
    let n = 0;
    for (const t of this.threads) n += t.pending.size;
    return n;
  }

  /** Makes `job` on the thread with the fewest checks owed, starting the threads if none run. */
  run(job: HashJob): Promise<string | boolean> {
    if (!this.usable) return Promise.reject(new HashThreadsFailed('the hashing threads failed earlier'));
    if (!this.threads.length) this.start();
    let thread = this.threads[0]!;
    for (const t of this.threads) if (t.pending.size < thread.pending.size) thread = t;
    return new Promise((resolve, reject) => thread.send(++this.nextId, job, { resolve, reject }));
  }

  private start(): void {
    const argon2 = createRequire(import.meta.url).resolve('@node-rs/argon2');
    const onDead = (thread: HashThread, err?: Error) => {
      this.threads = this.threads.filter((t) => t !== thread);
      if (!err || !this.usable) return;
      this.usable = false;
      process.emitWarning(`the password hashing threads failed (${err.message}): passwords are hashed on libuv's pool from now on`, { code: 'SVC_HASH_THREADS' });
    };
    try {
      for (let i = 0; i < this.size; i++) {
        const worker = new Worker(this.options.source ?? THREAD_SOURCE, { eval: true, workerData: { argon2, params: this.params }, name: 'svc-hash' });
        this.threads.push(new HashThread(worker, this.options.idleMs ?? IDLE_MS, onDead));
      }
    } catch (err) {
      this.usable = false;
      process.emitWarning(`the password hashing threads cannot start (${(err as Error).message}): passwords are hashed on libuv's pool`, { code: 'SVC_HASH_THREADS' });
      throw new HashThreadsFailed((err as Error).message);
    }
  }
}
