import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import type { Database } from '../../src/db/index.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { createLogger, type Logger } from '../../src/logger.ts';
import { appWithPlugins, buildInstance } from '../../src/service.ts';
import { Stores } from '../../src/store/index.ts';
import { RedisStore } from '../../src/store/redis.ts';
import { webhookQueueKeys } from '../../src/webhooks/redis-queue.ts';
import { fetchWithCookies } from './cookie-jar.ts';

export interface TestAppOptions {
  /** Redis URL, or undefined for the embedded store. */
  redisUrl?: string;
  /** The app config file's content (svc.config.json). */
  config?: Record<string, unknown>;
  /** Extra environment variables (CONTRACT section 1). */
  env?: Record<string, string>;
  db?: Database;
  /** Keep svc's own default key prefix instead of a unique one (for a private Redis). */
  defaultKeyPrefix?: boolean;
  /** Files of the app root, by relative path (e.g. `emails/reset.txt`). */
  files?: Record<string, string>;
  /** The instance's logger (default: silent, or TEST_LOG_LEVEL). */
  logger?: Logger;
}

export interface TestApp {
  instance: ServerInstance;
  /** Key prefix of this app's auth keys (unique per app, so suites can share one Redis). */
  keyPrefix: string;
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** The Hono app itself, to serve on a real socket (`@hono/node-server`'s `serve({ fetch: app.fetch })`). */
  app: { fetch: (request: Request, env?: unknown) => Response | Promise<Response> };
  /** Every route the Hono app has (method `ALL` for middleware and 405 fallbacks). */
  routes(): { method: string; path: string }[];
  /** A browser-like client with its own cookie jar. */
  client(): TestClient;
  /** Creates a user directly (no HTTP) and returns it with the password. */
  createUser(opts?: { admin?: boolean; email?: string; password?: string }): Promise<{ id: string; email: string; password: string }>;
  close(): Promise<void>;
}

export interface TestClient {
  cookies: Map<string, string>;
  fetch(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
  login(email: string, password: string): Promise<Response>;
}

/**
 * The real app in-process (Hono's fetch, no socket), on the embedded store or a real Redis, with an
 * in-memory embedded database. Config is validated exactly as at start-up.
 */
export async function createTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const appRoot = mkdtempSync(path.join(tmpdir(), 'svc-app-'));
  for (const [file, text] of Object.entries(opts.files ?? {})) {
    mkdirSync(path.dirname(path.join(appRoot, file)), { recursive: true });
    writeFileSync(path.join(appRoot, file), text);
  }
  const raw = structuredClone(opts.config ?? {}) as { auth?: { store?: { keyPrefix?: string } } };
  // A prefix the app made itself is no other app's: its queue goes at close, jobs and all.
  const ownPrefix = !opts.defaultKeyPrefix && !raw.auth?.store?.keyPrefix;
  if (!opts.defaultKeyPrefix) {
    const unique = raw.auth?.store?.keyPrefix ?? `svctest:${randomUUID().slice(0, 8)}:auth:`;
    raw.auth = { ...raw.auth, store: { ...raw.auth?.store, keyPrefix: unique } };
  }
  const env: NodeJS.ProcessEnv = { SVC_APP_PATH: appRoot, LOG_LEVEL: 'error', ...(opts.redisUrl ? { CACHE_URL: opts.redisUrl } : {}), ...opts.env };
  const { config } = await loadConfig(env, { raw });
  const keyPrefix = config.auth.store.keyPrefix;
  const logger = opts.logger ?? createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  const stores = await Stores.open(config, logger);
  const db = opts.db ?? EmbeddedDatabase.inMemory();
  const instance = await buildInstance(config, logger, stores, db);
  const app = await appWithPlugins(instance);
  const fetch = (p: string, init?: RequestInit) => Promise.resolve(app.request(p, init));

  const client = (): TestClient => {
    const cookies = new Map<string, string>();
    const self: TestClient = {
      cookies,
      fetch: (p, init = {}) => fetchWithCookies(fetch, cookies, p, init),
      login: (email, password) => self.fetch('/auth/login', { method: 'POST', json: { email, password } }),
    };
    return self;
  };

  return {
    instance,
    keyPrefix,
    fetch,
    app,
    routes: () => app.routes.map(({ method, path }) => ({ method, path })),
    client,
    async createUser({ admin = false, email = `${randomUUID().slice(0, 8)}@example.com`, password = 'correct horse battery' } = {}) {
      const user = await instance.auth.users.create({ email, password, isAdmin: admin, createdVia: 'admin' });
      return { id: user._id, email: user.email, password };
    },
    async close() {
      await instance.runCloseCallbacks();
      await instance.realtime.close();
      await instance.auth.close();
      await dropWebhookQueue(stores, keyPrefix, ownPrefix);
      await stores.close();
      await db.close();
    },
  };
}

/**
 * Every app on Redis makes its webhook queue's stream (the consumer group needs one), and those keys
 * have no TTL: a test app's queue goes when the app closes, so that test runs leave no keys behind on a
 * shared Redis. Under a prefix the app made itself it goes whatever it holds (no other app shares it);
 * under one the test gave (several apps, one queue) only when empty: another instance may owe its jobs,
 * and an instance still reading an emptied one makes its group again (NOGROUP).
 */
async function dropWebhookQueue(stores: Stores, keyPrefix: string, ownPrefix: boolean): Promise<void> {
  const store = stores.forRole('sessions');
  if (!(store instanceof RedisStore) || !keyPrefix.startsWith('svctest:')) return;
  const { jobs, later } = webhookQueueKeys(keyPrefix);
  if (ownPrefix) {
    await store.client.del(jobs, later).catch(() => {});
    return;
  }
  const script = "if redis.call('XLEN', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) == 0 then return redis.call('DEL', KEYS[1], KEYS[2]) end return 0";
  await store.client.eval(script, 2, jobs, later).catch(() => {});
}
