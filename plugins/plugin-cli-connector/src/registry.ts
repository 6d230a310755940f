/**
 * The registration API (SPEC.md "CLI connector endpoints", registration): one registry per process,
 * shared by every plugin that imports this package, so aliases are unique across plugins.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { checkLimits, checkRunAs, type ResourceLimits, type RunAs } from './limits.ts';
import { compileTemplate, placeholderCount, type CompiledTemplate, type TemplateElement } from './templates.ts';

/** The shared hook context of a job (SPEC.md): every chunk so far, as strings. Hooks may change it. */
export interface HookContext {
  stdin: string[];
  stdout: string[];
  stderr: string[];
}
/** Transforms one chunk; a string is kept (and shown), `null`/`undefined` drops the chunk. */
export type Hook = (chunk: string, context: HookContext) => string | null | undefined | void;

export interface ScriptConfig {
  /** The program: an absolute path is best (a bare name is looked up in PATH, never by a shell). */
  exe: string;
  args?: TemplateElement[];
  /**
   * Spawn options: working directory, environment, text encoding of the output. The program sees
   * only PATH, HOME, LANG and TZ of the service's environment, plus `env` (never the service's secrets).
   */
  opts?: { cwd?: string; env?: Record<string, string>; encoding?: BufferEncoding; limits?: ResourceLimits; runAs?: RunAs };
  /** `lines: true`: the stdout and stderr hooks get whole lines (a secret split across two chunks is one line again). */
  hooks?: { stdin?: Hook; stdout?: Hook; stderr?: Hook; lines?: boolean };
  /** Only admins may run it (others: 403). Mark every script that writes, deletes or takes a free argument. */
  admin?: boolean;
}

export interface Script {
  alias: string;
  exe: string;
  template: CompiledTemplate;
  argCount: number;
  cwd?: string;
  env?: Record<string, string>;
  encoding: BufferEncoding;
  /** Resource limits of its process (over the plugin's `limits`). */
  limits?: ResourceLimits;
  /** The user and group it runs as (over the plugin's `runAs`). */
  runAs?: RunAs;
  hooks: { stdin?: Hook; stdout?: Hook; stderr?: Hook };
  /** The stdout and stderr hooks see whole lines. */
  lines: boolean;
  admin: boolean;
}

/**
 * One registry per process, even when the package is loaded twice: an app plugin in a folder without
 * `"type": "module"` gets the CommonJS copy through `require`, while svc's loader imports the ESM one.
 */
const REGISTRY = Symbol.for('@svc/plugin-cli-connector/registry');
const holder = globalThis as { [REGISTRY]?: { scripts: Map<string, Script>; server: unknown } };
const registry = (holder[REGISTRY] ??= { scripts: new Map(), server: null });
const scripts = registry.scripts;

const ALIAS = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const HOOK_NAMES = ['stdin', 'stdout', 'stderr'] as const;

/** Initializes the connector with the server instance; required before registering. */
export function setupServer(instance: unknown): void {
  registry.server = instance;
}

