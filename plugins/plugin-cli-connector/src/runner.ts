/**
 * Runs registered scripts: always `spawn` with an argument vector and `shell: false` (SPEC.md rule 3),
 * output decoded with the script's encoding, passed through its hooks, and capped per run (older chunks
 * dropped), so a program that writes without end cannot grow the service's memory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import type { HookContext, Script } from './registry.ts';

export const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGKILL', 'SIGHUP', 'SIGUSR1', 'SIGUSR2'] as const;
export type AllowedSignal = (typeof SIGNALS)[number];

/** After the timeout's SIGTERM, a program that ignores it gets SIGKILL this much later. */
const KILL_GRACE_MS = 1000;

/** Running children of every job: killed when the service exits, so no job outlives it. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** The program could not be started (missing exe, not executable, bad cwd). */
export class ExecutionError extends Error {}

export interface Limits {
  /** Bytes of stdout + stderr kept per run. */
  outputCap: number;
}

/** One running program, its hook context, and the cap on what it keeps. */
class Run {
  readonly context: HookContext = { stdin: [], stdout: [], stderr: [] };
  /** Chunks dropped from the front of each stream (so readers can keep absolute positions). */
  readonly dropped = { stdin: 0, stdout: 0, stderr: 0 };
  done: number | string | undefined;
  readonly finished: Promise<void>;
  private bytes = 0;

  constructor(
    readonly script: Script,
    readonly argv: string[],
    readonly child: ChildProcess,
    private readonly limits: Limits,
  ) {
    for (const stream of ['stdout', 'stderr'] as const) {
      const decoder = new StringDecoder(script.encoding);
      child[stream]!.on('data', (chunk: Buffer) => this.keep(stream, decoder.write(chunk)));
      child[stream]!.on('end', () => this.keep(stream, decoder.end()));
    }
    this.finished = new Promise((resolve, reject) => {
      child.once('error', (err) => reject(new ExecutionError(`"${script.alias}" could not be started: ${err.message}`)));
      // `close`: the program has exited AND its output is read to the end.
      child.once('close', (code, signal) => {
        this.done = code ?? signal ?? 'unknown';
        resolve();
      });
    });
    // Writing to a program that has exited is not an error of the service.
    child.stdin?.on('error', () => undefined);
  }

  private keep(stream: 'stdout' | 'stderr', text: string): void {
    if (!text) return;
    const hook = this.script.hooks[stream];
    const out = hook ? hook(text, this.context) : text;
    if (typeof out !== 'string' || !out) return;
    this.context[stream].push(out);
    this.bytes += Buffer.byteLength(out);
    // The cap: drop the oldest chunks of either stream until the rest fits.
    while (this.bytes > this.limits.outputCap) {
      const from = this.context.stdout.length && (!this.context.stderr.length || this.dropped.stdout <= this.dropped.stderr) ? 'stdout' : 'stderr';
      const gone = this.context[from].shift();
      if (gone === undefined) break;
      this.dropped[from]++;
      this.bytes -= Buffer.byteLength(gone);
    }
  }

  /** Sends `input` (through the stdin hook) to the program; `end` closes its stdin. */
  write(input: string, end = false): void {
    const hook = this.script.hooks.stdin;
    const out = hook ? hook(input, this.context) : input;
    if (typeof out === 'string' && out) {
      this.context.stdin.push(out);
      if (this.done === undefined) this.child.stdin?.write(out);
    }
    if (end) this.child.stdin?.end();
  }
}

/** `stdin: false`: the program reads nothing (no pipe to set up: a short script starts faster). */
function start(script: Script, argv: string[], limits: Limits, stdin = true): Run {
  const child = spawn(script.exe, argv, {
    shell: false,
    cwd: script.cwd,
    env: script.env ?? process.env,
    stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    windowsHide: true,
  });
  return new Run(script, argv, child, limits);
}

/** `POST /script/:cmd`: runs to the end or the timeout (SIGTERM, then SIGKILL); the whole output. */
export async function runScript(script: Script, argv: string[], input: string | undefined, timeoutMs: number, limits: Limits) {
  const run = start(script, argv, limits, input !== undefined);
  if (input !== undefined) run.write(input, true);
  let killer: NodeJS.Timeout | undefined;
  const timer = setTimeout(() => {
    run.child.kill('SIGTERM');
    killer = setTimeout(() => run.child.kill('SIGKILL'), KILL_GRACE_MS);
  }, timeoutMs);
  try {
    await run.finished;
  } finally {
    clearTimeout(timer);
    clearTimeout(killer);
  }
  return { stdout: run.context.stdout.join(''), stderr: run.context.stderr.join(''), status: run.done! };
}

export interface Job {
  id: string;
  cmd: string;
  argv: string[];
  /** The user who started it: only they and admins see it. */
  owner: string;
  run: Run;
  /** What the last `/job/:id` read had reached, per stream (absolute chunk positions). */
  read: { stdin: number; stdout: number; stderr: number };
}

/** Background jobs (`/run/:cmd`): at most `maxJobs` running, removed `retentionMs` after they end. */
export class Jobs {
  private readonly jobs = new Map<string, Job>();

  constructor(private readonly opts: Limits & { maxJobs: number; retentionMs: number }) {}

  get running(): number {
    let n = 0;
    for (const job of this.jobs.values()) if (job.run.done === undefined) n++;
    return n;
  }

  /** Starts a job, or returns null when `maxJobs` are running. Throws ExecutionError when it cannot start. */
  async start(script: Script, argv: string[], owner: string): Promise<Job | null> {
    if (this.running >= this.opts.maxJobs) return null;
    const id = `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
    const run = start(script, argv, this.opts);
    // A spawn failure surfaces as an `error` event right after spawn: wait for either that or the pid.
    await new Promise<void>((resolve, reject) => {
      if (run.child.pid !== undefined) return resolve();
      run.finished.catch(reject);
      run.child.once('spawn', resolve);
    });
    const job: Job = { id, cmd: script.alias, argv, owner, run, read: { stdin: 0, stdout: 0, stderr: 0 } };
    this.jobs.set(id, job);
    live.add(run.child);
    void run.finished
      .then(
        () => setTimeout(() => this.jobs.delete(id), this.opts.retentionMs).unref(),
        () => this.jobs.delete(id),
      )
      .finally(() => live.delete(run.child));
    return job;
  }

  /** The job if `userId` may see it (its owner, or an admin). */
  get(id: string, userId: string, isAdmin: boolean): Job | undefined {
    const job = this.jobs.get(id);
    return job && (isAdmin || job.owner === userId) ? job : undefined;
  }

  list(): Job[] {
    return [...this.jobs.values()];
  }

  /** What is new since the last read of this job (then marked read). */
  static takeNew(job: Job): { stdin: string[]; stdout: string[]; stderr: string[] } {
    const out = { stdin: [] as string[], stdout: [] as string[], stderr: [] as string[] };
    for (const stream of ['stdin', 'stdout', 'stderr'] as const) {
      const chunks = job.run.context[stream];
      const dropped = job.run.dropped[stream];
      out[stream] = chunks.slice(Math.max(0, job.read[stream] - dropped));
      job.read[stream] = dropped + chunks.length;
    }
    return out;
  }
}
