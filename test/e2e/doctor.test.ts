// `svc doctor` (issue 19 part 4) on a good and a broken app root: one line per check with a fix,
// exit code 1 when any check fails. Run as an operator runs it: `node bin/svc.js doctor` in a process,
// against the suites' real Redis and MongoDB.

import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { checkoutCopy } from '../support/checkout-copy.ts';
import { readDoc } from '../support/docs.ts';
import { redisServerAvailable, startPrivateRedis } from '../support/private-redis.ts';
import { freePort, PROJECT_DIR, stopAll, tempDir } from '../support/spawn.ts';

afterAll(stopAll); // the temp app roots and copies

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');

/** `svc doctor` of the svc in `checkout` (this one unless given) on the app root `root`. */
function doctor(root: string, env: Record<string, string>, args: string[] = [], checkout = PROJECT_DIR) {
  const run = spawnSync(process.execPath, [path.join(checkout, 'bin/svc.js'), 'doctor', ...args], {
    cwd: checkout,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/root', SVC_APP_PATH: root, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: run.status, out: run.stdout, lines: run.stdout.split('\n') };
}

/** An app root: config, seeds and plugins as given. */
function app(files: Record<string, string>): string {
  const root = tempDir('svc-doctor-');
  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), content);
  }
  return root;
}

const seeds = (pathname: string) => ({
  'config/compositions.js': `export default [{ _id: 'home', pathname: { default: '${pathname}' }, widgetsLayout: [] }];\n`,
  'config/interactionLinks.js': "export default [{ _id: 'homeLink', composition: 'home', slotType: 'page', isLandingPage: true }];\n",
});

