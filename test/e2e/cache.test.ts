import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SECRET_KEY_PATTERNS, seeds } from '../../plugins/svc__cache/index.ts';
import { openClient, scanPage } from '../../src/store/redis-inspect.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { commandCalls, sleep, startPrivateRedis } from '../support/auth.ts';

const redisUrl = inject('redisUrl');
/** The database of the Redis the run was given (`REDIS_TEST_URL=redis://host/2`): the only one these tests write to. */
const home = redisUrl ? Number(new URL(redisUrl).pathname.slice(1) || 0) : 0;
/** Another database, only ever read (or named in an instance's URL) to show `db` is honoured. */
const other = home === 3 ? 4 : 3;
const KiB16 = 16 * 1024;

/** The test's own reading of SPEC.md rule 7 and issue 35 finding 8, independent of the plugin's list. */
const SECRET = [/password/i, /secret/i, /token/i, /api[_-]?key/i, /credential/i, /private[_-]?key/i, /access[_-]?token/i, /refresh[_-]?token/i, /authorization/i, /bearer/i];
SECRET.push(/passwd/i, /pwd/i, /auth/i, /session[_-]?id/i, /cookie/i, /otp/i, /code[_-]?verifier/i, /priv[_-]?key/i, /dsn/i);
const secretLooking = (key: string) => SECRET.some((re) => re.test(key));

/** `out` is `original` with exactly the values under secret-looking keys replaced by `******`. */
function expectRedacted(original: unknown, out: unknown, path = '$'): void {
  if (Array.isArray(original)) {
    expect(Array.isArray(out), path).toBe(true);
    expect((out as unknown[]).length, path).toBe(original.length);
    original.forEach((item, i) => expectRedacted(item, (out as unknown[])[i], `${path}[${i}]`));
  } else if (original !== null && typeof original === 'object') {
    expect(Object.keys(out as object), path).toEqual(Object.keys(original));
    for (const [k, v] of Object.entries(original)) {
      const got = Object.getOwnPropertyDescriptor(out, k)?.value;
      if (secretLooking(k)) expect(got, `${path}.${k}`).toBe('******');
      else expectRedacted(v, got, `${path}.${k}`);
    }
  } else expect(out, path).toEqual(original);
}

async function adminAndUser(t: TestApp): Promise<{ admin: TestClient; user: TestClient }> {
  const [a, u] = await Promise.all([t.createUser({ admin: true }), t.createUser()]);
  const admin = t.client();
  const user = t.client();
  await admin.login(a.email, a.password);
  await user.login(u.email, u.password);
  return { admin, user };
}

const q = (params: Record<string, string | number>) => new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)])).toString();

