// Two apps on one host sharing one Redis (OAuth issue, item 6): with the default key prefix both used
// `auth:`, so each accepted the other's session ids and a logout-all on one ended the user's sessions on
// the other. Each app now gets its own namespace by default, derived from its cookie name (which two
// apps on one host must keep distinct anyway): `auth:` for `sid_app`, `auth:sid_workbench:` for the
// workbench. Proven with both apps on a private redis-server and ONE user database (the harshest case:
// the same user id in both apps).

import { Redis } from 'ioredis';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { defaultKeyPrefix, loadConfig } from '../../src/config/load.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { startPrivateRedis, type PrivateRedis } from '../support/auth.ts';

const redisUrl = inject('redisUrl');

describe('the default key prefix', () => {
  const root = () => mkdtempSync(path.join(tmpdir(), 'svc-ns-'));
  it("is SPEC.md's `auth:` for the default cookie, `auth:<cookie name>:` for any other app, and an explicit one wins", async () => {
    expect(defaultKeyPrefix('sid_app')).toBe('auth:');
    expect((await loadConfig({ SVC_APP_PATH: root() }, { raw: {} })).config.auth.store.keyPrefix).toBe('auth:');
    expect((await loadConfig({ SVC_APP_PATH: root() }, { raw: { auth: { cookie: { name: 'sid_workbench' } } } })).config.auth.store.keyPrefix).toBe('auth:sid_workbench:');
    const explicit = { auth: { cookie: { name: 'sid_workbench' }, store: { keyPrefix: 'wb:' } } };
    expect((await loadConfig({ SVC_APP_PATH: root() }, { raw: explicit })).config.auth.store.keyPrefix).toBe('wb:');
  });

  it('an empty keyPrefix is refused at start-up', async () => {
    await expect(loadConfig({ SVC_APP_PATH: root() }, { raw: { auth: { store: { keyPrefix: '' } } } })).rejects.toThrow(/auth\.store\.keyPrefix/);
  });
});

describe.skipIf(!redisUrl)('two apps, one Redis, one user database, default key prefixes', () => {
  let redis: PrivateRedis;
  let probe: Redis;
  let app: TestApp;
  let workbench: TestApp;
  const db = EmbeddedDatabase.inMemory();
  const email = 'both-apps@example.com';
  const password = 'correct horse battery';

  beforeAll(async () => {
    redis = await startPrivateRedis();
    probe = new Redis(redis.url);
    const cookie = (name: string) => ({ auth: { cookie: { name, secure: false } } });
    app = await createTestApp({ redisUrl: redis.url, db, defaultKeyPrefix: true, config: cookie('sid_app') });
    workbench = await createTestApp({ redisUrl: redis.url, db, defaultKeyPrefix: true, config: cookie('sid_workbench') });
    await app.createUser({ email, password });
  });
  afterAll(async () => {
    await Promise.all([app?.close(), workbench?.close()]);
    probe?.disconnect();
    await redis?.stop();
  });

  /** The session id `c` holds for its app, presented to `other` under other's cookie name. */
  const replay = (other: TestApp, otherCookie: string, id: string) => other.fetch('/auth/session', { headers: { cookie: `${otherCookie}=${id}` } });
  const sessionKeys = async (prefix: string) => (await probe.keys(`${prefix}session:*`)).length;

  async function loggedIn(t: TestApp, cookie: string): Promise<{ c: TestClient; id: string }> {
    const c = t.client();
    expect((await c.login(email, password)).status).toBe(200);
    return { c, id: c.cookies.get(cookie)! };
  }

  it("a session id of one app is 401 on the other, and the other's logout-all ends nothing of it", async () => {
    const a = await loggedIn(app, 'sid_app');
    const w = await loggedIn(workbench, 'sid_workbench');

    expect((await replay(workbench, 'sid_workbench', a.id)).status).toBe(401);
    expect((await replay(app, 'sid_app', w.id)).status).toBe(401);
    // Each app's records live in its own namespace (`auth:session:*` also matches none of the workbench's).
    expect(await sessionKeys('auth:')).toBe(1);
    expect(await sessionKeys('auth:sid_workbench:')).toBe(1);

    // The same user id in both apps: logout-all and `?expand=user` on the workbench touch only its own.
    expect((await w.c.fetch('/auth/session?expand=user')).status).toBe(200);
    expect((await w.c.fetch('/auth/logout-all', { method: 'POST' })).status).toBe(204);
    expect((await w.c.fetch('/auth/session')).status).toBe(401);
    expect((await a.c.fetch('/auth/session')).status).toBe(200);
    expect(await sessionKeys('auth:')).toBe(1);
    expect([app.keyPrefix, workbench.keyPrefix]).toEqual(['auth:', 'auth:sid_workbench:']);
  });
});