describe.skipIf(!redisUrl || !mongoUrl)('svc doctor', () => {
  it('a migrated app in production: every check ok, exit 0', () => {
    const root = app({
      'svc.config.json': JSON.stringify({ auth: { cookie: { name: 'sid_app' } }, global: { requireAuthentication: true } }),
      ...seeds('home'),
      'plugins/reports/index.js': "import { Hono } from 'hono';\nexport default (instance) => new Hono().get('/mine', instance.auth.authenticate(), (c) => c.json({ user: c.get('authUser').userId }));\n",
      // Narrow scripts: every value checked, or admin-only.
      'plugins/ops/index.js': "registerScriptByConfig('count', { exe: '/usr/bin/wc', args: ['-l', { path: 'reports' }] });\nregisterScriptByConfig('run-any', { exe: '/bin/echo', args: [{}], admin: true });\n",
    });
    const { code, out, lines } = doctor(root, { NODE_ENV: 'production', CACHE_URL: redisUrl, MONGODB_URL: mongoUrl, SVC_FRONTEND_URLS: 'https://app.example.com', SVC_SECRET_ENCRYPTION_KEY: 'a long random secret for the doctor test' });
    expect(code, out).toBe(0);
    expect(lines.filter((l) => /^(WARN|FAIL)/.test(l)), out).toEqual([]);
    for (const name of ['config', 'cookie name', 'requireAuthentication', 'cookie secure', 'JWT variables', 'SVC_FRONTEND_URLS', 'HIDE_SECRETS', 'SVC_ALLOW_INSECURE_PROVIDER_URLS', 'SVC_ADMIN_PASSWORD', 'CLI scripts', 'CACHE_URL', 'SVC_SECRET_ENCRYPTION_KEY', 'landing page', 'plugin sources', 'Redis reachable', 'MongoDB reachable']) {
      expect(lines.some((l) => l.startsWith(`ok   ${name}:`)), `${name}\n${out}`).toBe(true);
    }
    expect(out).toContain('all checks passed');
    // Production names the bundled demo plugins it keeps off (issue 53).
    expect(lines).toContain('ok   demo plugins: the bundled demo plugins are off in production: svc__cache, svc__todo (list one in "plugins" of the app config to load it)');
  });

  it('an app half-way from 0.1.x: each problem is one FAIL line with its fix, exit 1; no password is printed', async () => {
    const root = app({
      'svc.config.json': JSON.stringify({ auth: { cookie: { secure: false } } }),
      ...seeds('/login'),
      'plugins/legacy/index.js': "export default () => (req) => req.user._id;\n",
    });
    const dead = `redis://:hunter2@127.0.0.1:${await freePort()}`;
    const { code, out } = doctor(root, { NODE_ENV: 'production', CACHE_URL: dead, SERVER_TOKEN_SECRET: 'old-jwt-secret' });
    expect(code, out).toBe(1);
    const expectFail = (name: string, detail: RegExp, fix: RegExp) => {
      const at = out.split('\n').findIndex((l) => l.startsWith(`FAIL ${name}:`));
      expect(at, `${name}\n${out}`).toBeGreaterThan(-1);
      const [line, fixLine] = out.split('\n').slice(at, at + 2);
      expect(line).toMatch(detail);
      expect(fixLine).toMatch(/^\s+fix: /);
      expect(fixLine).toMatch(fix);
    };
    expectFail('cookie name', /not set/, /auth\.cookie\.name/);
    expectFail('cookie secure', /false/, /secure: true/);
    expectFail('JWT variables', /SERVER_TOKEN_SECRET/, /remove SERVER_TOKEN_SECRET/);
    expectFail('SVC_FRONTEND_URLS', /not set/, /SVC_FRONTEND_URLS/);
    expectFail('SVC_SECRET_ENCRYPTION_KEY', /production/, /SVC_SECRET_ENCRYPTION_KEY/);
    expectFail('landing page', /reserved/, /\/login and \/logout/);
    expectFail('plugin sources', /plugins\/legacy\/index\.js: req\.user/, /authUser/);
    expectFail('Redis reachable', /cannot reach store "cache" at redis:\/\/\*\*\*@127\.0\.0\.1:\d+ .*ECONNREFUSED/, /CACHE_URL/);
    expectFail('MongoDB', /MONGODB_URL not set/, /MONGODB_URL/);
    expect(out).not.toContain('hunter2');
    expect(out).not.toContain('old-jwt-secret');
    expect(out).toMatch(/\d+ checks failed/);
  });

  it('a new app (no seeds, nothing from 0.1.x) is not failed for its landing page; an app with 0.1.x traces is', () => {
    const env = { CACHE_URL: redisUrl, MONGODB_URL: mongoUrl, SVC_FRONTEND_URLS: 'http://localhost:5173' };
    const fresh = doctor(app({ 'svc.config.json': JSON.stringify({ auth: { cookie: { name: 'sid_app' } } }) }), env);
    expect(fresh.out).toMatch(/^ok {3}landing page: none seeded \(a new app/m);
    expect(fresh.code, fresh.out).toBe(0);
    const migrating = doctor(app({ 'plugins/legacy/index.js': "export default () => (req) => req.user._id;\n" }), env);
    expect(migrating.out).toMatch(/^FAIL landing page: no interaction link has isLandingPage: true/m);
  });

  it("svc's own checkout as the app root (a fresh clone's first run): its bundled plugins are not read as the app's", () => {
    const env = { CACHE_URL: redisUrl, MONGODB_URL: mongoUrl, SVC_FRONTEND_URLS: 'http://localhost:5173', SVC_DATA_DIR: tempDir('svc-doctor-data-') };
    const own = checkoutCopy(); // a fresh clone's files: not a developer's svc.config.json or .env in this checkout
    const ownRun = doctor(own, env, [], own);
    expect(ownRun.out).toMatch(/^ok {3}plugin sources: /m);
    expect(ownRun.out).toMatch(/^ok {3}landing page: none seeded/m);
    expect(ownRun.out).toMatch(/^ok {3}CLI scripts: /m);
  });

  it('production leaks of issue 35: HIDE_SECRETS=false, insecure provider URLs, an http: frontend, SVC_ADMIN_PASSWORD still set, an open CLI script with a free {} value', () => {
    const root = app({
      'svc.config.json': JSON.stringify({ auth: { cookie: { name: 'sid_app' } } }),
      ...seeds('home'),
      'plugins/ops/index.js': "registerScriptByConfig('echo-any', { exe: '/bin/echo', args: ['--', {}] });\nregisterScriptByConfig('safe', { exe: '/bin/echo', args: [{ allow: '[a-z]+' }] });\n",
      'scripts/tail-any.yaml': 'exe: /usr/bin/tail\nargs:\n  - {}\n',
    });
    const env = { CACHE_URL: redisUrl, MONGODB_URL: mongoUrl, SVC_FRONTEND_URLS: 'http://app.example.com', HIDE_SECRETS: 'false', SVC_ALLOW_INSECURE_PROVIDER_URLS: '1', SVC_ADMIN_PASSWORD: 'correct horse battery', SVC_SECRET_ENCRYPTION_KEY: 'x' };
    const { code, out } = doctor(root, { ...env, NODE_ENV: 'production' });
    expect(code, out).toBe(1);
    expect(out).toMatch(/FAIL SVC_FRONTEND_URLS: http:\/\/app\.example\.com is plain http: in production/);
    expect(out).toMatch(/FAIL HIDE_SECRETS: .*in production/);
    expect(out).toMatch(/FAIL SVC_ALLOW_INSECURE_PROVIDER_URLS: /);
    expect(out).toMatch(/FAIL SVC_ADMIN_PASSWORD: still set/);
    expect(out).toMatch(/FAIL CLI scripts: echo-any \(plugins\/ops\/index\.js\), scripts\/tail-any\.yaml: a free \{\} value without admin: true/);
    expect(out).toMatch(/FAIL SVC_SECRET_ENCRYPTION_KEY: 1 characters: a short passphrase can be guessed/);
    expect(out).not.toContain('safe (');
    expect(out).not.toContain('correct horse battery');
    // Outside production the same settings are warnings.
    const dev = doctor(root, env);
    for (const name of ['HIDE_SECRETS', 'SVC_ALLOW_INSECURE_PROVIDER_URLS', 'SVC_ADMIN_PASSWORD', 'CLI scripts', 'SVC_SECRET_ENCRYPTION_KEY']) expect(dev.out).toMatch(new RegExp(`WARN ${name}: `));
    // The embedded store is a development setting too: a warning there, a failure in production.
    const { CACHE_URL: _unused, ...noRedis } = env;
    expect(doctor(root, noRedis).out).toMatch(/^WARN CACHE_URL: not set: sessions live in the embedded/m);
    expect(doctor(root, { ...noRedis, NODE_ENV: 'production' }).out).toMatch(/^FAIL CACHE_URL: not set in production/m);
    expect(dev.out).toMatch(/ok {3}SVC_FRONTEND_URLS: http:/);
  });

  it('--with another app root: the same cookie name on both is a FAIL (their sessions would overwrite each other)', () => {
    const config = JSON.stringify({ auth: { cookie: { name: 'sid_app' } } });
    const workbench = app({ 'svc.config.json': config });
    const { code, out } = doctor(app({ 'svc.config.json': config, ...seeds('home') }), { CACHE_URL: redisUrl, SVC_FRONTEND_URLS: 'http://localhost:5173' }, ['--with', workbench]);
    expect(code).toBe(1);
    expect(out).toMatch(/FAIL cookie names distinct: this app "sid_app", .*: "sid_app"/);
    const distinct = app({ 'svc.config.json': JSON.stringify({ auth: { cookie: { name: 'sid_workbench' } } }) });
    expect(doctor(app({ 'svc.config.json': config, ...seeds('home') }), { CACHE_URL: redisUrl, SVC_FRONTEND_URLS: 'http://localhost:5173' }, ['--with', distinct]).out).toMatch(/ok {3}cookie names distinct/);
  });

  it('a config file that does not parse is one FAIL naming the key', () => {
    const { code, out } = doctor(app({ 'svc.config.json': JSON.stringify({ auth: { cookie: { nmae: 'sid_app' } } }) }), {});
    expect(code).toBe(1);
    expect(out).toMatch(/FAIL config: [\s\S]*auth\.cookie\.nmae: unknown key/);
    expect(out).toMatch(/^1 check failed$/m);
  });

  // A newcomer's walkthrough: sign-up without SVC_SMTP_URL printed that one line and "1 check failed",
  // hiding every other check (a dead Redis, an obsolete JWT variable).
  it('a config that does not load is one FAIL among the checks that need only the environment and the app files', async () => {
    const root = app({ 'svc.config.json': JSON.stringify({ auth: { signup: { enabled: true } } }), 'plugins/legacy/index.js': "export default () => (req) => req.user._id;\n" });
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const { code, out, lines } = doctor(root, { CACHE_URL: dead, MONGODB_URL: mongoUrl, SERVER_TOKEN_SECRET: 'old-jwt-secret' });
    expect(code, out).toBe(1);
    expect(lines[0]).toBe('FAIL config: auth.signup.enabled needs mail: set SVC_SMTP_URL (smtp://host:port or smtps://host:port)');
    expect(lines[1]).toMatch(/^\s+fix: .*The checks below ran on the environment alone .*; cookie name, requireAuthentication and cookie secure wait for a config that loads$/);
    expect(out).toMatch(/^FAIL JWT variables: SERVER_TOKEN_SECRET still set/m);
    expect(out).toMatch(/^ok {3}CACHE_URL: /m);
    expect(out).toMatch(/^FAIL Redis reachable: cannot reach store "cache" .*ECONNREFUSED/m);
    expect(out).toMatch(/^ok {3}MongoDB reachable: ping answered$/m);
    expect(out).toMatch(/^FAIL plugin sources: plugins\/legacy\/index\.js: req\.user/m);
    expect(out).toMatch(/^FAIL landing page: /m);
    expect(out).toMatch(/^ok {3}mail: SVC_SMTP_URL not set/m);
    // What reads the file's own settings is not guessed from defaults.
    expect(out).not.toMatch(/^(ok|WARN|FAIL) +(cookie name|requireAuthentication|cookie secure):/m);
    expect(out).toMatch(/^5 checks failed$/m);
  });

  it('an environment that does not parse: its error in full, and the other checks need a config that loads', () => {
    const { code, out } = doctor(app({}), { SVC_FRONTEND_URLS: 'not-a-url' });
    expect(code).toBe(1);
    expect(out).toBe('FAIL config: SVC_FRONTEND_URLS: "not-a-url" must start with http:// or https:// (e.g. http://not-a-url)\n       fix: fix the variables or keys named above (docs/configuration.md); the other checks need a config that loads\n1 check failed\n');
  });
});

// A newcomer's walkthrough: the quick start (svc's checkout, nothing set) exited 1 on the default cookie
// name and the unset SVC_FRONTEND_URLS, both fine for one app with a same-origin frontend. The checkout is
// a fresh clone's copy: a developer's own svc.config.json or .env in this one is not read (issue 53).
describe('svc doctor: the quick start', () => {
  let fresh: string;
  beforeAll(() => {
    fresh = checkoutCopy();
  });

  it('outside production the default cookie name and no SVC_FRONTEND_URLS are warnings (exit 0); in production failures', () => {
    const env = { SVC_DATA_DIR: tempDir('svc-doctor-data-') };
    const dev = doctor(fresh, env, [], fresh);
    expect(dev.code, dev.out).toBe(0);
    expect(dev.out).toMatch(/^WARN cookie name: auth\.cookie\.name is not set \(default "sid_app"\)$/m);
    expect(dev.out).toMatch(/^WARN SVC_FRONTEND_URLS: not set: only pages served from svc's own origin can log in/m);
    expect(dev.out).toMatch(/^\s+fix: set SVC_FRONTEND_URLS to the origins of cross-origin frontends .*403 csrf_failed; a same-origin frontend needs none$/m);
    expect(dev.lines.filter((l) => l.startsWith('FAIL')), dev.out).toEqual([]);
    expect(dev.out).toContain('all checks passed');
    const prod = doctor(fresh, { ...env, NODE_ENV: 'production' }, [], fresh);
    expect(prod.code, prod.out).toBe(1);
    expect(prod.out).toMatch(/^FAIL cookie name: auth\.cookie\.name is not set \(default "sid_app"\) in production$/m);
    expect(prod.out).toMatch(/^FAIL SVC_FRONTEND_URLS: not set in production/m);
  });

  it("the operator's guide's example is a real run of the quick start, every line in order", () => {
    const block = /```sh\nnpx svc doctor\n([\s\S]*?)```/.exec(readDoc('docs/operations.md'))?.[1];
    expect(block, 'the `npx svc doctor` example in docs/operations.md').toBeDefined();
    const real = doctor(fresh, { SVC_DATA_DIR: tempDir('svc-doctor-data-') }, [], fresh);
    expect(block!.trimEnd().split('\n').map((l) => l.replace(/^# /, ''))).toEqual(real.out.trimEnd().split('\n'));
  });
});

// Arguments: a typo or a missing folder used to run the checks anyway, skipping --with's (exit 0).
describe('svc doctor: its arguments', () => {
  const run = (args: string[]) => {
    const r = spawnSync(process.execPath, [path.join(PROJECT_DIR, 'bin/svc.js'), 'doctor', ...args], { cwd: PROJECT_DIR, env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/root', SVC_APP_PATH: app({}) }, encoding: 'utf8', timeout: 60_000 });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };

  it('--help prints the usage (exit 0) and checks nothing', () => {
    const { code, out } = run(['--help']);
    expect(code).toBe(0);
    expect(out).toContain('svc doctor [--with <other app root>]');
    expect(out).not.toMatch(/^(ok|WARN|FAIL) /m);
  });

  it.each([
    [['--wiht', '/x'], "Unknown option '--wiht'"],
    [['--with'], "Option '--with <value>' argument missing"],
    [['--with', '/nonexistent/app-root'], '--with /nonexistent/app-root: no such folder'],
  ])('%j: refused with exit 2, naming the problem, no checks run', (args, message) => {
    const { code, out, err } = run(args);
    expect(code).toBe(2);
    expect(err).toContain(message);
    expect(out).toBe('');
  });
});

describe.skipIf(!redisServerAvailable)('svc doctor: Redis, opened as start-up opens it', () => {
  it('a Redis with a password: ok with SVC_STORE_PASSWORD; without it, FAIL with the server\'s own reason', async () => {
    const redis = await startPrivateRedis(await freePort());
    try {
      await redis.command(['CONFIG', 'SET', 'requirepass', 'doctor-pw-s3cret']);
      const root = app({});
      const withPassword = doctor(root, { CACHE_URL: redis.url, SVC_STORE_PASSWORD: 'doctor-pw-s3cret' });
      expect(withPassword.out).toMatch(/^ok {3}Redis reachable: PING answered$/m);
      const without = doctor(root, { CACHE_URL: redis.url });
      expect(without.out).toMatch(/^FAIL Redis reachable: cannot reach store "cache" .*NOAUTH/m);
      expect(without.code).toBe(1);
      expect(withPassword.out + without.out).not.toContain('doctor-pw-s3cret');
    } finally {
      await redis.kill();
    }
  });
});