describe('svc__cache: access and the embedded store', () => {
  let t: TestApp;
  let admin: TestClient;
  let user: TestClient;
  beforeAll(async () => {
    t = await createTestApp();
    ({ admin, user } = await adminAndUser(t));
  });
  afterAll(() => t?.close());

  it('every route: anonymous 401 unauthenticated, non-admin 403 forbidden (also under /api)', async () => {
    for (const path of ['/svc__cache/cacheInstances', '/svc__cache/cacheEntries', '/svc__cache/cacheEntry?key=x', '/api/svc__cache/cacheEntries']) {
      const anon = await t.fetch(path);
      expect(anon.status, path).toBe(401);
      expect((await anon.json()).error.code).toBe('unauthenticated');
      const res = await user.fetch(path);
      expect(res.status, path).toBe(403);
      expect((await res.json()).error.code).toBe('forbidden');
    }
  });

  it('without CACHE_URL, instance `cache` is the embedded store, read-only: its session keys are listed and readable', async () => {
    expect(await (await admin.fetch('/svc__cache/cacheInstances')).json()).toEqual([{ id: 'cache', label: 'cache' }]);
    const page = await (await admin.fetch(`/svc__cache/cacheEntries?${q({ pattern: `${t.keyPrefix}session:*`, limit: 25 })}`)).json();
    expect(page).toMatchObject({ offset: 0, limit: 25, hasMore: false });
    expect(page.items.length).toBe(2); // the two logins of this suite
    for (const item of page.items) expect(item).toEqual({ key: expect.stringMatching(/session:[0-9a-f]{64}$/), ttl: expect.any(Number), type: 'string' });
    expect(page.items[0].ttl).toBeGreaterThan(0);
    const entry = await (await admin.fetch(`/svc__cache/cacheEntry?${q({ key: page.items[0].key })}`)).json();
    expect(entry).toMatchObject({ key: page.items[0].key, type: 'string', valueParsed: { userId: expect.any(String) } });
    const index = await (await admin.fetch(`/svc__cache/cacheEntries?${q({ pattern: `${t.keyPrefix}user-sessions:*` })}`)).json();
    expect(index.items.every((i: { type: string }) => i.type === 'set')).toBe(true);
    expect((await admin.fetch(`/svc__cache/cacheEntry?${q({ key: 'no-such-key' })}`)).status).toBe(404);
    expect((await admin.fetch('/svc__cache/cacheEntries?instance=cachePersistent')).status).toBe(404);
  });

  it('contributes the composition cacheList and its navigation link as seeds (SPEC.md rule 8)', async () => {
    const composition = await (await t.instance.db.collection('svc__core-composition')).findOne({ _id: 'cacheList' });
    expect(composition).toMatchObject({ pathname: { default: 'cache-list' } });
    const cell = (composition as unknown as { widgetsLayout: { widget: unknown }[][] }).widgetsLayout[0]![0]!;
    expect(cell.widget).toMatchObject({ name: 'CacheList', pluginKey: 'svc__cache', uuid: expect.any(String) });
    const link = await (await t.instance.db.collection('svc__core-interactionlink')).findOne({ _id: 'cacheList' });
    expect(link).toMatchObject({ composition: 'cacheList', slotType: 'page', isLandingPage: false, triggers: [{ type: 'page-navigation', settings: { icon: 'mdi-database' } }] });
    expect(seeds.compositions?.map((c) => c._id)).toEqual(['cacheList']);
    expect(SECRET_KEY_PATTERNS.length).toBe(SECRET.length);
  });
});

