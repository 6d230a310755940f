/**
 * Runs registered scripts: always `spawn` with an argument vector and `shell: false` (SPEC.md rule 3),
 * output decoded with the script's encoding, passed through its hooks, and capped per run (older chunks
 * dropped), so a program that writes without end cannot grow the service's memory.
 *
 * Safety (CONTRACT section 8): a script gets a minimal environment, never the service's; it runs as
 * the leader of its own process group, so the timeout, every signal and the shutdown reach whatever it
 * started (`sh -c 'sleep 40'` included); a hook that throws ends its run, never the service.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import { limited, type ResourceLimits, type RunAs } from './limits.ts';
import type { Hook, HookContext, Script } from './registry.ts';

export const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGKILL', 'SIGHUP', 'SIGUSR1', 'SIGUSR2'] as const;
export type AllowedSignal = (typeof SIGNALS)[number];

/** After the timeout's SIGTERM, a group that ignores it gets SIGKILL this much later... */
const KILL_GRACE_MS = 500;
/** ...and this much after the SIGKILL, `/script` answers even if something still holds the pipes (at most timeout + 1 s). */
const ABANDON_MS = 400;
/** The most one read of a pipe brings (Node's default highWaterMark for pipes). */
const PIPE_READ_BYTES = 64 * 1024;
/**
 * What one kept chunk costs beyond its text, counted against `outputCap`: an array entry and a string
 * header in memory, `"",` in a JSON answer. Without it a million empty lines (`hooks.lines`) fit in a
 * 1 MiB cap as a million entries (a 5 MB answer that stalled the event loop for seconds); with it, a
 * run keeps at most outputCap / 64 chunks (16,384 at the default).
 */
export const CHUNK_COST = 64;
/** The only variables of the service's environment a script sees (plus its own `opts.env`). */
const INHERITED_ENV = ['PATH', 'HOME', 'LANG', 'TZ'] as const;
/** Input written to one run, in all (CONTRACT section 8). */
export const MAX_INPUT_BYTES = 1024 * 1024;

/** The program could not be started (missing exe, not executable, bad cwd), or a hook of it failed. */
export class ExecutionError extends Error {}

/** The environment of a script: PATH, HOME, LANG and TZ of the service, then the script's own. */
export function childEnv(own: Record<string, string> | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of INHERITED_ENV) if (process.env[name] !== undefined) env[name] = process.env[name];
  return { ...env, ...own };
}

/** Every run still holding a process group, across connectors: killed when the service's process exits. */
const everyRun = new Set<Run>();
process.once('exit', () => {
  for (const run of everyRun) run.signal('SIGKILL');
});

export interface Limits {
  /** Bytes of stdout + stderr kept per run. */
  outputCap: number;
  /** Resource limits of every script's process (a script's own `opts.limits` win). */
  resources?: ResourceLimits;
  /** The user every script runs as (a script's own `opts.runAs` wins). */
  runAs?: RunAs;
}

/** Cuts decoded text into whole lines (`hooks.lines`); a line longer than `max` goes as it is. */
class LineSplitter {
  private rest = '';
  constructor(private readonly max: number) {}

  push(text: string): string[] {
    // A piece of a long line: only kept (splitting what was kept again at every read grows with the
    // square of the line's length).
    if (!text.includes('\n') && this.rest.length + text.length <= this.max) {
      this.rest += text;
      return [];
    }
    const parts = (this.rest + text).split(/(?<=\n)/);
    this.rest = parts.at(-1)!.endsWith('\n') ? '' : parts.pop()!;
    if (this.rest.length > this.max) {
      parts.push(this.rest);
      this.rest = '';
    }
    return parts;
  }

  end(): string[] {
    const last = this.rest;
    this.rest = '';
    return last ? [last] : [];
  }
}

