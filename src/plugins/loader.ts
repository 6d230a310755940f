import { existsSync, readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Hono } from 'hono';
import type { AppEnv } from '../http/env.ts';
import { AppError } from '../http/errors.ts';
import { pluginScopeProblem } from '../auth/api-keys.ts';
import { defineRoute, mountRoutes, routesOf } from '../http/route.ts';
import type { ServerInstance } from '../instance.ts';
import type { Logger } from '../logger.ts';
import { defaultExport, namedExport } from '../typescript.ts';

/** Compositions and interaction links a plugin contributes (SPEC.md "Landing seeds"; applied by `seeds.ts`). */
export interface PluginSeeds {
  compositions?: ({ _id: string } & Record<string, unknown>)[];
  interactionLinks?: ({ _id: string } & Record<string, unknown>)[];
}

/**
 * svc's route builder and error type, handed to every plugin: a plugin published as its own npm
 * package (the CLI connector) uses them without importing svc at run time, and its routes get the same
 * validation, error bodies and OpenAPI entries as core's.
 */
const pluginHttp = { defineRoute, mountRoutes, AppError };

/** What a plugin's factory receives: the server instance plus its own key, prefix and options. */
export interface PluginInstance extends ServerInstance {
  plugin: { key: string; prefix: string; options: unknown };
  http: typeof pluginHttp;
}

/** A plugin module: `export default (instance) => Hono | Promise<Hono>`, optional `export const seeds`. */
export interface PluginModule {
  default: (instance: PluginInstance) => Hono<AppEnv> | Promise<Hono<AppEnv>>;
  seeds?: PluginSeeds;
}

export interface LoadedPlugin {
  key: string;
  prefix: string;
  /** Where it came from, for log lines and errors. */
  source: string;
  app: Hono<AppEnv>;
  seeds?: PluginSeeds;
}

export class PluginError extends Error {
  override name = 'PluginError';
}

const KEY = /^[a-z0-9_]+$/;
/**
 * First path segments of svc's own routes: a folder plugin named so would shadow them (`plugins/docs`
 * answered `/docs`, `plugins/plugin` the package plugins' `/plugin/...`) or be unreachable (`api`: the
 * prefix every route answers under too). A test holds it to the routes the app has.
 */
export const RESERVED_PLUGIN_KEYS: readonly string[] = ['admin', 'api', 'auth', 'docs', 'health', 'openapi', 'plugin', 'socket'];
const BUNDLED = fileURLToPath(new URL('../../plugins/', import.meta.url));
/** The bundled plugins' sources: the same plugins as BUNDLED when svc runs compiled (dist/plugins/). */
const BUNDLED_SOURCES = path.resolve(BUNDLED, path.basename(path.resolve(BUNDLED, '..')) === 'dist' ? '../../plugins' : '.');

/**
 * The app's plugin folder, `<app root>/plugins/`; undefined when that is svc's own (an app root of
 * svc's checkout, as `npm start` there without SVC_APP_PATH has): those are the bundled plugins,
 * loaded as such, and a compiled svc must not take their TypeScript sources for the app's.
 */
export function appPluginsDir(appRoot: string): string | undefined {
  const dir = path.resolve(appRoot, 'plugins');
  return [BUNDLED, BUNDLED_SOURCES].some((own) => dir === path.resolve(own)) ? undefined : dir;
}

interface Candidate {
  key: string;
  prefix: string;
  source: string;
  load: () => Promise<unknown>;
  optionsKey: string;
  /** A folder plugin's entry file. */
  entry?: string;
}

const ENTRIES = ['index.ts', 'index.js'];

/**
 * The folder plugins of `dir`: each folder with an entry file. A folder without one is not loaded: an
 * npm package (a `package.json`, e.g. the CLI connector's workspace) quietly, as it is loaded by name
 * instead; any other folder with a warning, since its plugin (a `plugin.ts` for `index.ts`) would
 * otherwise be missing without a word.
 */