describe.skipIf(!redisUrl)('svc__cache on the shared Redis', () => {
  let t: TestApp;
  let admin: TestClient;
  let redis: Redis;
  const prefix = `svctest:cache:${randomUUID().slice(0, 8)}:`;
  const entry = async (key: string, extra: Record<string, string | number> = {}, client = admin) =>
    client.fetch(`/svc__cache/cacheEntry?${q({ key, db: home, ...extra })}`);
  const json = async (key: string, extra: Record<string, string | number> = {}) => {
    const res = await entry(key, extra);
    expect(res.status, key).toBe(200);
    return res.json();
  };

  beforeAll(async () => {
    t = await createTestApp({ redisUrl, env: { SVC_STORE_CACHE_PERSISTENT_URL: redisUrl } });
    ({ admin } = await adminAndUser(t));
    redis = new Redis(redisUrl);
  });
  afterAll(async () => {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
    redis?.disconnect();
    await t?.close();
  });

  it('lists the instances of CACHE_URL and SVC_STORE_<NAME>_URL', async () => {
    expect(await (await admin.fetch('/svc__cache/cacheInstances')).json()).toEqual([
      { id: 'cache', label: 'cache' },
      { id: 'cachePersistent', label: 'cachePersistent' },
    ]);
  });

  it('pages through SCAN MATCH with offset/limit: every key once, hasMore until the last page, ttl and type', async () => {
    const p = `${prefix}page:`;
    const pipeline = redis.pipeline();
    for (let i = 0; i < 120; i++) pipeline.set(`${p}${i}`, String(i));
    pipeline.expire(`${p}7`, 500).hset(`${p}hash`, 'a', '1').rpush(`${p}list`, 'x').sadd(`${p}set`, 'y').zadd(`${p}zset`, 1, 'z');
    await pipeline.exec();
    const seen: string[] = [];
    const more: boolean[] = [];
    for (let offset = 0; offset < 124; offset += 50) {
      const res = await admin.fetch(`/svc__cache/cacheEntries?${q({ pattern: `${p}*`, offset, limit: 50, db: home })}`);
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(body).toMatchObject({ offset, limit: 50 });
      seen.push(...body.items.map((i: { key: string }) => i.key));
      more.push(body.hasMore);
      for (const item of body.items) {
        const type = item.key.slice(p.length);
        expect(item.type).toBe(['hash', 'list', 'set', 'zset'].includes(type) ? type : 'string');
        if (item.key === `${p}7`) expect(item.ttl).toBeGreaterThan(490);
        else expect(item.ttl).toBe(-1);
      }
    }
    expect(more).toEqual([true, true, false]);
    expect(seen.length).toBe(124);
    expect(new Set(seen).size).toBe(124);
    // The same instance through another name, and the same page twice: the same keys in the same order.
    const again = await (await admin.fetch(`/svc__cache/cacheEntries?${q({ pattern: `${p}*`, offset: 50, limit: 50, instance: 'cachePersistent', db: home })}`)).json();
    expect(again.items.map((i: { key: string }) => i.key)).toEqual(seen.slice(50, 100));
  });

  it('db selects the Redis database (default 0)', async () => {
    await redis.set(`${prefix}here`, 'here');
    const listed = async (db?: number) => (await (await admin.fetch(`/svc__cache/cacheEntries?${q({ pattern: `${prefix}here`, ...(db === undefined ? {} : { db }) })}`)).json()).items;
    expect(await listed(home)).toEqual([{ key: `${prefix}here`, ttl: -1, type: 'string' }]);
    expect(await listed(other)).toEqual([]);
    expect(await listed()).toEqual(home === 0 ? [{ key: `${prefix}here`, ttl: -1, type: 'string' }] : []);
    expect((await json(`${prefix}here`)).value).toBe('here');
    expect((await entry(`${prefix}here`, { db: other })).status).toBe(404);
    // svc's own sessions are where its URL says: the run's database.
    const prefixOf = t.instance.config.auth.store.keyPrefix;
    const sessions = await (await admin.fetch(`/svc__cache/cacheEntries?${q({ pattern: `${prefixOf}session:*`, db: home, limit: 500 })}`)).json();
    expect(sessions.items.length).toBeGreaterThan(0);
  });

  it('db is the database asked for also when an instance\'s URL names another one (redis://host/3: no db reads db 0)', async () => {
    const url = new URL(redisUrl!);
    url.pathname = `/${other}`;
    // An instance the app itself never writes to: nothing of this test lands outside the run's database.
    const elsewhere = await createTestApp({ redisUrl, env: { SVC_STORE_ELSEWHERE_URL: url.toString() } });
    try {
      const { admin: a } = await adminAndUser(elsewhere);
      await redis.set(`${prefix}where`, 'home');
      const read = async (db?: number) =>
        (await a.fetch(`/svc__cache/cacheEntry?${q({ instance: 'elsewhere', key: `${prefix}where`, ...(db === undefined ? {} : { db }) })}`)).json();
      expect((await read(home)).value).toBe('home');
      expect((await read(other)).error.code).toBe('not_found');
      const unasked = await read();
      if (home === 0) expect(unasked.value).toBe('home');
      else expect(unasked.error.code).toBe('not_found'); // db 0, where this key is not
    } finally {
      await elsewhere.close();
    }
  });

  it('refuses a limit not in 25/50/100/200/500 and a db outside 0..15 with 400 validation_failed; unknown instance 404', async () => {
    for (const bad of <Record<string, string | number>[]>[{ limit: 10 }, { limit: 1000 }, { limit: 'all' }, { limit: '' }, { db: 16 }, { db: -1 }, { db: 'x' }, { offset: -5 }]) {
      for (const path of ['cacheEntries', 'cacheEntry']) {
        if (path === 'cacheEntry' && ('limit' in bad || 'offset' in bad)) continue;
        const res = await admin.fetch(`/svc__cache/${path}?${q({ key: 'k', ...bad })}`);
        expect(res.status, `${path} ${JSON.stringify(bad)}`).toBe(400);
        const body = await res.json();
        expect(body.error.code).toBe('validation_failed');
        expect(body.error.details[0].path).toBe(Object.keys(bad)[0]);
      }
    }
    for (const limit of [25, 50, 100, 200, 500]) expect((await admin.fetch(`/svc__cache/cacheEntries?${q({ limit, pattern: `${prefix}none*`, db: home })}`)).status).toBe(200);
    // Names an object has from its prototype are no instances either (fuzzing found `constructor` answered 503).
    for (const name of ['nope', 'constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      for (const path of ['cacheEntries', 'cacheEntry?key=x']) {
        const res = await admin.fetch(`/svc__cache/${path}${path.includes('?') ? '&' : '?'}instance=${name}`);
        expect(res.status, `${path} instance=${name}`).toBe(404);
        expect((await res.json()).error.code).toBe('unknown_instance');
      }
    }
    const missing = await entry(`${prefix}missing`);
    expect(missing.status).toBe(404);
    expect((await missing.json()).error.code).toBe('not_found');
    expect((await admin.fetch('/svc__cache/cacheEntry')).status).toBe(400); // key is required
  });

  it('shows strings, hashes, lists, sets and sorted sets, the four collections as JSON of their contents', async () => {
    await redis
      .multi()
      .set(`${prefix}str`, 'plain text, not JSON')
      .hset(`${prefix}h`, 'name', 'n', 'count', '2')
      .rpush(`${prefix}l`, 'b', 'a', 'b')
      .sadd(`${prefix}s`, 'y', 'x')
      .zadd(`${prefix}z`, 2, 'two', 1, 'one')
      .exec();
    expect(await json(`${prefix}str`)).toEqual({ key: `${prefix}str`, ttl: -1, type: 'string', size: 20, value: 'plain text, not JSON' });
    expect(await json(`${prefix}h`)).toMatchObject({ type: 'hash', size: 2, valueParsed: { name: 'n', count: '2' } });
    expect(JSON.parse((await json(`${prefix}h`)).value)).toEqual({ name: 'n', count: '2' });
    expect(await json(`${prefix}l`)).toMatchObject({ type: 'list', size: 3, value: '["b","a","b"]', valueParsed: ['b', 'a', 'b'] });
    expect(await json(`${prefix}s`)).toMatchObject({ type: 'set', size: 2, valueParsed: ['x', 'y'] });
    expect(await json(`${prefix}z`)).toMatchObject({ type: 'zset', size: 2, valueParsed: [{ member: 'one', score: 1 }, { member: 'two', score: 2 }] });
  });

  it('redacts nested secrets at depth 5 in objects and arrays, in value and valueParsed; key names and non-JSON values stay', async () => {
    const doc = {
      Password: 'p1',
      'api-key': 'k1',
      API_KEY: 'k2',
      user: { name: 'ann', privateKey: { pem: '-----BEGIN' } },
      list: [{ refresh_token: 'r1', keep: 1 }, [{ deeper: { Authorization: 'Bearer abc', level: [{ db_password: 'p5', ok: true }] } }]],
      headers: { bearer: null, 'X-Access-Token': 42, credentials: ['a', 'b'], client_secret: 's' },
      note: 'the word password in a value is fine',
    };
    const key = `${prefix}password:api_key:user`; // a secret-looking key NAME is shown as it is
    await redis.set(key, JSON.stringify(doc, null, 2));
    const body = await json(key);
    expect(body.key).toBe(key);
    const expected = {
      Password: '******',
      'api-key': '******',
      API_KEY: '******',
      user: { name: 'ann', privateKey: '******' },
      list: [{ refresh_token: '******', keep: 1 }, [{ deeper: { Authorization: '******', level: [{ db_password: '******', ok: true }] } }]],
      headers: { bearer: '******', 'X-Access-Token': '******', credentials: '******', client_secret: '******' },
      note: 'the word password in a value is fine',
    };
    expect(body.valueParsed).toEqual(expected);
    expect(JSON.parse(body.value)).toEqual(expected);
    for (const secret of ['p1', 'k1', 'k2', 'BEGIN', 'r1', 'abc', 'p5', '"s"']) expect(body.value).not.toContain(secret);
    // Untouched JSON keeps its own text; non-JSON that mentions secrets is unchanged.
    await redis.set(`${prefix}clean`, '{ "a": 1 }');
    expect(await json(`${prefix}clean`)).toMatchObject({ value: '{ "a": 1 }', valueParsed: { a: 1 } });
    await redis.set(`${prefix}text`, 'the word password in text is fine');
    expect(await json(`${prefix}text`)).toEqual(expect.objectContaining({ value: 'the word password in text is fine' }));
    expect((await json(`${prefix}text`)).valueParsed).toBeUndefined();
    // Collections: a hash field named like a secret, and JSON members holding secrets.
    await redis.hset(`${prefix}hs`, 'apiKey', 'k', 'profile', '{"token":"t","name":"n"}');
    await redis.rpush(`${prefix}ls`, '{"password":"x"}', 'password');
    const hash = await json(`${prefix}hs`);
    expect(hash.valueParsed).toEqual({ apiKey: '******', profile: '{"token":"******","name":"n"}' });
    expect(hash.value).not.toMatch(/"k"|"t"/);
    expect((await json(`${prefix}ls`)).valueParsed).toEqual(['{"password":"******"}', 'password']);
  });

  it('redaction gaps of issue 35: JSON in a string, a BOM, double encoding, more key names, password= in text, URL passwords', async () => {
    const set = async (name: string, value: string) => {
      await redis.set(`${prefix}gap:${name}`, value);
      return json(`${prefix}gap:${name}`);
    };
    const names = { pwd: 'v1', passwd: 'v2', secretKey: 'v3', sessionId: 'v4', cookie: 'v5', authCode: 'v6', otp: 'v7', codeVerifier: 'v8', privkey: 'v9', dsn: 'v10', keep: 'shown' };
    const byName = await set('names', JSON.stringify(names));
    expect(byName.valueParsed).toEqual({ ...Object.fromEntries(Object.keys(names).map((k) => [k, '******'])), keep: 'shown' });
    // An OAuth state record: its PKCE verifier is a secret.
    const state = await set('state', JSON.stringify({ provider: 'github', codeVerifier: 'pkce-verifier-x', redirectTo: '/' }));
    expect(state.value).not.toContain('pkce-verifier-x');
    const inner = JSON.stringify({ password: 'in-a-string', name: 'n' });
    const cases: [string, string, string[]][] = [
      ['nested', JSON.stringify({ profile: inner }), ['in-a-string']],
      ['bom', `\uFEFF${inner}`, ['in-a-string']],
      ['double', JSON.stringify(inner), ['in-a-string']],
      ['text', 'user=ann password=hunter2 token: abc', ['hunter2', 'abc']],
      ['url', 'redis://:redis-pw@cache.internal:6379/0', ['redis-pw']],
      ['url-in-json', JSON.stringify({ cacheUrl: 'redis://default:json-pw@cache:6379' }), ['json-pw']],
    ];
    for (const [name, value, secrets] of cases) {
      const body = await set(name, value);
      for (const secret of secrets) {
        expect(body.value, name).not.toContain(secret);
        expect(JSON.stringify(body.valueParsed ?? null), name).not.toContain(secret);
      }
    }
    expect((await json(`${prefix}gap:text`)).value).toBe('user=ann password=****** token: ******');
    // A secret pair inside another pair's value.
    const inValues: [string, string][] = [
      ['error: password=hunter2 rejected', 'error: password=****** rejected'],
      ['https://app.example/cb?state=s1&access_token=qtok', 'https://app.example/cb?state=s1&access_token=******'],
      ['msg=token=abc', 'msg=token=******'],
      ['headers: Authorization=xyz', 'headers: Authorization=******'],
      ['db_password: abc, passport: p123', 'db_password: ******, passport: p123'],
    ];
    for (const [i, [value, shown]] of inValues.entries()) expect((await set(`in-value-${i}`, value)).value).toBe(shown);
    expect((await json(`${prefix}gap:url`)).value).toBe('redis://:******@cache.internal:6379/0');
    expect((await json(`${prefix}gap:double`)).valueParsed).toEqual({ password: '******', name: 'n' });
  });

  it('property: no value under a secret-looking key survives in value or valueParsed; every other value is unchanged', async () => {
    const secretKeys = fc.constantFrom('Password', 'api-key', 'API_KEY', 'privateKey', 'refresh_token', 'Authorization', 'x_secret', 'accessToken', 'BEARER', 'credential', 'db.password');
    // Random keys never hold "auth" or "otp": those count only at the start of a word (`author` and
    // `footprint` are no secrets), which this test's broader oracle does not model; the lists above test them.
    const key = fc.oneof({ weight: 1, arbitrary: secretKeys }, { weight: 3, arbitrary: fc.string({ maxLength: 8 }).filter((k) => !/auth|otp/i.test(k)) });
    const { tree } = fc.letrec<{ tree: unknown; leaf: unknown }>((tie) => ({
      leaf: fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null)),
      tree: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        tie('leaf'),
        fc.array(tie('tree'), { maxLength: 4 }),
        fc.dictionary(key, tie('tree'), { maxKeys: 5 }),
      ),
    }));
    const doc = fc.oneof(fc.dictionary(key, tree, { minKeys: 1, maxKeys: 6 }), fc.array(tree, { minLength: 1, maxLength: 4 }));
    let n = 0;
    await fc.assert(
      fc.asyncProperty(doc, async (d) => {
        const text = JSON.stringify(d);
        fc.pre(Buffer.byteLength(text) < KiB16 / 2);
        const original = JSON.parse(text) as unknown; // -0 and the like as JSON carries them
        const k = `${prefix}prop:${n++}`;
        await redis.set(k, text);
        const body = await json(k);
        expectRedacted(original, body.valueParsed);
        expectRedacted(original, JSON.parse(body.value));
      }),
      { numRuns: 60 },
    );
  });

  it('cuts values above 16 KiB: exactly 16384 bytes whole, 16385 cut and flagged, multi-byte characters never split', async () => {
    await redis.set(`${prefix}exact`, 'a'.repeat(KiB16));
    await redis.set(`${prefix}over`, 'a'.repeat(KiB16 + 1));
    await redis.set(`${prefix}utf8`, `a${'é'.repeat(KiB16)}`); // 1 + 2 * 16384 bytes
    await redis.set(`${prefix}json`, JSON.stringify({ token: 'secret-value', pad: 'x'.repeat(KiB16) }));
    const exact = await json(`${prefix}exact`);
    expect(exact.value.length).toBe(KiB16);
    expect(exact.truncated).toBeUndefined();
    expect(exact.size).toBe(KiB16);
    const over = await json(`${prefix}over`);
    expect(over).toMatchObject({ truncated: true, size: KiB16 + 1 });
    expect(over.value.length).toBe(KiB16);
    const utf8 = await json(`${prefix}utf8`);
    expect(utf8.truncated).toBe(true);
    expect(Buffer.byteLength(utf8.value)).toBe(KiB16 - 1);
    expect(utf8.value.endsWith('é')).toBe(true);
    // Big JSON is redacted before it is cut, and a cut value has no valueParsed.
    const big = await json(`${prefix}json`);
    expect(big).toMatchObject({ truncated: true });
    expect(big.valueParsed).toBeUndefined();
    expect(big.value).toContain('"token":"******"');
    expect(big.value).not.toContain('secret-value');
  });

  it('a key that expires between SCAN and the TYPE/TTL pipeline is listed with ttl -2; reading it then answers 404', async () => {
    const key = `${prefix}expiring`;
    await redis.set(key, 'soon', 'PX', 60_000);
    await redis.set(`${prefix}expiring2`, 'stays');
    const client = openClient({ url: redisUrl, db: home });
    await client.connect();
    try {
      const page = await scanPage(client, { pattern: `${prefix}expiring*`, offset: 0, limit: 25 }, { afterScan: async () => void (await redis.del(key)) });
      expect(page.items).toContainEqual({ key, ttl: -2, type: 'none' });
      expect(page.items).toContainEqual({ key: `${prefix}expiring2`, ttl: -1, type: 'string' });
    } finally {
      client.disconnect();
    }
    await redis.set(key, 'short', 'PX', 50);
    await sleep(120);
    expect((await entry(key)).status).toBe(404);
  });

  it('HIDE_SECRETS=false shows secret values as they are', async () => {
    const shown = await createTestApp({ redisUrl, env: { HIDE_SECRETS: 'false' } });
    try {
      const { admin: a } = await adminAndUser(shown);
      await redis.set(`${prefix}shown`, '{"password":"hunter2"}');
      const body = await (await entry(`${prefix}shown`, {}, a)).json();
      expect(body).toMatchObject({ value: '{"password":"hunter2"}', valueParsed: { password: 'hunter2' } });
    } finally {
      await shown.close();
    }
  });
});