/** One running program (a process group), its hook context, and the cap on what it keeps. */
export class Run {
  /** `stdin` stays empty: input is not kept once written (CONTRACT section 8). */
  readonly context: HookContext = { stdin: [], stdout: [], stderr: [] };
  /** Chunks dropped from the front of each stream (so readers can keep absolute positions). */
  readonly dropped = { stdin: 0, stdout: 0, stderr: 0 };
  done: number | string | undefined;
  /** Why svc ended the run (a hook threw); the run's stderr says it too. */
  failure: string | undefined;
  /** Bytes of input written so far. */
  inputBytes = 0;
  readonly finished: Promise<void>;
  /** Bytes of output text kept (stdout + stderr)... */
  private bytes = 0;
  /** ...and what they cost against the cap (CHUNK_COST more per chunk). */
  private cost = 0;
  private exit: number | string | undefined;
  private settle!: () => void;

  /** Whether the program itself has exited (its output may still be read: `done` comes with the pipes' end). */
  get exited(): boolean {
    return this.exit !== undefined || this.done !== undefined;
  }

  constructor(
    readonly script: Script,
    readonly argv: string[],
    readonly child: ChildProcess,
    private readonly limits: Limits,
    private readonly onHookError: (hook: string, err: unknown) => void,
  ) {
    for (const stream of ['stdout', 'stderr'] as const) {
      const decoder = new StringDecoder(script.encoding);
      const lines = script.lines ? new LineSplitter(limits.outputCap) : undefined;
      const keepAll = (pieces: string[]) => {
        for (const piece of pieces) this.keep(stream, piece);
      };
      child[stream]!.on('data', (chunk: Buffer) => {
        const text = decoder.write(chunk);
        keepAll(lines ? lines.push(text) : [text]);
      });
      child[stream]!.on('end', () => {
        const tail = decoder.end();
        keepAll(lines ? [...lines.push(tail), ...lines.end()] : [tail]);
      });
    }
    everyRun.add(this);
    this.finished = new Promise((resolve, reject) => {
      this.settle = () => {
        everyRun.delete(this);
        this.done ??= this.exit ?? 'SIGKILL';
        resolve();
      };
      child.once('error', (err) => {
        everyRun.delete(this);
        reject(new ExecutionError(`"${script.alias}" could not be started: ${err.message}`));
      });
      child.once('exit', (code, signal) => (this.exit = code ?? signal ?? 'unknown'));
      // `close`: the program has exited AND its output is read to the end (no member of its group holds the pipes).
      child.once('close', (code, signal) => {
        this.done ??= code ?? signal ?? 'unknown';
        this.settle();
      });
    });
    this.finished.catch(() => undefined);
    // Writing to a program that has exited is not an error of the service.
    child.stdin?.on('error', () => undefined);
  }

