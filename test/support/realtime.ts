// Helpers for the realtime suites: svc started in-process on a real port (startServer, as
// `npm start` does), real socket.io clients, and waiting for conditions with generous deadlines.

import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { io, type ManagerOptions, type Socket, type SocketOptions } from 'socket.io-client';
import { createLogger } from '../../src/logger.ts';
import { startServer, type RunningServer } from '../../src/server.ts';

export interface InstanceOptions {
  /** Redis URL; unset: the embedded store (one instance only). */
  redisUrl?: string;
  /** MongoDB URL; unset: the embedded database in a temp folder. */
  mongoUrl?: string;
  /** App root (svc.config.json, plugins, config/); default: a fresh one with `config`. */
  appRoot?: string;
  config?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Receives the instance's log lines (JSON, level warn and up). */
  logs?: string[];
}

/** A fresh app root holding `svc.config.json` (with the given config) and any extra files. */
export function makeAppRoot(config: Record<string, unknown> = {}, files: Record<string, string> = {}, parent = tmpdir()): string {
  mkdirSync(parent, { recursive: true });
  const root = mkdtempSync(path.join(parent, 'svc-rt-'));
  writeFileSync(path.join(root, 'svc.config.json'), JSON.stringify(config));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  return root;
}

/** A key prefix of the suite's own, so suites sharing one Redis (and its pub/sub) never meet. */
export const uniquePrefix = () => `svctest:${randomUUID().slice(0, 8)}:auth:`;

/** svc in this process on a free port, as `npm start` runs it (socket.io attached). */
export async function startInstance(opts: InstanceOptions = {}): Promise<RunningServer> {
  const appRoot = opts.appRoot ?? makeAppRoot(opts.config);
  const env: NodeJS.ProcessEnv = {
    PORT: '0',
    HOST: '127.0.0.1',
    SVC_APP_PATH: appRoot,
    SVC_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'svc-rt-data-')),
    LOG_LEVEL: 'error',
    ...(opts.redisUrl ? { CACHE_URL: opts.redisUrl } : {}),
    ...(opts.mongoUrl ? { MONGODB_URL: opts.mongoUrl } : {}),
    ...opts.env,
  };
  const logs = opts.logs;
  const logger = logs ? createLogger('warn', { write: (line: string) => void logs.push(line) }) : createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  return startServer(env, logger);
}

export type ClientOptions = Partial<ManagerOptions & SocketOptions> & { cookie?: string; namespace?: string };

/** A socket.io client that has not connected yet (listeners can be added first); `connected()` waits. */
export function client(url: string, opts: ClientOptions = {}): Socket {
  const { cookie, namespace = '/', ...rest } = opts;
  return io(`${url}${namespace}`, {
    path: '/socket.io',
    reconnection: false,
    forceNew: true,
    timeout: 10_000,
    ...(cookie ? { extraHeaders: { cookie } } : {}),
    ...rest,
  });
}

export interface ConnectError extends Error {
  data?: { code?: string };
}

/** Resolves when the socket connects; rejects with the `connect_error` (`err.data.code`). */
export function connected(socket: Socket): Promise<Socket> {
  return new Promise((resolve, reject) => {
    if (socket.connected) return resolve(socket);
    socket.once('connect', () => resolve(socket));
    socket.once('connect_error', (err) => reject(err));
  });
}

/** The `connect_error` of a socket that must be refused (fails when it connects instead). */
export async function refusal(socket: Socket): Promise<ConnectError> {
  try {
    await connected(socket);
  } catch (err) {
    return err as ConnectError;
  } finally {
    socket.close();
  }
  throw new Error('the handshake was accepted');
}

/** Resolves with the time (ms since epoch) the socket disconnects and the reason. */
export function disconnection(socket: Socket): Promise<{ at: number; reason: string }> {
  return new Promise((resolve) => {
    if (!socket.connected) return resolve({ at: Date.now(), reason: 'not connected' });
    socket.once('disconnect', (reason) => resolve({ at: Date.now(), reason }));
  });
}

/** The first payload of `event`, or a rejection after `timeoutMs`. */
export function nextEvent<T = unknown>(socket: Socket, event: string, timeoutMs = 10_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "${event}" within ${timeoutMs} ms`)), timeoutMs);
    socket.once(event, (payload: T) => {
      clearTimeout(timer);
      resolve(payload);
    });
  });
}

/** Logs in over HTTP and returns the `name=value` cookie pair. */
export async function loginCookie(url: string, email: string, password: string): Promise<string> {
  const res = await fetch(`${url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${await res.text()}`);
  return res.headers.getSetCookie()[0]!.split(';')[0]!;
}

/** JSON over HTTP with a cookie (no Origin: a non-browser client). */
export async function call(url: string, method: string, p: string, cookie: string, json?: unknown): Promise<Response> {
  return fetch(`${url}${p}`, {
    method,
    headers: { cookie, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: json !== undefined ? JSON.stringify(json) : undefined,
  });
}
