/**
 * TypeScript for app files, only when an app needs it. svc itself runs compiled (dist/); an app root may
 * still hold `svc.config.ts`, TypeScript plugins or seeds, or list a plugin package whose entry is
 * TypeScript (the CLI connector's workspace package). Then tsx's loader is registered once, before the
 * first such file is imported; an app of plain JavaScript never loads it. Running from the sources
 * (tsx, vitest), TypeScript is already handled and this does nothing.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

const fromSources = import.meta.url.endsWith('.ts');
/** Bun and Deno load TypeScript themselves (docs/runtimes.md): no loader to register. */
const nativeTypeScript = 'Bun' in globalThis || 'Deno' in globalThis;
let registered = false;

const isTypeScript = (file: string) => /\.(c|m)?tsx?$/.test(file) && !file.endsWith('.d.ts');
const isCode = (file: string) => isTypeScript(file) || /\.(c|m)?js$/.test(file);

/**
 * Code files (JavaScript or TypeScript) an app root brings: its config file, and anything under config/
 * and `pluginsDir` (its plugins/, or none when that folder is svc's own: `appPluginsDir` of the loader).
 */
export function appCodeFiles(appRoot: string, pluginsDir: string | undefined): string[] {
  const found: string[] = [];
  for (const name of ['svc.config.ts', 'svc.config.js']) {
    if (existsSync(path.join(appRoot, name))) found.push(path.join(appRoot, name));
  }
  const walk = (dir: string, depth: number) => {
    if (depth > 4 || !existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full, depth + 1);
      else if (isCode(entry.name)) found.push(full);
    }
  };
  if (pluginsDir) walk(pluginsDir, 0);
  walk(path.join(appRoot, 'config'), 0);
  return found;
}

/** Whether this process registered tsx for app files (compiled svc only). */
export const typeScriptRegistered = () => registered;

/** Registers tsx's loader if any of `files` is TypeScript; returns whether TypeScript is available. */
export async function typeScriptFor(files: string[]): Promise<boolean> {
  if (fromSources || nativeTypeScript || registered) return true;
  if (!files.some(isTypeScript)) return false;
  // Both: a `.ts` file in a folder without `"type": "module"` is CommonJS to Node, which tsx hooks apart.
  const [esm, cjs] = await Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]);
  esm.register();
  cjs.register();
  registered = true;
  return true;
}

/**
 * What `import()` of an app file gives as its default export. A TypeScript (or Babel-style) module that
 * Node loads as CommonJS carries `export default` as `module.exports.default` beside `__esModule`, while
 * Node hands the whole `module.exports` over as `default`: unwrap that one level.
 */
export function defaultExport(mod: { default?: unknown }): unknown {
  const value = mod.default;
  if (typeof value === 'object' && value !== null && (value as { __esModule?: unknown }).__esModule === true && 'default' in value) {
    return (value as { default: unknown }).default;
  }
  return value;
}

/** Named exports of such a module, the same way (`export const seeds` of a plugin). */
export function namedExport(mod: Record<string, unknown>, name: string): unknown {
  if (name in mod) return mod[name];
  const value = mod.default;
  return typeof value === 'object' && value !== null && (value as { __esModule?: unknown }).__esModule === true ? (value as Record<string, unknown>)[name] : undefined;
}
