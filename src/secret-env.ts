/**
 * Keeps the service's secrets out of its process environment as the kernel keeps it. A program svc
 * starts (a CLI connector script) runs as the same user and can read `/proc/<svc's pid>/environ`: the
 * environment svc was started with, whatever svc later deletes from `process.env` (that changes libc's
 * copy only). So when svc is started with secret-bearing variables, the entry starts itself again as a
 * worker whose environment lacks them, and hands them over a pipe (fd 3) into the worker's
 * `process.env`, where config reads them as before. The first process only waits: it forwards the
 * stop signals and ends with the worker's exit code or signal; the worker exits at once when it goes
 * (a SIGKILL to the first process ends the service as it did before the worker, scripts included).
 *
 * Not covered (docs/security.md): the first process, and whatever started svc (npm, a shell, a
 * supervisor), still hold what they were given; put secrets in `.env` (read by svc itself, never in
 * any environment) or run scripts under another uid.
 */
import { spawn } from 'node:child_process';
import { createReadStream, readSync } from 'node:fs';
import { Socket } from 'node:net';

/** Set in the worker's environment: the fd the secrets arrive on (its name is no secret). */
const FD_VARIABLE = 'SVC_SECRETS_FD';
/** What config reads as secrets (src/config/load.ts), by name. */
const NAMED = new Set([
  'SVC_ADMIN_PASSWORD',
  'CACHE_URL',
  'SVC_CACHE_URL',
  'MONGODB_URL',
  'SVC_SMTP_URL',
  'SVC_SECRET_ENCRYPTION_KEY',
  'SVC_STORE_PASSWORD',
  'SERVER_TOKEN_SECRET',
  'SVC_SERVER_TOKEN_SECRET',
]);
/** Store URLs (`SVC_STORE_<NAME>_URL`), and an app's own secrets by the words their names carry (an app's config reads them). */
const BY_PATTERN = [/^SVC_STORE_[A-Z0-9_]+_URL$/, /PASSWORD|PASSWD|SECRET|TOKEN|PRIVATE_KEY|API_KEY|ACCESS_KEY|CREDENTIAL|_DSN$/i];
/** Stop signals of a supervisor or a terminal, and the diagnostics ones (a heap report on SIGUSR2): the worker gets them. */
const FORWARDED = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGUSR2'] as const;
const DONE = Symbol.for('svc.secret-env');

export const isSecretVariable = (name: string): boolean => name !== FD_VARIABLE && (NAMED.has(name) || BY_PATTERN.some((re) => re.test(name)));

/**
 * Call first thing at start-up (bin/start.js, `main`). Returns at once when there is nothing to hide,
 * or in the worker once the secrets are in `process.env`; in the first process it never returns.
 */
export async function keepSecretsOutOfEnviron(): Promise<void> {
  const holder = globalThis as { [DONE]?: true };
  if (holder[DONE]) return;
  holder[DONE] = true;
  const fd = process.env[FD_VARIABLE];
  if (fd !== undefined) return receive(Number(fd));
  const names = Object.keys(process.env).filter(isSecretVariable);
  if (names.length === 0) return;
  const env: NodeJS.ProcessEnv = { ...process.env, [FD_VARIABLE]: '3' };
  const secrets: Record<string, string | undefined> = {};
  for (const name of names) {
    secrets[name] = env[name];
    delete env[name];
    delete process.env[name];
  }
  const worker = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { env, stdio: ['inherit', 'inherit', 'inherit', 'pipe'] });
  // One line of JSON; the pipe stays open: its end tells the worker this process is gone.
  (worker.stdio[3] as NodeJS.WritableStream).write(`${JSON.stringify(secrets)}\n`);
  for (const signal of FORWARDED) {
    // This process is not the service: a listener a preload put here (a diagnostics report on SIGUSR2)
    // would answer for it. The worker has its own.
    process.removeAllListeners(signal);
    // `process.kill`, not `worker.kill`: Deno then reports a worker that exited 0 on the signal as
    // killed by it (exit null, SIGTERM), and this process would die of the signal instead of exiting 0.
    process.on(signal, () => process.kill(worker.pid!, signal));
  }
  worker.once('error', (err) => {
    process.stderr.write(`svc failed to start: ${err.message}\n`);
    process.exit(1);
  });
  worker.once('exit', (code, signal) => {
    if (code !== null) process.exit(code);
    // Ended by a signal: so does this process (its parent sees what happened).
    process.removeAllListeners(signal!);
    process.kill(process.pid, signal!);
  });
  await new Promise(() => {}); // the worker is the service now; this process only waits for it
}

/** The worker: the secrets into `process.env` (libc's copy: the kernel's stays as exec gave it). */
function receive(fd: number): void {
  delete process.env[FD_VARIABLE];
  // Read up to the line's end, synchronously (nothing may read the environment before): the child's
  // end of the pipe is blocking until handed to the event loop below.
  const chunks: Buffer[] = [];
  const buffer = Buffer.alloc(64 * 1024);
  for (let n; !chunks.at(-1)?.includes(10) && (n = readSync(fd, buffer)) > 0; ) chunks.push(Buffer.from(buffer.subarray(0, n)));
  const secrets = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, string>;
  for (const [name, value] of Object.entries(secrets)) process.env[name] = value;
  // The pipe ends when the first process goes (a SIGKILL, a crash): the service ends with it, as that
  // process would have (no graceful stop: a SIGKILL means now, and a crash test expects a crash), and
  // `exit` handlers still end every script (plugin-cli-connector's runner), so nothing serves on as an orphan.
  // Bun's net.Socket never sees the end of a pipe handed over as an fd (Bun 1.4: the orphaned worker
  // served on); a file stream there does, read without blocking. Not on Node: its file streams read in
  // libuv's pool, and a pipe's read would hold one of its four threads for good.
  const pipe = process.versions.bun ? createReadStream('', { fd }) : new Socket({ fd, readable: true, writable: false });
  if (pipe instanceof Socket) pipe.unref();
  pipe.on('data', () => {});
  pipe.once('close', () => {
    process.stderr.write('svc: the process that started this worker is gone: exiting now\n');
    process.exit(137);
  });
}
