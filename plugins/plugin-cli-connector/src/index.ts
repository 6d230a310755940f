/**
 * @svc/plugin-cli-connector: runs pre-registered programs over HTTP (SPEC.md "CLI connector
 * endpoints", CONTRACT section 8), mounted at `/plugin/svc/plugin-cli-connector` when an app lists
 * the package in `plugins`. Scripts are registered from an app plugin's factory:
 *
 * ```ts
 * import { setupServer, registerScriptByConfig } from '@svc/plugin-cli-connector';
 * export default (instance) => {
 *   setupServer(instance);
 *   registerScriptByConfig('disk-usage', { exe: '/usr/bin/du', args: ['-s', { path: '/srv/data' }] });
 *   return new Hono();
 * };
 * ```
 *
 * It takes svc's route builder and error type from the instance (`instance.http`), so the package
 * needs nothing of svc at run time (its svc imports are types only).
 */
import { Hono } from 'hono';
import * as v from 'valibot';
import type { AppEnv, PluginInstance } from '@svc/core';
import { getScript, scriptNames, type Script } from './registry.ts';
import { ExecutionError, Jobs, MAX_INPUT_BYTES, Runner, SIGNALS, Slots, type AllowedSignal } from './runner.ts';
import { checkLimits, LIMIT_KEYS, type ResourceLimits } from './limits.ts';
import { ArgumentError, buildArgv } from './templates.ts';

export { registerScriptByConfig, registerScriptByPath, setupServer, type Hook, type HookContext, type ScriptConfig } from './registry.ts';
export type { Placeholder, TemplateElement } from './templates.ts';

const MiB = 1024 * 1024;

/** `pluginOptions["@svc/plugin-cli-connector"]` (CONTRACT section 8 defaults). */
const optionsSchema = v.strictObject({
  /** `/script/:cmd` timeout, ms. */
  scriptTimeout: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 2000),
  /** Background jobs running at once; one more is 409. */
  maxJobs: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 10),
  /** Background jobs one user may have running; one more is 409 (one user's jobs never block the others). */
  maxJobsPerUser: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 3),
  /** `/script` calls running at once, in all; one more is 429. */
  maxScripts: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 10),
  /** `/script` calls one user may have running; one more is 429. */
  maxScriptsPerUser: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 3),
  /** A finished job is removed this long after it ends, ms. */
  jobRetention: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 60_000),
  /** Jobs and `/script` calls admins may run beyond `maxJobs` / `maxScripts`: users filling the caps never lock the admins out. */
  adminReserve: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 2),
  /** Finished jobs kept per user (each holds up to `outputCap` until read); past it, the oldest goes. */
  maxFinishedJobsPerUser: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 10),
  /** Resource limits of every script's process (`cpuSeconds`, `memoryBytes`, `processes`: limits.ts); a script's `opts.limits` win. */
  limits: v.optional(v.record(v.picklist(LIMIT_KEYS), v.pipe(v.number(), v.integer(), v.minValue(1)))),
  /** The user and group every script runs as (svc must be root or hold CAP_SETUID/CAP_SETGID); a script's `opts.runAs` wins. */
  runAs: v.optional(v.strictObject({ uid: v.pipe(v.number(), v.integer(), v.minValue(0)), gid: v.pipe(v.number(), v.integer(), v.minValue(0)) })),
  /** Output kept per run (stdout + stderr), bytes; older chunks are dropped. */
  outputCap: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1024)), MiB),
});

const tags = ['cli-connector'];
const argsSchema = v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64 * 1024))), v.maxLength(256)), []);
// No length rule: an alias or job id that cannot exist is simply not there, 404 (Node bounds the request line).
const cmdParams = v.object({ cmd: v.string() });
const idParams = v.object({ id: v.string() });
/** How often the owners of running jobs are looked up: a deleted user's jobs end (on whichever instance runs them). */
const OWNER_CHECK_MS = 2000;