function folderPlugins(dir: string, logger: Logger): Candidate[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && !d.name.startsWith('.') && d.name !== 'node_modules')
    .flatMap((d) => {
      const folder = path.join(dir, d.name);
      const entry = ENTRIES.map((f) => path.join(folder, f)).find((f) => existsSync(f));
      if (!entry) {
        if (!existsSync(path.join(folder, 'package.json'))) {
          const holds = readdirSync(folder).filter((f) => /\.(c|m)?[jt]s$/.test(f));
          logger.warn({ plugin: d.name, folder }, `plugin folder "${d.name}" (${folder}) has no ${ENTRIES.join(' or ')}: not loaded${holds.length ? ` (it holds ${holds.slice(0, 5).join(', ')})` : ''}; a folder plugin's entry, which default-exports its factory, is ${ENTRIES.join(' or ')}`);
        }
        return [];
      }
      if (!KEY.test(d.name)) throw new PluginError(`plugin folder "${d.name}" (${folder}): the key must be lowercase letters, digits and underscores`);
      if (RESERVED_PLUGIN_KEYS.includes(d.name)) throw new PluginError(`plugin folder "${d.name}" (${folder}): /${d.name} belongs to svc's own routes; name the folder for your plugin (e.g. acme__${d.name}_tools)`);
      return [{ key: d.name, prefix: `/${d.name}`, source: folder, load: () => import(pathToFileURL(entry).href), optionsKey: d.name, entry }];
    });
}

/** A factory still running after this long is named in a warning. */
const SLOW_FACTORY_MS = 10_000;

/**
 * Where in a plugin folder's files an error came from (` at /app/plugins/x/index.js:3:9`), from its
 * stack: Node's messages ("Unexpected token ';'", "Cannot read properties of undefined") name no file.
 */
function locationIn(err: unknown, { source: folder, entry }: Candidate): string {
  const stack = (err as Error | undefined)?.stack ?? '';
  const escaped = folder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const found = new RegExp(`(${escaped}/[^\\s():]+:\\d+(?::\\d+)?)`).exec(stack);
  if (found) return String((err as Error).message).includes(found[1]!) ? '' : ` (at ${found[1]})`;
  // Bun says where a file does not parse in the error's `position`.
  const position = (err as { position?: { file?: string; line?: number } } | undefined)?.position;
  if (position?.file?.startsWith(`${folder}/`) && position.line) return ` (at ${position.file}:${position.line})`;
  // A JavaScript entry that does not parse: Node keeps the place out of the error's stack; its check says it.
  if (err instanceof SyntaxError && entry && /\.m?js$/.test(entry) && !('Bun' in globalThis || 'Deno' in globalThis)) {
    const checked = spawnSync(process.execPath, ['--check', entry], { encoding: 'utf8', timeout: 10_000 });
    const where = /^(?:file:\/\/)?(\/\S+:\d+)$/m.exec(checked.stderr ?? '');
    if (where) return ` (at ${where[1]})`;
  }
  return '';
}

/** `@svc/plugin-cli-connector` -> `/plugin/svc/plugin-cli-connector`; `name` -> `/plugin/name`. */
export function packagePrefix(name: string): string {
  const m = /^(?:@([a-z0-9][\w.-]*)\/)?([a-z0-9][\w.-]*)$/.exec(name);
  if (!m) throw new PluginError(`plugin package "${name}": not a valid npm package name`);
  return m[1] ? `/plugin/${m[1]}/${m[2]}` : `/plugin/${m[2]}`;
}

/** Where a plugin package's entry is: resolvable from svc itself (the workspace), else from the app root. */
export function packageEntry(name: string, appRoot: string): string {
  try {
    return fileURLToPath(import.meta.resolve(name));
  } catch {
    return createRequire(path.join(appRoot, 'package.json')).resolve(name);
  }
}

function packagePlugin(name: string, appRoot: string): Candidate {
  const prefix = packagePrefix(name);
  return {
    key: name,
    prefix,
    source: `npm package ${name}`,
    optionsKey: name,
    load: () => import(pathToFileURL(packageEntry(name, appRoot)).href),
  };
}

/** The keys of the bundled plugins (`svc__todo`, `svc__cache`), for `svc doctor`. */
export function bundledPluginKeys(): string[] {
  if (!existsSync(BUNDLED)) return [];
  return readdirSync(BUNDLED, { withFileTypes: true })
    .filter((d) => d.isDirectory() && ENTRIES.some((f) => existsSync(path.join(BUNDLED, d.name, f))))
    .map((d) => d.name)
    .sort();
}

/**
 * The bundled demo plugins (`svc__todo`, `svc__cache`) an app gets: those its `plugins` list names; when
 * it names none, all of them in development (as ever, said in one line) and none in production, so a
 * demo never reaches a production service by accident.
 */
