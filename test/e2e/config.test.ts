// Configuration (CONTRACT sections 0 and 1, SPEC.md's auth table): `loadConfig` directly, and the
// real process started as a user starts it, where a bad config or an unreachable store/database must
// stop start-up before anything listens, with a message that names the culprit and hides passwords.

import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { dropPrefix } from '../support/redis.ts';
import { PROJECT_DIR, startReadySvc, startSvc, stopAll, tempDir, type SvcProcess } from '../support/spawn.ts';

const redisUrl = inject('redisUrl');

afterAll(stopAll);

/** A fresh app root holding the given files. */
function appRoot(files: Record<string, string> = {}): string {
  const dir = tempDir('svc-app-');
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

const json = (value: unknown) => JSON.stringify(value, null, 2);

async function configError(env: NodeJS.ProcessEnv): Promise<string> {
  try {
    await loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('loadConfig accepted this configuration');
}

describe('loadConfig', () => {
  it("applies SPEC.md's auth defaults when there is no config file", async () => {
    const { config, warnings } = await loadConfig({ SVC_APP_PATH: appRoot() });
    expect(config.auth.session.ttl).toBe(86400);
    expect(config.auth.session.ttlMode).toBe('sliding');
    expect(config.auth.session.cleanupInterval).toBe(900);
    expect(config.auth.cookie.name).toBe('sid_app');
    expect(config.auth.cookie.secure).toBe(true);
    expect(config.auth.cookie.domain).toBeUndefined();
    expect(config.auth.store.keyPrefix).toBe('auth:');
    expect(config.auth.storeInstances).toEqual({ sessions: 'cache', oauthState: 'cache', providerTokens: 'cache' });
    expect(config.auth.providers.custom).toEqual([]);
    expect(config.global.requireAuthentication).toBe(true);
    expect(config.server.bodyLimit).toBe(1024 * 1024);
    expect(warnings).toEqual([]);
  });

  it("applies CONTRACT section 1's environment defaults", async () => {
    const root = appRoot();
    const { config } = await loadConfig({ SVC_APP_PATH: root });
    expect(config.env.port).toBe(3000);
    expect(config.env.host).toBe('127.0.0.1');
    expect(config.env.logLevel).toBe('info');
    expect(config.env.dataDir).toBe(path.join(root, '.svc-data'));
    expect(config.env.storeUrls).toEqual({});
    expect(config.env.mongodbUrl).toBeUndefined();
  });

  it('svc.config.json: an unknown key stops loading, naming the key and the file', async () => {
    const message = await configError({ SVC_APP_PATH: appRoot({ 'svc.config.json': json({ auth: { sesion: { ttl: 60 } } }) }) });
    expect(message).toContain('auth.sesion');
    expect(message).toContain('svc.config.json');
  });

  it('svc.config.json: a wrong type stops loading, naming the key', async () => {
    const message = await configError({ SVC_APP_PATH: appRoot({ 'svc.config.json': json({ auth: { session: { ttl: 'x' } } }) }) });
    expect(message).toContain('auth.session.ttl');
  });

  it('every wrong key is named at once, not only the first', async () => {
    const file = json({ auth: { sesion: {}, session: { ttl: 'x' }, cookie: { secure: 'yes' } }, global: { requireAuthentification: false } });
    const message = await configError({ SVC_APP_PATH: appRoot({ 'svc.config.json': file }) });
    for (const key of ['auth.sesion', 'auth.session.ttl', 'auth.cookie.secure', 'global.requireAuthentification']) expect(message).toContain(key);
  });

  it('an unknown key close to one known key at its level suggests it; a key close to none, or to several, suggests nothing', async () => {
    const file = json({ auth: { sesion: {}, cookie: { SameSite: 'lax' }, providers: { custom: [{ id: 'x', displayName: 'X', authorizationEndpoint: 'https://a.example', tokenEndpoint: 'https://a.example', userInfoEndpoint: 'https://a.example', pcke: true }] } }, zzzzzz: 1, cache: { dbx: 1 } });
    const lines = (await configError({ SVC_APP_PATH: appRoot({ 'svc.config.json': file }) })).split('\n').map((l) => l.trim());
    expect(lines).toContain('auth.sesion: unknown key (did you mean auth.session?)');
    expect(lines).toContain('auth.cookie.SameSite: unknown key (did you mean auth.cookie.sameSite?)');
    expect(lines).toContain('auth.providers.custom.0.pcke: unknown key (did you mean auth.providers.custom.0.pkce?)');
    expect(lines).toContain('zzzzzz: unknown key');
    // `db` and `dbs` are both one edit away.
    expect(lines).toContain('cache.dbx: unknown key');
  });

  it('a svc.config.json that is not JSON names the file', async () => {
    const message = await configError({ SVC_APP_PATH: appRoot({ 'svc.config.json': '{ "auth": ' }) });
    expect(message).toContain('svc.config.json');
  });

  it('svc.config.ts is loaded (TypeScript syntax included), and so is svc.config.js', async () => {
    const ts = appRoot({
      'svc.config.ts': `const ttl: number = 3600;\ninterface Cfg { auth: object }\nconst cfg: Cfg = { auth: { session: { ttl }, cookie: { name: 'from_ts' } } };\nexport default cfg;\n`,
    });
    const fromTs = await loadConfig({ SVC_APP_PATH: ts });
    expect(fromTs.config.auth.session.ttl).toBe(3600);
    expect(fromTs.config.auth.cookie.name).toBe('from_ts');
    expect(fromTs.config.auth.session.cleanupInterval).toBe(900); // defaults still fill the rest

    const js = appRoot({ 'svc.config.js': `export default { auth: { cookie: { name: 'from_js', secure: false } } };\n` });
    const fromJs = await loadConfig({ SVC_APP_PATH: js });
    expect(fromJs.config.auth.cookie).toMatchObject({ name: 'from_js', secure: false });
  });

  it('svc.config.ts is validated like JSON: an unknown key is named', async () => {
    const message = await configError({ SVC_APP_PATH: appRoot({ 'svc.config.ts': `export default { auth: { sesion: {} } };\n` }) });
    expect(message).toContain('auth.sesion');
  });

  it('two config files in one app root are refused, naming both', async () => {
    const message = await configError({ SVC_APP_PATH: appRoot({ 'svc.config.json': '{}', 'svc.config.ts': 'export default {};\n' }) });
    expect(message).toContain('svc.config.json');
    expect(message).toContain('svc.config.ts');
  });

  it('SVC_AUTH_COOKIE_NAME overrides the default and the config file', async () => {
    expect((await loadConfig({ SVC_APP_PATH: appRoot(), SVC_AUTH_COOKIE_NAME: 'sid_env' })).config.auth.cookie.name).toBe('sid_env');
    const root = appRoot({ 'svc.config.json': json({ auth: { cookie: { name: 'sid_file' } } }) });
    expect((await loadConfig({ SVC_APP_PATH: root })).config.auth.cookie.name).toBe('sid_file');
    expect((await loadConfig({ SVC_APP_PATH: root, SVC_AUTH_COOKIE_NAME: 'sid_env' })).config.auth.cookie.name).toBe('sid_env');
  });

  it('CACHE_URL / SVC_CACHE_URL name instance `cache`; SVC_STORE_<NAME>_URL adds camelCase instances', async () => {
    const { config } = await loadConfig({
      SVC_APP_PATH: appRoot(),
      CACHE_URL: 'redis://127.0.0.1:6379/0',
      SVC_STORE_CACHE_PERSISTENT_URL: 'redis://127.0.0.1:6379/1',
      SVC_STORE_SESSIONS_URL: 'redis://127.0.0.1:6379/2',
    });
    expect(config.env.storeUrls).toEqual({
      cache: 'redis://127.0.0.1:6379/0',
      cachePersistent: 'redis://127.0.0.1:6379/1',
      sessions: 'redis://127.0.0.1:6379/2',
    });
    const alias = await loadConfig({ SVC_APP_PATH: appRoot(), SVC_CACHE_URL: 'redis://127.0.0.1:6379' });
    expect(alias.config.env.storeUrls).toEqual({ cache: 'redis://127.0.0.1:6379' });
  });

  it('a role mapped to an instance without a URL is refused, naming the role; with the URL it is accepted', async () => {
    const root = appRoot({ 'svc.config.json': json({ auth: { storeInstances: { sessions: 'cachePersistent' } } }) });
    const message = await configError({ SVC_APP_PATH: root });
    expect(message).toContain('auth.storeInstances.sessions');
    expect(message).toContain('cachePersistent');
    const { config } = await loadConfig({ SVC_APP_PATH: root, SVC_STORE_CACHE_PERSISTENT_URL: 'redis://127.0.0.1:6379/1' });
    expect(config.auth.storeInstances.sessions).toBe('cachePersistent');
  });

  it('store and database URLs of the wrong kind are refused, naming the variable', async () => {
    expect(await configError({ SVC_APP_PATH: appRoot(), CACHE_URL: 'http://127.0.0.1:6379' })).toContain('cache');
    expect(await configError({ SVC_APP_PATH: appRoot(), SVC_STORE_CACHE_PERSISTENT_URL: 'localhost:6379' })).toContain('cachePersistent');
    expect(await configError({ SVC_APP_PATH: appRoot(), MONGODB_URL: 'postgres://x' })).toContain('MONGODB_URL');
  });

  it('a store URL whose database is not 0..15 is refused, naming the variable (ioredis would SELECT NaN, or stay on 0)', async () => {
    for (const db of ['abc', '99', '16', '-1', '1.5']) {
      const message = await configError({ SVC_APP_PATH: appRoot(), CACHE_URL: `redis://:pw-s3cret@127.0.0.1:6379/${db}` });
      expect(message).toBe(`CACHE_URL (store instance "cache"): the database "${db}" is not 0..15`);
    }
    for (const db of ['', '0', '15', '3/']) {
      const { config } = await loadConfig({ SVC_APP_PATH: appRoot(), CACHE_URL: `redis://127.0.0.1:6379/${db}` });
      expect(config.env.storeUrls.cache).toBe(`redis://127.0.0.1:6379/${db}`);
    }
  });

  it('a store URL that cannot be parsed (unescaped / or # in the password) is refused, naming the instance, not the password', async () => {
    for (const url of ['redis://:pa/ss-s3cret@127.0.0.1:6379', 'redis://:pa#ss-s3cret@127.0.0.1:6379']) {
      const message = await configError({ SVC_APP_PATH: appRoot(), SVC_STORE_CACHE_PERSISTENT_URL: url });
      expect(message).toContain('cachePersistent');
      expect(message).not.toContain('s3cret');
    }
  });

  it('.env.example: every example line, uncommented, is a valid value (explanations sit on their own lines)', async () => {
    const text = readFileSync(path.join(PROJECT_DIR, '.env.example'), 'utf8');
    // `NAME=value` and `# NAME=value`: uncommented and read by Node's own .env parser, as `loadDotEnv` does.
    const examples = text
      .split('\n')
      .map((line) => /^(?:#\s*)?([A-Z][A-Z0-9_]*=.*)$/.exec(line)?.[1])
      .filter((line) => line !== undefined)
      .map((line) => Object.entries(parseEnv(line))[0]!);
    expect(examples.map(([name]) => name)).toEqual(expect.arrayContaining(['SVC_CACHE_URL', 'SVC_STORE_CACHE_PERSISTENT_URL', 'SVC_SMTP_URL', 'SVC_MAIL_FROM']));
    for (const [name, value] of examples) {
      // A run of spaces is where an explanation was written after the value.
      expect(value, name).not.toMatch(/\s{2}/);
      const env = { SVC_APP_PATH: appRoot(), ...(name === 'SVC_APP_PATH' && !value ? {} : { [name]: value }) };
      await expect(loadConfig(env), `${name}=${value}`).resolves.toBeDefined();
    }
  });

  it('SVC_FRONTEND_URLS without http:// or https:// is refused saying so, with the value to write instead', async () => {
    expect(await configError({ SVC_APP_PATH: appRoot(), SVC_FRONTEND_URLS: 'http://localhost:5173,localhost:4302' })).toBe(
      'SVC_FRONTEND_URLS: "localhost:4302" must start with http:// or https:// (e.g. http://localhost:4302)',
    );
    expect(await configError({ SVC_APP_PATH: appRoot(), SVC_FRONTEND_URLS: 'app.example.com' })).toContain('must start with http:// or https:// (e.g. http://app.example.com)');
    // A scheme of its own keeps its own reason.
    expect(await configError({ SVC_APP_PATH: appRoot(), SVC_FRONTEND_URLS: 'capacitor://localhost' })).toContain('has no web origin');
  });

  it('a SVC_FRONTEND_URLS entry with a path is accepted as its origin, with a warning that the path is ignored', async () => {
    const { config, warnings } = await loadConfig({ SVC_APP_PATH: appRoot(), SVC_FRONTEND_URLS: 'http://localhost:4302/app,http://localhost:5173/' });
    expect(config.env.frontendUrls).toEqual(['http://localhost:4302', 'http://localhost:5173']);
    expect(warnings).toEqual([expect.stringMatching(/^SVC_FRONTEND_URLS: the path of "http:\/\/localhost:4302\/app" is ignored: an origin has none/)]);
  });

  it('a short SVC_SECRET_ENCRYPTION_KEY gives a warning that counts, never repeats, it; a long one none', async () => {
    const { warnings } = await loadConfig({ SVC_APP_PATH: appRoot(), SVC_SECRET_ENCRYPTION_KEY: 'hunter2' });
    expect(warnings).toEqual([expect.stringMatching(/^SVC_SECRET_ENCRYPTION_KEY has 7 characters: .* use 24 or more/)]);
    expect(warnings.join()).not.toContain('hunter2');
    expect((await loadConfig({ SVC_APP_PATH: appRoot(), SVC_SECRET_ENCRYPTION_KEY: 'x'.repeat(24) })).warnings).toEqual([]);
  });

  it('SERVER_TOKEN_SECRET / SVC_SERVER_TOKEN_SECRET give an "obsolete" warning that does not repeat the secret', async () => {
    for (const name of ['SERVER_TOKEN_SECRET', 'SVC_SERVER_TOKEN_SECRET']) {
      const { warnings } = await loadConfig({ SVC_APP_PATH: appRoot(), [name]: 'tok-secret-4711' });
      expect(warnings, name).toHaveLength(1);
      expect(warnings[0]).toMatch(/obsolete/i);
      expect(warnings[0]).toContain('SERVER_TOKEN_SECRET');
      expect(warnings[0]).not.toContain('tok-secret-4711');
    }
  });
});

// ------------------------------------------------------------------------------------------------
// The real process

/** svc did not start: it exited non-zero and `/health` never answered. */
function expectRefusedToStart(svc: SvcProcess) {
  expect(svc.ready, svc.output()).toBe(false);
  expect(svc.exitCode, svc.output()).not.toBe(0);
  expect(svc.exitCode, svc.output()).not.toBeNull();
  expect(svc.logs().some((l) => /listening/i.test(l.msg ?? '')), svc.output()).toBe(false);
}

/**
 * How long a start that must fail may take before the test gives up on it (the process then still runs
 * and `expectRefusedToStart` fails). Not a stopwatch: the quiet value is ~3 s, a busy 2-core machine
 * measured 9 s, and what it guards against (a driver's 30 s default, or retrying for ever) is far longer.
 */
const GIVE_UP_MS = 25_000;

/** The deadline (seconds) that svc's start-up error names, found by `pattern`'s first group. */
function deadlineSeconds(svc: SvcProcess, pattern: RegExp): number {
  const found = pattern.exec(svc.stderr());
  expect(found, svc.output()).not.toBeNull();
  return Number(found![1]);
}

const ADMIN = { SVC_ADMIN_EMAIL: 'admin@example.test', SVC_ADMIN_PASSWORD: 'correct-horse-battery' };

/** Logs the bootstrap admin in and returns the Set-Cookie header. */
async function loginCookie(svc: SvcProcess): Promise<string> {
  const res = await fetch(`${svc.url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: ADMIN.SVC_ADMIN_EMAIL, password: ADMIN.SVC_ADMIN_PASSWORD }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  return res.headers.get('set-cookie') ?? '';
}

describe('configuration of the real process', () => {
  it('an unknown key in svc.config.json: exits non-zero before listening, naming the key', async () => {
    const svc = await startSvc({ appRoot: appRoot({ 'svc.config.json': json({ auth: { sesion: { ttl: 60 } } }) }) });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toContain('auth.sesion');
  });

  it('a wrong type in svc.config.json: exits non-zero before listening, naming the key', async () => {
    const svc = await startSvc({ appRoot: appRoot({ 'svc.config.json': json({ auth: { session: { ttl: 'x' } } }) }) });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toContain('auth.session.ttl');
  });

  it('a bad svc.config.ts stops start-up too, naming the key', async () => {
    const svc = await startSvc({ appRoot: appRoot({ 'svc.config.ts': `const ttl: string = 'x';\nexport default { auth: { session: { ttl } } };\n` }) });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toContain('auth.session.ttl');
  });

  it('a bad svc.config.js (ESM syntax, no package.json in the app root) stops start-up too, naming the key', async () => {
    const svc = await startSvc({ appRoot: appRoot({ 'svc.config.js': `export default { global: { requireAuthentification: false } };\n` }) });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toContain('global.requireAuthentification');
  });

  it("defaults reach the session cookie: sid_app, Max-Age 86400, HttpOnly, Secure, Path=/", async () => {
    const svc = await startReadySvc({ env: ADMIN });
    const cookie = await loginCookie(svc);
    expect(cookie).toMatch(/^sid_app=[\w-]{43};/);
    expect(cookie).toMatch(/;\s*Max-Age=86400\b/i);
    expect(cookie).toMatch(/;\s*HttpOnly\b/i);
    expect(cookie).toMatch(/;\s*Secure\b/i);
    expect(cookie).toMatch(/;\s*Path=\/(;|$)/i);
    expect(cookie).not.toMatch(/Domain=/i);
    expect(await svc.stop()).toBe(0);
  });

  it('a valid svc.config.ts is loaded by the process and its values reach the cookie', async () => {
    const root = appRoot({
      'svc.config.ts': `const ttl: number = 3600;\nexport default { auth: { session: { ttl }, cookie: { name: 'sid_from_ts', secure: false } } };\n`,
    });
    const svc = await startReadySvc({ appRoot: root, env: ADMIN });
    const loaded = await svc.waitForLog((l) => /config loaded/i.test(l.msg ?? ''));
    expect(JSON.stringify(loaded)).toContain('svc.config.ts');
    const cookie = await loginCookie(svc);
    expect(cookie).toMatch(/^sid_from_ts=/);
    expect(cookie).toMatch(/;\s*Max-Age=3600\b/i);
    expect(cookie).not.toMatch(/;\s*Secure\b/i);
    expect(await svc.stop()).toBe(0);
  });

  it('SVC_AUTH_COOKIE_NAME overrides the cookie name of the config file', async () => {
    const root = appRoot({ 'svc.config.json': json({ auth: { cookie: { name: 'sid_from_file' } } }) });
    const svc = await startReadySvc({ appRoot: root, env: { ...ADMIN, SVC_AUTH_COOKIE_NAME: 'sid_from_env' } });
    expect(await loginCookie(svc)).toMatch(/^sid_from_env=/);
    expect(await svc.stop()).toBe(0);
  });

  it(".env in the app root is read at start; a variable the real environment sets keeps its value", async () => {
    const root = appRoot({ '.env': `# as .env.example\nSVC_AUTH_COOKIE_NAME=sid_from_dotenv\nPORT=1\nSVC_ADMIN_EMAIL=admin@example.test\n` });
    const svc = await startReadySvc({ appRoot: root, env: ADMIN }); // PORT is set by the test: the service listens there, not on 1
    expect(await loginCookie(svc)).toMatch(/^sid_from_dotenv=/);
    const line = await svc.waitForLog((l) => /environment read from \.env/.test(l.msg ?? ''));
    expect(line.file).toBe(path.join(root, '.env'));
    expect(await svc.stop()).toBe(0);
  });

  it('SERVER_TOKEN_SECRET set: a warning log line says it is obsolete; the secret is not logged', async () => {
    const svc = await startReadySvc({ env: { SERVER_TOKEN_SECRET: 'jwt-secret-0815-do-not-log' } });
    const warning = await svc.waitForLog((l) => /obsolete/i.test(l.msg ?? ''));
    expect(warning.level).toBe(40);
    expect(warning.msg).toContain('SERVER_TOKEN_SECRET');
    expect(await svc.stop()).toBe(0);
    expect(svc.output()).not.toContain('jwt-secret-0815-do-not-log');
  });

  it('an unreachable CACHE_URL: exits non-zero quickly, naming the store, without the password', async () => {
    const svc = await startSvc({ env: { CACHE_URL: 'redis://:cache-pw-s3cret@127.0.0.1:1' }, startTimeoutMs: GIVE_UP_MS });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toMatch(/store "?cache"?/);
    // Quickly, by its cause rather than a stopwatch: one refused attempt ends start-up, under a short deadline.
    expect(svc.stderr()).toContain('ECONNREFUSED');
    expect(deadlineSeconds(svc, /connect timeout ([\d.]+) s/)).toBeLessThanOrEqual(2);
    expect(svc.output()).not.toContain('cache-pw-s3cret');
  });

  it('every Sentinel unreachable: exits non-zero by the start-up deadline (ioredis would ask them for ever), without the password', async () => {
    const svc = await startSvc({ env: { CACHE_URL: 'redis+sentinel://:sentinel-pw-s3cret@127.0.0.1:1,127.0.0.1:2/mymaster' }, startTimeoutMs: 60_000 });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toMatch(/cannot reach store "cache"/);
    expect(deadlineSeconds(svc, /start-up deadline ([\d.]+) s/)).toBeLessThanOrEqual(10);
    expect(svc.output()).not.toContain('sentinel-pw-s3cret');
  });

  it('a PORT another process holds: exits non-zero naming HOST and PORT', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      const svc = await startSvc({ port, env: { HOST: '127.0.0.1' } });
      expectRefusedToStart(svc);
      expect(svc.stderr()).toContain(`svc failed to start: cannot listen on HOST=127.0.0.1 PORT=${port}: listen EADDRINUSE`);
    } finally {
      holder.close();
    }
  });

  it('an unreachable SVC_STORE_CACHE_PERSISTENT_URL: exits non-zero, naming instance cachePersistent, without the password', async () => {
    const svc = await startSvc({
      env: { SVC_STORE_CACHE_PERSISTENT_URL: 'redis://user:persist-pw-s3cret@127.0.0.1:1/3', ...(redisUrl ? { CACHE_URL: redisUrl } : {}) },
    });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toContain('cachePersistent');
    expect(svc.output()).not.toContain('persist-pw-s3cret');
  });

  it('a MONGODB_URL the driver cannot parse (unescaped @ or / in the password): exits non-zero naming MONGODB_URL, without any of the password', async () => {
    for (const url of ['mongodb://svcuser:pa/ss-s3cret@127.0.0.1:1/app', 'mongodb://svcuser:p@ss-s3cret@127.0.0.1:1/app']) {
      const svc = await startSvc({ env: { MONGODB_URL: url } });
      expectRefusedToStart(svc);
      expect(svc.stderr()).toContain('MONGODB_URL');
      expect(svc.output()).not.toContain('s3cret');
    }
  });

  it('an unreachable MONGODB_URL: exits non-zero quickly, naming MongoDB, without the password', async () => {
    const svc = await startSvc({ env: { MONGODB_URL: 'mongodb://svcuser:mongo-pw-s3cret@127.0.0.1:1/app' }, startTimeoutMs: GIVE_UP_MS });
    expectRefusedToStart(svc);
    expect(svc.stderr()).toMatch(/mongodb/i);
    // Quickly, by its cause: the driver waits its server selection timeout (its default is 30 s).
    expect(svc.stderr()).toContain('ECONNREFUSED');
    expect(deadlineSeconds(svc, /server selection timeout ([\d.]+) s/)).toBeLessThanOrEqual(2);
    expect(svc.output()).not.toContain('mongo-pw-s3cret');
  });
});

describe.skipIf(!redisUrl)('store instances of the real process (Redis)', () => {
  it('SVC_STORE_CACHE_PERSISTENT_URL opens instance cachePersistent next to cache; /health covers both', async () => {
    const persistent = `${redisUrl.replace(/\/\d*$/, '')}/1`;
    // Under a prefix of the test's own, dropped after (the webhook queue's stream has no TTL).
    const keyPrefix = `svctest:${randomUUID().slice(0, 8)}:auth:`;
    const root = appRoot({ 'svc.config.json': json({ auth: { store: { keyPrefix } } }) });
    const svc = await startReadySvc({ appRoot: root, env: { CACHE_URL: redisUrl, SVC_STORE_CACHE_PERSISTENT_URL: persistent } });
    try {
      const res = await fetch(`${svc.url}/health`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok', store: 'ok', db: 'ok' });
      expect(JSON.stringify(svc.logs())).toContain('cachePersistent');
      expect(await svc.stop()).toBe(0);
    } finally {
      await svc.stop();
      await dropPrefix(redisUrl, keyPrefix);
    }
  });
});
