// Helpers for the auth suites (sessions, login, users/admin): cookie parsing, a response recorder
// that lets a suite prove no body ever leaked a secret, direct store inspection, and a private
// redis-server for tests that count store commands (the shared Redis has other suites' traffic).

import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import type { Store } from '../../src/store/store.ts';
import type { TestApp, TestClient } from './app.ts';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const sha256hex = (s: string) => createHash('sha256').update(s).digest('hex');
export const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const SESSION_ID_RE = /^[A-Za-z0-9_-]{43}$/;

export interface ParsedCookie {
  name: string;
  value: string;
  /** Attribute names lowercased -> value ('' for flags). */
  attrs: Map<string, string>;
}

export function parseSetCookie(line: string): ParsedCookie {
  const [pair, ...rest] = line.split(';').map((s) => s.trim());
  const eq = pair!.indexOf('=');
  const attrs = new Map<string, string>();
  for (const a of rest) {
    if (!a) continue;
    const i = a.indexOf('=');
    attrs.set((i < 0 ? a : a.slice(0, i)).toLowerCase(), i < 0 ? '' : a.slice(i + 1));
  }
  return { name: pair!.slice(0, eq), value: pair!.slice(eq + 1), attrs };
}

/** The Set-Cookie lines of a response for one cookie name. */
export function setCookies(res: Response, name: string): ParsedCookie[] {
  return res.headers
    .getSetCookie()
    .map(parseSetCookie)
    .filter((c) => c.name === name);
}

/**
 * Records every response body a suite sees and every session id handed out in Set-Cookie, so one
 * test at the end can prove no body contained a password hash or a session id.
 */
export class ResponseLog {
  readonly bodies: { path: string; status: number; text: string }[] = [];
  readonly sessionIds = new Set<string>();

  /** Wraps a client: its responses (login included) are recorded. */
  wrap(client: TestClient, cookieName: string): TestClient {
    const inner = client.fetch.bind(client);
    client.fetch = async (path, init) => {
      const res = await inner(path, init);
      await this.record(path, res, cookieName);
      return res;
    };
    return client;
  }

  async record(path: string, res: Response, cookieName: string): Promise<void> {
    this.bodies.push({ path, status: res.status, text: await res.clone().text() });
    for (const c of setCookies(res, cookieName)) if (c.value) this.sessionIds.add(decodeURIComponent(c.value));
  }

  /** Bodies that contain any of the forbidden strings (password hashes, session ids). */
  leaks(): { path: string; status: number; needle: string }[] {
    const needles = ['passwordHash', '$argon2', ...this.sessionIds];
    const found: { path: string; status: number; needle: string }[] = [];
    for (const b of this.bodies) for (const n of needles) if (b.text.includes(n)) found.push({ path: b.path, status: b.status, needle: n });
    return found;
  }
}

/** The session cookie a client holds now. */
export function sessionCookie(t: TestApp, client: TestClient): string | undefined {
  return client.cookies.get(t.instance.auth.cookieName);
}

export function sessionsStore(t: TestApp): Store {
  return t.instance.stores.forRole('sessions');
}

export const sessionKey = (t: TestApp, id: string) => `${t.keyPrefix}session:${sha256hex(id)}`;
export const indexKey = (t: TestApp, userId: string) => `${t.keyPrefix}user-sessions:${userId}`;

/**
 * Every key (and its string/set contents) under the app's prefix, read straight from the backing
 * store: a plain ioredis client for Redis, the embedded store's own map otherwise. The webhook queue's keys
 * (under `<prefix>{svc-webhooks}:`) are left out.
 */
export async function dumpStore(t: TestApp, redisUrl: string | undefined): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (redisUrl) {
    const r = new Redis(redisUrl, { lazyConnect: true });
    await r.connect();
    try {
      let cursor = '0';
      do {
        const [next, keys] = await r.scan(cursor, 'MATCH', `${t.keyPrefix}*`, 'COUNT', 500);
        cursor = next;
        for (const k of keys) {
          // The webhook queue's keys (a stream and a sorted set; webhooks-redis.test.ts checks what they hold).
          if (k.startsWith(`${t.keyPrefix}{svc-webhooks}:`)) continue;
          const type = await r.type(k);
          out.set(k, type === 'set' ? JSON.stringify(await r.smembers(k)) : type === 'string' ? ((await r.get(k)) ?? '') : `<${type}>`);
        }
      } while (cursor !== '0');
    } finally {
      r.disconnect();
    }
    return out;
  }
  // The embedded store keeps its data in a private Map: read it for this check only.
  const data = (sessionsStore(t) as unknown as { data: Map<string, { value: string | Set<string> }> }).data;
  if (!(data instanceof Map)) throw new Error('embedded store layout changed: cannot dump it');
  for (const [k, e] of data) {
    if (!k.startsWith(t.keyPrefix)) continue;
    out.set(k, typeof e.value === 'string' ? e.value : JSON.stringify([...e.value]));
  }
  return out;
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface PrivateRedis {
  url: string;
  stop(): Promise<void>;
}

/** A redis-server of the test's own, on a free port, without persistence. */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  for (let i = 0; i < 100 && !exited; i++) {
    if (await listening(port)) {
      return {
        url: `redis://127.0.0.1:${port}`,
        stop: () =>
          new Promise<void>((resolve) => {
            if (exited) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      };
    }
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error(`private redis-server on port ${port} did not start`);
}

/** `INFO commandstats` as command -> calls. */
export async function commandCalls(r: Redis): Promise<Map<string, number>> {
  const info = await r.info('commandstats');
  const calls = new Map<string, number>();
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m) calls.set(m[1]!, Number(m[2]));
  }
  return calls;
}