function bundledToLoad(bundled: Candidate[], listed: string[], production: boolean, logger: Logger): Candidate[] {
  const chosen = bundled.filter((c) => listed.includes(c.key));
  if (chosen.length || bundled.length === 0) return chosen;
  const keys = bundled.map((c) => c.key).join(', ');
  if (production) {
    logger.info({ plugins: bundled.map((c) => c.key) }, `bundled demo plugins not loaded (NODE_ENV=production): ${keys}; list the ones you want in "plugins" of the app config`);
    return [];
  }
  logger.info({ plugins: bundled.map((c) => c.key) }, `bundled demo plugins loaded (development): ${keys}; list the ones you want in "plugins" of the app config to load only those, and with NODE_ENV=production none load unless listed`);
  return bundled;
}

/**
 * Finds, validates and builds every plugin: bundled folders (`plugins/` of svc), the app's folders
 * (`<app root>/plugins/`), and npm packages listed in `plugins` of the app config. Any problem stops
 * start-up with a message naming the plugin.
 */
export async function loadPlugins(instance: ServerInstance): Promise<LoadedPlugin[]> {
  const { appRoot } = instance.config.env;
  const appDir = appPluginsDir(appRoot);
  const bundled = folderPlugins(BUNDLED, instance.logger);
  const bundledKeys = new Set(bundled.map((c) => c.key));
  const candidates = [
    ...bundledToLoad(bundled, instance.config.plugins, instance.config.env.production, instance.logger),
    ...(appDir ? folderPlugins(appDir, instance.logger) : []),
    ...instance.config.plugins.filter((name) => !bundledKeys.has(name)).map((name) => packagePlugin(name, appRoot)),
  ];
  const seen = new Map<string, string>();
  for (const c of candidates) {
    const other = seen.get(c.prefix);
    if (other) throw new PluginError(`plugin "${c.key}" is defined twice: ${other} and ${c.source}`);
    seen.set(c.prefix, c.source);
  }

  const loaded: LoadedPlugin[] = [];
  for (const c of candidates) {
    try {
      const mod = (await c.load()) as Record<string, unknown>;
      const factory = defaultExport(mod) as PluginModule['default'] | undefined;
      if (typeof factory !== 'function') throw new Error('its module has no default export (instance) => Hono');
      const options = instance.config.pluginOptions[c.optionsKey];
      // A factory that waits for something that never comes would hold start-up without a word.
      const slow = setTimeout(() => instance.logger.warn({ plugin: c.key }, `plugin "${c.key}" has not finished loading after ${SLOW_FACTORY_MS / 1000} s: start-up waits for its factory`), SLOW_FACTORY_MS);
      let app: Awaited<ReturnType<typeof factory>>;
      try {
        // The scopes it gives `authenticate({scopes})` are checked as it declares them, those of its `defineRoute`s below.
        app = await instance.auth.apiKeys.whileLoading(c.key, async () => factory({ ...instance, http: pluginHttp, plugin: { key: c.key, prefix: c.prefix, options } }));
      } finally {
        clearTimeout(slow);
      }
      if (typeof app?.fetch !== 'function' || !Array.isArray(app.routes)) {
        throw new Error('its factory did not return a Hono app');
      }
      for (const scope of new Set(routesOf(app).flatMap((r) => r.scopes ?? []))) {
        const problem = pluginScopeProblem(c.key, scope);
        if (problem) throw new Error(problem);
      }
      loaded.push({ key: c.key, prefix: c.prefix, source: c.source, app, seeds: namedExport(mod, 'seeds') as PluginSeeds | undefined });
      instance.logger.info({ plugin: c.key, prefix: c.prefix }, 'plugin loaded');
    } catch (err) {
      const message = (err as Error).message;
      // Node 20 runs a file as CommonJS without "type": "module"; its `require` misses the resolve hook (core-import.ts).
      const hint = message.includes("Cannot find module '@svc/core'")
        ? ' (the file runs as CommonJS: add "type": "module" to the package.json of the app, or run Node 22.15 or newer)'
        : '';
      throw new PluginError(`plugin "${c.key}" (${c.source}) failed to load: ${message}${hint}${locationIn(err, c)}`, { cause: err });
    }
  }
  return loaded;
}
