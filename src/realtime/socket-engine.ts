/**
 * socket.io's engine for Web-standard servers (@socket.io/bun-engine), as each runtime can load it.
 * Bun loads the package as it is. Deno, like Node, refuses its extensionless relative imports
 * (`export { Server } from "./server"`), which only Bun resolves: there esbuild (tsx's, already
 * installed) bundles the package into one module at start (~0.1 s), loaded from memory.
 */
import { createRequire } from 'node:module';

type EngineModule = typeof import('@socket.io/bun-engine');

export async function loadSocketEngine(): Promise<EngineModule> {
  if (!('Deno' in globalThis)) return import('@socket.io/bun-engine');
  const { build } = await import('esbuild');
  const entry = createRequire(import.meta.url).resolve('@socket.io/bun-engine');
  const { outputFiles } = await build({ entryPoints: [entry], bundle: true, format: 'esm', platform: 'node', write: false, logLevel: 'silent' });
  return (await import(`data:text/javascript;base64,${Buffer.from(outputFiles[0]!.text).toString('base64')}`)) as EngineModule;
}
