/**
 * `@svc/core` in an app's files is the running svc. Left to Node, the name resolves by the package's
 * `exports` (`./src/index.ts`) or not at all: the compiled service (`dist/`) then loaded a second copy of
 * the sources for a plugin, whose `AppError`s its error handler did not know (a plugin's 404 became 500)
 * and whose routes never reached the public-route list or `/openapi.json`; an app outside svc's folder
 * could not import it at all. So the name resolves to this build's own entry, wherever the app lives:
 * for `import` through a module resolve hook, and for `require` (an app file Node runs as CommonJS, from a
 * folder whose package.json lacks `"type": "module"`) by the CommonJS cache holding that entry already,
 * as this process loaded it. `require` finds the name outside svc's folder only where Node has
 * `registerHooks` (22.15+): there one in-thread hook serves both. Before that, `module.register` runs
 * hooks on a thread of their own (about 11 MB of RSS), so there it is registered only when the app
 * brings code that could import the name.
 */
import * as nodeModule from 'node:module';
import { fileURLToPath } from 'node:url';
import * as core from './index.ts';

type SyncResolve = (specifier: string, context: unknown, next: (specifier: string, context: unknown) => unknown) => unknown;

const HOOKS = `
let target;
export function initialize(data) { target = data.target; }
export function resolve(specifier, context, next) {
  return specifier === '@svc/core' ? { url: target, shortCircuit: true } : next(specifier, context);
}`;

// Once per process: vitest evaluates this module once per test file in the same process. 'entry': the
// cache entry is filled, the hook not yet registered (Node < 22.15, no app code so far); 'hook': both.
const done = Symbol.for('svc.coreImport');

/**
 * Registers the hook (after tsx's, so it runs first) and fills the cache entry, once per process.
 * `appCode`: whether the app brings code of its own (plugins, config or seed files, plugin packages).
 */
export function resolveCoreToThisBuild(appCode: boolean): void {
  const scope = globalThis as { [done]?: 'entry' | 'hook' };
  if (scope[done] === 'hook' || (scope[done] === 'entry' && !appCode)) return;
  const target = new URL(import.meta.url.endsWith('.ts') ? './index.ts' : './index.js', import.meta.url).href;
  if (!scope[done]) {
    const file = fileURLToPath(target);
    const entry = new nodeModule.Module(file);
    Object.assign(entry, { filename: file, loaded: true, exports: core });
    nodeModule.createRequire(import.meta.url).cache[file] = entry;
  }
  const { registerHooks } = nodeModule as { registerHooks?: (hooks: { resolve: SyncResolve }) => unknown };
  if (registerHooks) {
    registerHooks({ resolve: (specifier, context, next) => (specifier === '@svc/core' ? { url: target, shortCircuit: true } : next(specifier, context)) });
  } else if (appCode) {
    nodeModule.register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, { data: { target } });
  }
  scope[done] = registerHooks || appCode ? 'hook' : 'entry';
}
