/**
 * socket.io's engine for Web-standard servers (@socket.io/bun-engine), as each runtime can load it.
 * Bun loads the package as it is. Deno, like Node, refuses its extensionless relative imports
 * (`export { Server } from "./server"`), which only Bun resolves: there esbuild (tsx's, already
 * installed) bundles the package into one module at start (~0.1 s), loaded from memory.
 *
 * Its types are declared here, as far as svc uses them: the package's own name Bun's global types,
 * which an app on @svc/core that type-checks (`skipLibCheck: false`) would otherwise need too.
 */
import { createRequire } from 'node:module';

/** The engine (`Server` of @socket.io/bun-engine). */
export interface SocketEngine {
  /** Answers a polling request, or upgrades to a WebSocket through `server.upgrade` (Bun's, or `denoUpgrades`). */
  handleRequest(request: Request, server: unknown): Promise<Response>;
  /** The WebSocket handlers for `Bun.serve`. */
  handler(): { websocket: unknown };
  onWebSocketOpen(ws: unknown): void;
  onWebSocketMessage(ws: unknown, message: string | Buffer): void;
  onWebSocketClose(ws: unknown, code: number, reason: string): void;
  close(): void;
}

export interface SocketEngineOptions {
  path: string;
  allowRequest(request: Request): Promise<void>;
  cors?: { origin: string[]; credentials: boolean };
  editResponseHeaders(headers: Headers): void;
}

type EngineModule = { Server: new (options: SocketEngineOptions) => SocketEngine };

export async function loadSocketEngine(): Promise<EngineModule> {
  if (!('Deno' in globalThis)) return (await import('@socket.io/bun-engine')) as unknown as EngineModule;
  const { build } = await import('esbuild');
  const entry = createRequire(import.meta.url).resolve('@socket.io/bun-engine');
  const { outputFiles } = await build({ entryPoints: [entry], bundle: true, format: 'esm', platform: 'node', write: false, logLevel: 'silent' });
  return (await import(`data:text/javascript;base64,${Buffer.from(outputFiles[0]!.text).toString('base64')}`)) as EngineModule;
}