/** Registers `alias` from a configuration object; throws naming the alias on any mistake. */
export function registerScriptByConfig(alias: string, config: ScriptConfig, baseDir = process.cwd()): void {
  if (!registry.server) throw new Error(`script "${alias}": call setupServer(instance) before registering scripts`);
  if (typeof alias !== 'string' || !ALIAS.test(alias)) throw new Error(`script "${String(alias)}": an alias is 1-64 letters, digits, '_', '.' or '-'`);
  if (scripts.has(alias)) throw new Error(`script "${alias}": this alias is already registered (aliases are unique across plugins)`);
  if (typeof config !== 'object' || config === null) throw new Error(`script "${alias}": the configuration must be an object`);
  if (typeof config.exe !== 'string' || !config.exe) throw new Error(`script "${alias}": exe must be a program path`);
  const unknown = Object.keys(config).filter((k) => !['exe', 'args', 'opts', 'hooks', 'admin'].includes(k));
  if (unknown.length) throw new Error(`script "${alias}": unknown keys ${unknown.join(', ')} (allowed: exe, args, opts, hooks, admin)`);
  if (config.admin !== undefined && typeof config.admin !== 'boolean') throw new Error(`script "${alias}": admin must be true or false`);
  const { lines = false, ...hooks } = config.hooks ?? {};
  if (typeof lines !== 'boolean') throw new Error(`script "${alias}": hooks.lines must be true or false`);
  for (const [name, fn] of Object.entries(hooks)) {
    if (!(HOOK_NAMES as readonly string[]).includes(name) || typeof fn !== 'function') throw new Error(`script "${alias}": hooks.${name} must be one of stdin, stdout, stderr and a function`);
    // A hook answers each chunk before the next is read: a Promise would come too late (and its rejection nowhere).
    if (fn.constructor.name === 'AsyncFunction') throw new Error(`script "${alias}": hooks.${name} is async; hooks are synchronous (return the text, or null to drop it)`);
  }
  const opts = config.opts ?? {};
  const encoding = opts.encoding ?? 'utf8';
  if (!Buffer.isEncoding(encoding)) throw new Error(`script "${alias}": opts.encoding "${String(encoding)}" is not an encoding`);
  if (opts.limits !== undefined) checkLimits(`script "${alias}": opts`, opts.limits);
  if (opts.runAs !== undefined) checkRunAs(`script "${alias}": opts`, opts.runAs);
  const template = compileTemplate(alias, config.args, baseDir);
  scripts.set(alias, {
    alias,
    exe: config.exe,
    template,
    argCount: placeholderCount(template),
    ...(opts.cwd ? { cwd: path.resolve(baseDir, opts.cwd) } : {}),
    ...(opts.env ? { env: opts.env } : {}),
    encoding,
    ...(opts.limits ? { limits: opts.limits } : {}),
    ...(opts.runAs ? { runAs: opts.runAs } : {}),
    hooks,
    lines,
    admin: config.admin ?? false,
  });
}

/**
 * Registers `alias` from a YAML or JSON file (`path` placeholders and `cwd` relative to its folder),
 * with hooks from an optional module (`export default { stdout(chunk, ctx) {...} }` or named exports).
 */
export async function registerScriptByPath(alias: string, configPath: string, hooksPath?: string): Promise<void> {
  let config: ScriptConfig;
  try {
    const text = readFileSync(configPath, 'utf8');
    config = (/\.json$/i.test(configPath) ? JSON.parse(text) : parseYaml(text)) as ScriptConfig;
  } catch (err) {
    throw new Error(`script "${alias}": cannot read ${configPath}: ${(err as Error).message}`, { cause: err });
  }
  if (hooksPath) {
    let mod: Record<string, unknown>;
    try {
      mod = (await import(pathToFileURL(hooksPath).href)) as Record<string, unknown>;
    } catch (err) {
      throw new Error(`script "${alias}": cannot load hooks ${hooksPath}: ${(err as Error).message}`, { cause: err });
    }
    const source = (typeof mod.default === 'object' && mod.default !== null ? mod.default : mod) as Record<string, unknown>;
    const hooks = Object.fromEntries(HOOK_NAMES.filter((n) => source[n] !== undefined).map((n) => [n, source[n]]));
    // `lines` may come from the hooks module (`export const lines = true`) or the config file (`hooks: {lines: true}`).
    const lines = source.lines ?? config.hooks?.lines;
    config = { ...config, hooks: { ...hooks, ...(lines !== undefined ? { lines } : {}) } as ScriptConfig['hooks'] };
  }
  registerScriptByConfig(alias, config, path.dirname(path.resolve(configPath)));
}

export const getScript = (alias: string): Script | undefined => scripts.get(alias);
export const scriptNames = (): string[] => [...scripts.keys()].sort();
