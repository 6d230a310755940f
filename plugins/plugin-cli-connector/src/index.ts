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
import type { AppEnv, PluginInstance } from '../../../src/index.ts';
import { getScript, scriptNames, type Script } from './registry.ts';
import { ExecutionError, Jobs, runScript, SIGNALS, type AllowedSignal } from './runner.ts';
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
  /** A finished job is removed this long after it ends, ms. */
  jobRetention: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 60_000),
  /** Output kept per run (stdout + stderr), bytes; older chunks are dropped. */
  outputCap: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1024)), MiB),
});

const tags = ['cli-connector'];
const argsSchema = v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64 * 1024))), v.maxLength(256)), []);
const cmdParams = v.object({ cmd: v.pipe(v.string(), v.maxLength(64)) });
const idParams = v.object({ id: v.pipe(v.string(), v.maxLength(64)) });

export default function cliConnector(instance: PluginInstance): Hono<AppEnv> {
  const parsed = v.safeParse(optionsSchema, instance.plugin.options ?? {});
  if (!parsed.success) {
    throw new Error(`pluginOptions["${instance.plugin.key}"]: ${parsed.issues.map((i) => `${v.getDotPath(i) ?? ''} ${i.message}`).join('; ')}`);
  }
  const options = parsed.output;
  const { defineRoute, mountRoutes, AppError } = instance.http;
  const signedIn = instance.auth.authenticate();
  const jobs = new Jobs({ maxJobs: options.maxJobs, retentionMs: options.jobRetention, outputCap: options.outputCap });

  const script = (cmd: string): Script => {
    const found = getScript(cmd);
    if (!found) throw new AppError(404, 'script_not_found', `No script "${cmd.slice(0, 64)}" is registered`);
    return found;
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
      instance.logger.error({ plugin: instance.plugin.key, err: err.message }, 'CLI connector: a script could not be started');
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
        description: `Runtime \`args\` fill the script's placeholders in order; \`input\` goes to its stdin. Killed with SIGTERM after ${options.scriptTimeout} ms (status "SIGTERM").`,
        tags,
        params: cmdParams,
        body: v.strictObject({ args: argsSchema, input: v.optional(v.pipe(v.string(), v.maxLength(MiB))) }),
      },
      handler: async (c, { params, body }) => {
        const s = script(params.cmd);
        const result = await runScript(s, argv(s, body.args), body.input, options.scriptTimeout, options).catch(failed);
        return c.json(result);
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/run/:cmd',
      onRequest: signedIn,
      config: { optionalBody: true },
      schema: { summary: 'Start a background job', description: '201 `{"id"}`; 409 when the running jobs are at the limit.', tags, params: cmdParams, body: v.strictObject({ args: argsSchema }) },
      handler: async (c, { params, body }) => {
        const s = script(params.cmd);
        const job = await jobs.start(s, argv(s, body.args), c.get('authUser')!.userId).catch(failed);
        if (!job) throw new AppError(409, 'too_many_jobs', `${options.maxJobs} jobs are running; try again when one has ended`);
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
        description: `The output since the last call. 200 once the job has ended (\`done\`: exit status or signal), 202 while it runs. Signals: ${SIGNALS.join(', ')}. Only its owner or an admin: others 404.`,
        tags,
        params: idParams,
        body: v.strictObject({ input: v.optional(v.pipe(v.string(), v.maxLength(MiB))), signal: v.optional(v.pipe(v.string(), v.maxLength(16))) }),
      },
      handler: (c, { params, body }) => {
        const user = c.get('authUser')!;
        const job = jobs.get(params.id, user.userId, user.isAdmin);
        if (!job) throw new AppError(404, 'job_not_found', 'No such job (finished jobs are removed after a while)');
        if (body.signal !== undefined && !(SIGNALS as readonly string[]).includes(body.signal)) {
          throw new AppError(400, 'invalid_signal', `signal must be one of ${SIGNALS.join(', ')}`);
        }
        if (body.input !== undefined) job.run.write(body.input);
        if (body.signal !== undefined && job.run.done === undefined) job.run.child.kill(body.signal as AllowedSignal);
        const news = Jobs.takeNew(job);
        const done = job.run.done;
        return c.json({ ...(done !== undefined ? { done } : {}), ...news }, done !== undefined ? 200 : 202);
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/jobs',
      onRequest: instance.auth.authenticate({ admin: true }),
      schema: { summary: 'Every job (admin)', tags },
      handler: (c) => c.json(jobs.list().map((j) => ({ id: j.id, cmd: j.cmd, argv: j.argv, ...(j.run.done !== undefined ? { done: j.run.done } : {}) }))),
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