export default function cliConnector(instance: PluginInstance): Hono<AppEnv> {
  const parsed = v.safeParse(optionsSchema, instance.plugin.options ?? {});
  if (!parsed.success) {
    throw new Error(`pluginOptions["${instance.plugin.key}"]: ${parsed.issues.map((i) => `${v.getDotPath(i) ?? ''} ${i.message}`).join('; ')}`);
  }
  const options = parsed.output;
  const { defineRoute, mountRoutes, AppError } = instance.http;
  const signedIn = instance.auth.authenticate();
  const resources: ResourceLimits | undefined = options.limits;
  if (resources) checkLimits(`pluginOptions["${instance.plugin.key}"]`, resources);
  const runner = new Runner({ outputCap: options.outputCap, ...(resources ? { resources } : {}), ...(options.runAs ? { runAs: options.runAs } : {}) }, (s, hook, err) => {
    // The error's name and frames, not its message: a hook's message may quote the output it choked on.
    const { name, stack = '' } = err instanceof Error ? err : new Error(String(err));
    instance.logger.error({ plugin: instance.plugin.key, script: s.alias, hook, err: { name, stack: stack.split('\n').slice(1).join('\n') } }, 'CLI connector: a hook threw; its run was stopped');
  });
  const jobs = new Jobs(runner, { maxJobs: options.maxJobs, maxJobsPerUser: options.maxJobsPerUser, adminReserve: options.adminReserve, retentionMs: options.jobRetention, maxFinishedPerUser: options.maxFinishedJobsPerUser });
  const scripts = new Slots(options.maxScriptsPerUser, options.maxScripts, options.adminReserve);
  // A deleted user's jobs end: the deletion may happen on any instance, so the database is asked (one
  // lookup per owner of a running job, at most maxJobs), not an event of this process.
  let checking = false;
  const ownerCheck = setInterval(() => {
    if (checking) return;
    checking = true;
    void (async () => {
      for (const owner of jobs.runningOwners()) {
        if (await instance.auth.users.findById(owner)) continue;
        const ended = jobs.endOwnedBy(owner);
        if (ended.length) instance.logger.warn({ plugin: instance.plugin.key, userId: owner, jobs: ended }, 'CLI connector: the jobs of a deleted user were ended');
      }
    })()
      .catch((err: unknown) => instance.logger.warn({ plugin: instance.plugin.key, err }, 'CLI connector: the owners of running jobs could not be checked'))
      .finally(() => (checking = false));
  }, OWNER_CHECK_MS).unref();
  // No script outlives the service: its shutdown kills every process group still running.
  instance.onClose(() => {
    clearInterval(ownerCheck);
    const killed = runner.killAll();
    if (killed.length) instance.logger.warn({ plugin: instance.plugin.key, scripts: killed }, `CLI connector: ${killed.length} running script(s) killed at shutdown`);
  });

  /** The script `cmd`, if this user may run it (`admin: true` scripts: admins only). */
  const script = (cmd: string, user: { isAdmin: boolean }): Script => {
    const found = getScript(cmd);
    if (!found) throw new AppError(404, 'not_found', `No script "${cmd.slice(0, 64)}" is registered`);
    if (found.admin && !user.isAdmin) throw new AppError(403, 'forbidden', `Only admins may run "${found.alias}"`);
    return found;
  };
  /** Refuses input that would take a run past MAX_INPUT_BYTES in all. */
  const inputFits = (already: number, input: string | undefined): void => {
    if (input !== undefined && already + Buffer.byteLength(input) > MAX_INPUT_BYTES) {
      throw new AppError(413, 'payload_too_large', `A run takes at most ${MAX_INPUT_BYTES} bytes of input in all`);
    }
  };
  const argv = (s: Script, args: string[]): string[] => {
    try {
      return buildArgv(s.template, args);
    } catch (err) {
      if (err instanceof ArgumentError) throw new AppError(400, 'invalid_arguments', `${s.alias}: ${err.message}`);
      throw err;
    }
  };
  const failed = (err: unknown): never => {
    if (err instanceof ExecutionError) {
      instance.logger.error({ plugin: instance.plugin.key, err: err.message }, 'CLI connector: a script failed');
      throw new AppError(500, 'execution_failed', err.message);
    }
    throw err;
  };

  const app = new Hono<AppEnv>();
  mountRoutes(app, [
    defineRoute({
      method: 'POST',
      path: '/script/:cmd',
      onRequest: signedIn,
      config: { optionalBody: true },
      schema: {
        summary: 'Run a short script to the end',
        description:
          `Runtime \`args\` fill the script's placeholders in order; \`input\` (at most 1 MiB) goes to its stdin. Its process group is killed with SIGTERM after ${options.scriptTimeout} ms (status "SIGTERM"). ` +
          `403 for an admin-only script; 429 \`too_many_jobs\` when ${options.maxScriptsPerUser} of the caller's calls (${options.maxScripts} in all, ${options.maxScripts + options.adminReserve} for an admin) are running.`,
        tags,
        params: cmdParams,
        body: v.strictObject({ args: argsSchema, input: v.optional(v.string()) }),
      },
      handler: async (c, { params, body }) => {
        const user = c.get('authUser')!;
        const s = script(params.cmd, user);
        inputFits(0, body.input);
        if (!scripts.take(user.userId, user.isAdmin)) throw new AppError(429, 'too_many_jobs', `Too many scripts are running (${options.maxScriptsPerUser} per user, ${options.maxScripts} in all); try again when one has ended`);
        try {
          return c.json(await runner.script(s, argv(s, body.args), body.input, options.scriptTimeout).catch(failed));
        } finally {
          scripts.release(user.userId);
        }
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/run/:cmd',
      onRequest: signedIn,
      config: { optionalBody: true },
      schema: {
        summary: 'Start a background job',
        description: `201 \`{"id"}\`; 403 for an admin-only script; 409 when ${options.maxJobsPerUser} of the caller's jobs (${options.maxJobs} in all, ${options.maxJobs + options.adminReserve} for an admin) are running.`,
        tags,
        params: cmdParams,
        body: v.strictObject({ args: argsSchema }),
      },
      handler: async (c, { params, body }) => {
        const user = c.get('authUser')!;
        const s = script(params.cmd, user);
        const job = await jobs.start(s, argv(s, body.args), user.userId, user.isAdmin).catch(failed);
        if (!job) throw new AppError(409, 'too_many_jobs', `Too many jobs are running (${options.maxJobsPerUser} per user, ${options.maxJobs} in all); try again when one has ended`);
        return c.json({ id: job.id }, 201);
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/job/:id',
      onRequest: signedIn,
      config: { optionalBody: true },
      schema: {
        summary: 'Send input or a signal to a job, and read its new output',
        description:
          `The output since the last call (\`stdin\`: what this call wrote; input is not kept). 200 once the job has ended (\`done\`: exit status or signal), 202 while it runs. ` +
          `Signals (to the job's whole process group): ${SIGNALS.join(', ')}; any other value is 400 \`invalid_signal\`. Input: at most 1 MiB per job in all (413). Only its owner or an admin: others 404; a job of an admin-only script: 403 to a caller who is no longer an admin.`,
        tags,
        params: idParams,
        // `signal` of any JSON type: what is not an allowed name (9, null, "sigterm") is 400 invalid_signal (CONTRACT 8).
        body: v.strictObject({ input: v.optional(v.string()), signal: v.optional(v.pipe(v.unknown(), v.description(`One of ${SIGNALS.join(', ')}`))) }),
      },
      handler: (c, { params, body }) => {
        const user = c.get('authUser')!;
        const job = jobs.get(params.id, user.userId, user.isAdmin);
        if (!job) throw new AppError(404, 'not_found', 'No such job here (finished jobs are removed after a while, and a job is known only to the svc instance that started it)');
        // The admin rule holds for every call, not only at /run: an admin demoted since no longer drives it.
        if (job.admin && !user.isAdmin) throw new AppError(403, 'forbidden', `Only admins may use a job of "${job.cmd}"`);
        if (body.signal !== undefined && !(SIGNALS as readonly unknown[]).includes(body.signal)) {
          throw new AppError(400, 'invalid_signal', `signal must be one of ${SIGNALS.join(', ')}`);
        }
        inputFits(job.run.inputBytes, body.input);
        const written = body.input !== undefined ? job.run.write(body.input) : undefined;
        if (body.signal !== undefined) job.run.signal(body.signal as AllowedSignal);
        const news = Jobs.takeNew(job);
        const done = job.run.done;
        return c.json({ ...(done !== undefined ? { done } : {}), stdin: written ? [written] : [], ...news }, done !== undefined ? 200 : 202);
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/jobs',
      onRequest: instance.auth.authenticate({ admin: true }),
      schema: { summary: 'Every job (admin)', description: '`outputBytes`: the output svc keeps for it (a finished job read to its end keeps none).', tags },
      handler: (c) => c.json(jobs.list().map((j) => ({ id: j.id, cmd: j.cmd, argv: j.argv, owner: j.owner, outputBytes: j.run.outputBytes, ...(j.run.done !== undefined ? { done: j.run.done } : {}) }))),
    }),
    defineRoute({
      method: 'GET',
      path: '/scripts',
      onRequest: signedIn,
      schema: { summary: 'Registered script aliases', tags },
      handler: (c) => c.json(scriptNames()),
    }),
  ]);
  return app;
}