  /** Sends `signal` to the program's whole process group (what it started included). */
  signal(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined || this.done !== undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // The group is gone already (ESRCH).
    }
  }

  /**
   * Stops waiting for the program: the pipes are closed and the run ends now, with its exit status
   * when it has exited (a member of its group that escaped the group still holds the pipes), else SIGKILL.
   */
  abandon(): void {
    if (this.done !== undefined) return;
    for (const stream of [this.child.stdin, this.child.stdout, this.child.stderr]) stream?.destroy();
    this.settle();
  }

  /** Runs a hook of the script; one that throws ends the run (its stderr says so) and returns undefined. */
  private hook(name: 'stdin' | 'stdout' | 'stderr', fn: Hook, text: string): ReturnType<Hook> {
    try {
      const out: unknown = fn(text, this.context);
      // A function that returns a Promise without being `async` (registration refuses those): its
      // rejection would end the process, and its text would come after the chunk had gone on.
      if (typeof (out as PromiseLike<unknown> | null)?.then === 'function') {
        (out as Promise<unknown>).then(undefined, () => {});
        throw new Error('the hook returned a Promise: hooks are synchronous (return the text, or null to drop it)');
      }
      return out as ReturnType<Hook>;
    } catch (err) {
      if (this.failure === undefined) {
        this.failure = `the ${name} hook failed`;
        this.onHookError(name, err);
        this.push('stderr', `svc: ${this.failure}; the script was stopped\n`);
        this.signal('SIGKILL');
        this.abandon();
      }
      return undefined;
    }
  }

  private keep(stream: 'stdout' | 'stderr', text: string): void {
    if (!text || this.failure !== undefined) return;
    const fn = this.script.hooks[stream];
    const out = fn ? this.hook(stream, fn, text) : text;
    if (typeof out !== 'string' || !out || this.failure !== undefined) return;
    this.push(stream, out);
  }

  /**
   * Keeps a chunk; past the cap, the oldest go. The pipes are read whether or not anyone reads the
   * output (CONTRACT 8: a job runs to its end, the newest output kept): a program nobody reads costs
   * CPU only at its own output rate, and never waits on a full pipe.
   */
  private push(stream: 'stdout' | 'stderr', out: string): void {
    this.context[stream].push(out);
    const size = Buffer.byteLength(out);
    this.bytes += size;
    this.cost += size + CHUNK_COST;
    if (this.cost > this.limits.outputCap) this.dropOldest();
  }

  /** Bytes of output this run keeps now (what `GET /jobs` reports as `outputBytes`). */
  get outputBytes(): number {
    return this.bytes;
  }

  /**
   * Forgets every kept chunk (a finished job read to its end: nobody can be shown them again). The
   * arrays are emptied in place: hooks hold the context.
   */
  release(): void {
    for (const s of ['stdout', 'stderr'] as const) {
      this.dropped[s] += this.context[s].length;
      this.context[s].length = 0;
    }
    this.bytes = 0;
    this.cost = 0;
  }

  /**
   * The cap: drops the oldest chunks of either stream (the one that lost fewer first) until the rest
   * fits with some room, in one splice per stream. Dropping one chunk per new one copied the whole
   * array each time (Array#shift on a large array): with one-line chunks (`hooks.lines`), a script
   * printing numbers stalled the event loop for seconds. The room (at most 64 KiB, a pipe read) makes
   * drops rare; what is kept stays between cap minus the room and the cap.
   */
  private dropOldest(): void {
    const target = this.limits.outputCap - Math.min(PIPE_READ_BYTES, Math.floor(this.limits.outputCap / 16));
    const count = { stdout: 0, stderr: 0 };
    const left = (s: 'stdout' | 'stderr') => count[s] < this.context[s].length;
    while (this.cost > target) {
      const from = left('stdout') && (!left('stderr') || this.dropped.stdout + count.stdout <= this.dropped.stderr + count.stderr) ? 'stdout' : 'stderr';
      if (!left(from)) break;
      const size = Buffer.byteLength(this.context[from][count[from]++]!);
      this.bytes -= size;
      this.cost -= size + CHUNK_COST;
    }
    for (const s of ['stdout', 'stderr'] as const) {
      this.context[s].splice(0, count[s]);
      this.dropped[s] += count[s];
    }
  }

  /**
   * Sends `input` (through the stdin hook) to the program and returns what was written; `end` closes
   * its stdin. The caller checks `inputBytes` against MAX_INPUT_BYTES first. Nothing of it is kept.
   */
  write(input: string, end = false): string | undefined {
    this.inputBytes += Buffer.byteLength(input);
    const fn = this.script.hooks.stdin;
    const out = fn ? this.hook('stdin', fn, input) : input;
    const written = typeof out === 'string' && out && this.done === undefined && this.failure === undefined ? out : undefined;
    if (written) this.child.stdin?.write(written);
    if (end) this.child.stdin?.end();
    return written;
  }
}

/** The runs of one connector: started here, all killed by `killAll` (the service's shutdown). */
export class Runner {
  private readonly live = new Set<Run>();

  constructor(
    private readonly limits: Limits,
    private readonly onHookError: (script: Script, hook: string, err: unknown) => void,
  ) {}

  /** `stdin: false`: the program reads nothing (no pipe to set up: a short script starts faster). */
  start(script: Script, argv: string[], stdin = true): Run {
    const env = childEnv(script.env);
    let file: string;
    let args: string[];
    try {
      [file, args] = limited(script.exe, argv, { ...this.limits.resources, ...script.limits }, env.PATH, script.cwd);
    } catch (err) {
      throw new ExecutionError(`"${script.alias}" could not be started: ${(err as Error).message}`);
    }
    const runAs = script.runAs ?? this.limits.runAs;
    const child = spawn(file, args, {
      shell: false,
      cwd: script.cwd,
      env,
      // Node (libuv) drops the supplementary groups too.
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
      stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      // Its own process group (pgid = its pid): signals reach its children through `kill(-pid)`.
      detached: true,
      windowsHide: true,
    });
    const run = new Run(script, argv, child, this.limits, (hook, err) => this.onHookError(script, hook, err));
    this.live.add(run);
    run.finished.then(
      () => this.live.delete(run),
      () => this.live.delete(run),
    );
    return run;
  }