describe.skipIf(!redisUrl)('svc__cache globs: the embedded store lists what SCAN MATCH lists on Redis', () => {
  const prefix = `svctest:glob:${randomUUID().slice(0, 8)}:`;
  const keys = ['-', 'a', 'b', 'c', ']', '\\', ']a]', '[', 'x[', 'ab', 'é', '^', '*', '?'];
  const patterns = ['[\\]]', '[]a]', '[]', '[ab', '[a-]', 'x[', '[^a]', '[\\', '\\[', '?', '??', '*]', '[z-a]', '[[]', '\\*', '[*]'];
  let redis: Redis;
  let embedded: TestApp;
  let admin: TestClient;
  beforeAll(async () => {
    redis = new Redis(redisUrl);
    embedded = await createTestApp();
    ({ admin } = await adminAndUser(embedded));
    for (const key of keys) {
      await redis.set(`${prefix}${key}`, '1', 'EX', 300);
      await embedded.instance.store.set(`${prefix}${key}`, '1', { ttl: 300 });
    }
  });
  afterAll(async () => {
    await redis.del(...keys.map((k) => `${prefix}${k}`));
    redis.disconnect();
    await embedded?.close();
  });

  it.each(patterns)('%s', async (pattern) => {
    const onRedis: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}${pattern}`, 'COUNT', 1000);
      onRedis.push(...found);
      cursor = next;
    } while (cursor !== '0');
    const page = (await (await admin.fetch(`/svc__cache/cacheEntries?${q({ pattern: `${prefix}${pattern}`, limit: 500 })}`)).json()) as { items: { key: string }[] };
    expect(page.items.map((i) => i.key).sort()).toEqual(onRedis.sort());
  });
});

describe.skipIf(!redisUrl)('svc__cache on a private redis-server: never writes, closes its clients, 503 when down', () => {
  let t: TestApp;
  let admin: TestClient;
  let user: TestClient;
  let priv: Awaited<ReturnType<typeof startPrivateRedis>>;
  let inspect: Redis;

  beforeAll(async () => {
    priv = await startPrivateRedis();
    inspect = new Redis(priv.url);
    inspect.on('error', () => {}); // it outlives the server in the outage test
    const p = inspect.pipeline();
    for (let i = 0; i < 300; i++) p.set(`k:${i}`, JSON.stringify({ i, secret: 's' }), 'EX', 600);
    p.hset('h', 'a', '1').rpush('l', 'x').sadd('s', 'y').zadd('z', 1, 'm');
    await p.exec();
    await inspect.select(2);
    await inspect.set('in-db-2', 'x');
    await inspect.select(0);
    // Sessions live on the embedded store: the private Redis is only instance `inspected`.
    t = await createTestApp({ env: { SVC_STORE_INSPECTED_URL: priv.url } });
    ({ admin, user } = await adminAndUser(t));
  });
  afterAll(async () => {
    inspect?.disconnect();
    await t?.close();
    await priv?.stop();
  });

  const svcClients = async () => String(await inspect.client('LIST')).split('\n').filter((line) => line.includes('name=svc__cache')).length;

  it('no write command reaches Redis from the routes (INFO commandstats, COMMAND INFO flags), no KEYS, and every client is closed', async () => {
    await inspect.config('RESETSTAT');
    const paths = [
      '/svc__cache/cacheInstances',
      ...[25, 50, 100, 200, 500].flatMap((limit) => [0, 100, 250].map((offset) => `/svc__cache/cacheEntries?${q({ instance: 'inspected', limit, offset })}`)),
      `/svc__cache/cacheEntries?${q({ instance: 'inspected', pattern: 'k:1*', db: 2 })}`,
      ...['k:1', 'h', 'l', 's', 'z', 'missing'].map((key) => `/svc__cache/cacheEntry?${q({ instance: 'inspected', key })}`),
      `/svc__cache/cacheEntry?${q({ instance: 'inspected', key: 'in-db-2', db: 2 })}`,
      `/svc__cache/cacheEntry?${q({ instance: 'inspected', key: 'k:1', db: 15 })}`,
    ];
    const statuses = await Promise.all(paths.map(async (p) => (await admin.fetch(p)).status));
    expect(statuses.filter((s) => s === 200).length).toBe(paths.length - 2);
    expect(statuses.filter((s) => s === 404).length).toBe(2);
    await Promise.all(paths.map((p) => user.fetch(p))); // refused: must not even connect
    const calls = await commandCalls(inspect);
    expect(calls.get('scan')).toBeGreaterThan(0);
    expect(calls.has('keys')).toBe(false);
    const writes: string[] = [];
    for (const name of calls.keys()) {
      const [info] = (await inspect.command('INFO', name.split('|')[0]!)) as [string, number, string[]][];
      if (info?.[2]?.includes('write')) writes.push(name);
    }
    expect(writes).toEqual([]);
    for (let i = 0; i < 50 && (await svcClients()) > 0; i++) await sleep(50);
    expect(await svcClients()).toBe(0);
  });

  it('a Redis that is down answers 503 unavailable at once, and the routes work again when it is back', async () => {
    const port = new URL(priv.url).port;
    await priv.stop();
    try {
      for (const path of ['cacheEntries?instance=inspected', 'cacheEntry?instance=inspected&key=k:1']) {
        const started = Date.now();
        const res = await admin.fetch(`/svc__cache/${path}`);
        expect(res.status).toBe(503);
        const body = await res.json();
        expect(body.error.code).toBe('unavailable');
        expect(JSON.stringify(body)).not.toContain(port);
        expect(Date.now() - started).toBeLessThan(5000); // refused at once; the bound only guards a busy machine
      }
    } finally {
      priv = await startPrivateRedisOn(Number(port));
    }
    inspect.disconnect();
    inspect = new Redis(priv.url);
    inspect.on('error', () => {});
    await inspect.set('back', '1');
    expect((await admin.fetch('/svc__cache/cacheEntry?instance=inspected&key=back')).status).toBe(200);
  });
});

describe.skipIf(!redisUrl)('svc__cache paging on a private redis-server: sorted pages that stay put, and early stops on a big keyspace', () => {
  let t: TestApp;
  let admin: TestClient;
  let priv: Awaited<ReturnType<typeof startPrivateRedis>>;
  let redis: Redis;
  const page = async (pattern: string, offset: number, limit: number) => {
    const res = await admin.fetch(`/svc__cache/cacheEntries?${q({ instance: 'paging', pattern, offset, limit })}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { items: { key: string }[]; hasMore: boolean };
    return { keys: body.items.map((i) => i.key), hasMore: body.hasMore };
  };
  const fill = async (count: number, name: (i: number) => string) => {
    for (let i = 0; i < count; i += 10_000) {
      const p = redis.pipeline();
      for (let j = i; j < Math.min(count, i + 10_000); j++) p.set(name(j), '1');
      await p.exec();
    }
  };

  beforeAll(async () => {
    priv = await startPrivateRedis();
    redis = new Redis(priv.url);
    t = await createTestApp({ env: { SVC_STORE_PAGING_URL: priv.url } });
    ({ admin } = await adminAndUser(t));
  });
  afterAll(async () => {
    redis?.disconnect();
    await t?.close();
    await priv?.stop();
  });

  it('pages are sorted by name and neither repeat nor miss a key when Redis resizes its hash table between them', async () => {
    const listed = Array.from({ length: 300 }, (_, i) => `listed:${randomUUID()}:${i}`);
    await redis.mset(...listed.flatMap((k) => [k, 'v']));
    const first = await page('listed:*', 0, 100);
    await fill(20_000, (i) => `other:${i}`); // the table grows (and is rehashed) between two pages
    const second = await page('listed:*', 100, 100);
    await redis.flushdb();
    await redis.mset(...listed.flatMap((k) => [k, 'v'])); // and shrinks back to a few hundred keys
    const third = await page('listed:*', 200, 100);
    expect([first.hasMore, second.hasMore, third.hasMore]).toEqual([true, true, false]);
    expect([...first.keys, ...second.keys, ...third.keys]).toEqual([...listed].sort());
  });

  it('above 100,000 keys a first page stops after one SCAN instead of walking the whole keyspace', async () => {
    await redis.flushdb();
    await fill(100_001, (i) => `big:${i}`);
    await redis.config('RESETSTAT');
    const first = await page('', 0, 25);
    expect(first.keys).toHaveLength(25);
    expect(first.hasMore).toBe(true);
    expect((await commandCalls(redis)).get('scan')).toBe(1);
  });
});

describe.skipIf(!redisUrl)('svc__cache on a frozen Redis', () => {
  it('a Redis that accepts connections but never answers (SIGSTOP) answers 503 within the command timeout, not a hung request', async () => {
    const { startPrivateRedis: onPort } = await import('../support/private-redis.ts');
    const { freePort } = await import('../support/spawn.ts');
    const frozen = await onPort(await freePort());
    const t = await createTestApp({ env: { SVC_STORE_FROZEN_URL: frozen.url } });
    try {
      const { admin } = await adminAndUser(t);
      frozen.freeze();
      const started = Date.now();
      const res = await admin.fetch('/svc__cache/cacheEntries?instance=frozen');
      expect(res.status).toBe(503);
      expect((await res.json()).error.code).toBe('unavailable');
      // A 1.5 s command deadline (quiet: ~1.6 s); 3x that for a busy machine, still far from a hung request.
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await frozen.kill();
      await t.close();
    }
  });
});

/** A private redis-server again on the port the app's config names. */
async function startPrivateRedisOn(port: number) {
  const { startPrivateRedis: onPort } = await import('../support/private-redis.ts');
  const r = await onPort(port);
  return { url: r.url, stop: () => r.kill('SIGTERM') };
}