  /** Kills every process group still running (shutdown): nothing a script started outlives the service. Returns their aliases. */
  killAll(): string[] {
    const killed = [...this.live].map((run) => run.script.alias);
    for (const run of this.live) {
      run.signal('SIGKILL');
      run.abandon();
    }
    return killed;
  }

  /**
   * `POST /script/:cmd`: runs to the end or the timeout (SIGTERM, then SIGKILL, answering by timeout +
   * 1 s); the whole output. A run the timeout ended answers `"SIGTERM"` (CONTRACT section 8) however it
   * then ended: by that signal, by the SIGKILL that followed, or by exiting with a code of its own.
   */
  async script(script: Script, argv: string[], input: string | undefined, timeoutMs: number) {
    const run = this.start(script, argv, input !== undefined);
    if (input !== undefined) run.write(input, true);
    let timedOut = false;
    const timers: NodeJS.Timeout[] = [
      setTimeout(() => {
        timedOut = !run.exited;
        run.signal('SIGTERM');
      }, timeoutMs),
      setTimeout(() => run.signal('SIGKILL'), timeoutMs + KILL_GRACE_MS),
      setTimeout(() => run.abandon(), timeoutMs + KILL_GRACE_MS + ABANDON_MS),
    ];
    try {
      await run.finished;
    } finally {
      for (const timer of timers) clearTimeout(timer);
    }
    if (run.failure !== undefined) throw new ExecutionError(`"${script.alias}": ${run.failure}`);
    const status = timedOut ? 'SIGTERM' : run.done!;
    return { stdout: run.context.stdout.join(''), stderr: run.context.stderr.join(''), status };
  }
}

/**
 * Running things per user and in all, each at most its cap (`/script` calls, background jobs). Admins
 * may go `adminReserve` beyond the total: users who fill it never lock out the admin who would stop them.
 */
export class Slots {
  private readonly perUser = new Map<string, number>();
  private total = 0;

  constructor(
    private readonly userCap: number,
    private readonly totalCap: number,
    private readonly adminReserve = 0,
  ) {}

  /** Takes a slot for `user`, or returns false when they or everyone are at the cap. */
  take(user: string, isAdmin = false): boolean {
    const mine = this.perUser.get(user) ?? 0;
    if (mine >= this.userCap || this.total >= this.totalCap + (isAdmin ? this.adminReserve : 0)) return false;
    this.perUser.set(user, mine + 1);
    this.total++;
    return true;
  }

  release(user: string): void {
    const mine = (this.perUser.get(user) ?? 1) - 1;
    if (mine > 0) this.perUser.set(user, mine);
    else this.perUser.delete(user);
    this.total--;
  }
}

export interface Job {
  id: string;
  cmd: string;
  argv: string[];
  /** The user who started it: only they and admins see it. */
  owner: string;
  /** Its script is admin-only: every `/job/:id` call needs an admin (one demoted since is refused). */
  admin: boolean;
  run: Run;
  /** What the last `/job/:id` read had reached, per stream (absolute chunk positions). */
  read: { stdout: number; stderr: number };
  /** Removes it once finished (`retentionMs`). */
  expiry?: NodeJS.Timeout;
}

export interface JobLimits {
  maxJobs: number;
  maxJobsPerUser: number;
  /** Jobs admins may run beyond maxJobs. */
  adminReserve: number;
  retentionMs: number;
  /** Finished jobs kept per user; past it, the one that ended first goes. */
  maxFinishedPerUser: number;
}

/**
 * Background jobs (`/run/:cmd`): at most `maxJobs` running (also per user); a finished one is removed
 * `retentionMs` after it ended, or sooner when its owner has more than `maxFinishedPerUser` finished
 * ones (oldest first), so memory is bounded by counts, not by how fast jobs are started.
 */
export class Jobs {
  private readonly jobs = new Map<string, Job>();
  /** Finished jobs per owner, in the order they ended. */
  private readonly finished = new Map<string, string[]>();
  private readonly slots: Slots;

  constructor(
    private readonly runner: Runner,
    private readonly opts: JobLimits,
  ) {
    this.slots = new Slots(opts.maxJobsPerUser, opts.maxJobs, opts.adminReserve);
  }

  /** Starts a job, or returns null when its owner's or everyone's jobs are at the cap. Throws ExecutionError when it cannot start. */
  async start(script: Script, argv: string[], owner: string, isAdmin = false): Promise<Job | null> {
    if (!this.slots.take(owner, isAdmin)) return null;
    const id = `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
    let run: Run;
    try {
      run = this.runner.start(script, argv);
      // A spawn failure surfaces as an `error` event right after spawn: wait for either that or the pid.
      await new Promise<void>((resolve, reject) => {
        if (run.child.pid !== undefined) return resolve();
        run.finished.catch(reject);
        run.child.once('spawn', resolve);
      });
    } catch (err) {
      this.slots.release(owner);
      throw err;
    }
    const job: Job = { id, cmd: script.alias, argv, owner, admin: script.admin, run, read: { stdout: 0, stderr: 0 } };
    this.jobs.set(id, job);
    void run.finished.then(
      () => {
        this.slots.release(owner);
        this.keepFinished(job);
      },
      () => {
        this.slots.release(owner);
        this.jobs.delete(id);
      },
    );
    return job;
  }

  private keepFinished(job: Job): void {
    const mine = this.finished.get(job.owner) ?? [];
    this.finished.set(job.owner, mine);
    mine.push(job.id);
    job.expiry = setTimeout(() => this.remove(job), this.opts.retentionMs).unref();
    while (mine.length > this.opts.maxFinishedPerUser) {
      const oldest = this.jobs.get(mine[0]!);
      if (oldest) this.remove(oldest);
      else mine.shift();
    }
  }

  private remove(job: Job): void {
    clearTimeout(job.expiry);
    this.jobs.delete(job.id);
    const mine = this.finished.get(job.owner);
    const at = mine?.indexOf(job.id) ?? -1;
    if (at >= 0) mine!.splice(at, 1);
    if (mine?.length === 0) this.finished.delete(job.owner);
  }

  /** The job if `userId` may see it (its owner, or an admin). */
  get(id: string, userId: string, isAdmin: boolean): Job | undefined {
    const job = this.jobs.get(id);
    return job && (isAdmin || job.owner === userId) ? job : undefined;
  }

  list(): Job[] {
    return [...this.jobs.values()];
  }

  /** Owners of running jobs. */
  runningOwners(): Set<string> {
    return new Set([...this.jobs.values()].filter((j) => j.run.done === undefined).map((j) => j.owner));
  }

  /** Ends the running jobs of `owner` (a deleted user): SIGTERM to each group, SIGKILL shortly after. Returns their ids. */
  endOwnedBy(owner: string): string[] {
    const mine = [...this.jobs.values()].filter((j) => j.owner === owner && j.run.done === undefined);
    for (const job of mine) {
      job.run.signal('SIGTERM');
      setTimeout(() => job.run.signal('SIGKILL'), KILL_GRACE_MS).unref();
    }
    return mine.map((j) => j.id);
  }

  /**
   * What is new since the last read of this job (then marked read). A finished job read to its end
   * lets go of its output: nobody can be shown it again (the read positions are the job's, not the reader's).
   */
  static takeNew(job: Job): { stdout: string[]; stderr: string[] } {
    const out = { stdout: [] as string[], stderr: [] as string[] };
    for (const stream of ['stdout', 'stderr'] as const) {
      const chunks = job.run.context[stream];
      const dropped = job.run.dropped[stream];
      out[stream] = chunks.slice(Math.max(0, job.read[stream] - dropped));
      job.read[stream] = dropped + chunks.length;
    }
    if (job.run.done !== undefined) job.run.release();
    return out;
  }
}
