/**
 * `svc doctor`: checks an app's configuration and environment against SPEC.md's migration steps
 * (0.1.x JWT -> 0.2.x sessions) and what production needs. One line per check, each failure with its
 * fix; exit code 1 when any check fails (warnings do not fail).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { loadConfig, MIN_SECRET_KEY_LENGTH, readConfigFile, type Config } from './config/load.ts';
import { appPluginsDir, bundledPluginKeys } from './plugins/loader.ts';
import { checkedSeeds } from './plugins/seeds.ts';
import { Mailer } from './email/transport.ts';
import { createLogger } from './logger.ts';
import { Stores } from './store/index.ts';
import { EmbeddedDatabase } from './db/embedded.ts';
import type { Database } from './db/index.ts';
import { FAILING_AFTER, failingEndpoints } from './webhooks/health.ts';
import { WEBHOOK_COLLECTION } from './webhooks/endpoints.ts';

export type Verdict = 'ok' | 'warn' | 'fail';
export interface Check {
  name: string;
  verdict: Verdict;
  detail: string;
  fix?: string;
}

const REACH_TIMEOUT_MS = 3000;
/** 0.1.x plugin code (migration step 6): the JWT-era request identity and token handling. */
const LEGACY_PATTERNS: [RegExp, string][] = [
  [/\breq(uest)?\.user\b/, 'req.user (use c.get("authUser"): userId, isAdmin, provider)'],
  [/\bauthToken\b/, 'the authToken cookie'],
  [/Bearer\s*\$\{|['"`]Bearer /, 'a Bearer token'],
  [/check-?token|verifyToken|jsonwebtoken/i, 'a legacy token check or import'],
];

const get = (raw: unknown, ...keys: string[]): unknown => keys.reduce<unknown>((o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined), raw);

function sourceFiles(dir: string, depth = 0, pattern = /\.(c|m)?[jt]sx?$/): string[] {
  if (depth > 6 || !existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name === 'node_modules' || e.name.startsWith('.')) return [];
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full, depth + 1, pattern);
    return pattern.test(e.name) ? [full] : [];
  });
}

/** A free `{}` placeholder: an empty object literal (in code, YAML or JSON). */
const FREE_PLACEHOLDER = /(^|[[,(:\s-])\{\s*\}/m;
const ADMIN_ONLY = /\badmin["']?\s*:\s*true\b/;

/**
 * CLI connector scripts that any user may run although they take a free `{}` value (issue 35 finding
 * 10). Scripts are registered by code at start-up, so this reads the app's files instead of running
 * them: each `registerScriptByConfig('alias', {...})` call in plugins/ (its text up to the closing
 * parenthesis), and each YAML or JSON script file (one with an `exe`). A heuristic: a template built
 * at run time escapes it.
 */
function openScripts(appRoot: string, pluginFiles: string[]): string[] {
  const found: string[] = [];
  for (const file of pluginFiles) {
    const text = readFileSync(file, 'utf8');
    for (const call of text.matchAll(/registerScriptByConfig\(\s*(['"`])([^'"`]+)\1/g)) {
      let depth = 0;
      let end = call.index;
      for (; end < text.length; end++) {
        if (text[end] === '(') depth++;
        else if (text[end] === ')' && --depth === 0) break;
      }
      const body = text.slice(call.index + call[0].length, end);
      if (FREE_PLACEHOLDER.test(body) && !ADMIN_ONLY.test(body)) found.push(`${call[2]} (${path.relative(appRoot, file)})`);
    }
  }
  for (const file of sourceFiles(appRoot, 0, /\.(ya?ml|json)$/)) {
    const text = readFileSync(file, 'utf8');
    if (!/(^|["'])exe["']?\s*:/m.test(text) || file.endsWith('package.json') || path.basename(file).startsWith('svc.config')) continue;
    if (FREE_PLACEHOLDER.test(text) && !ADMIN_ONLY.test(text)) found.push(path.relative(appRoot, file));
  }
  return found;
}

/** What stops `check`, as one line without any password; null when it passed. */
async function problemOf(check: () => Promise<unknown>): Promise<string | null> {
  try {
    await check();
    return null;
  } catch (err) {
    return (err as Error).message.replace(/\/\/[^@/]*@/g, '//***@'); // never print a password
  }
}

/**
 * Redis exactly as start-up opens it (Stores.open): every instance and database the config uses, with
 * SVC_STORE_PASSWORD, Cluster and Sentinel URLs, the socket's own error and start-up's deadline.
 */
const redisProblem = (config: Config) => problemOf(async () => (await Stores.open(config, createLogger('silent'))).close());

const mongoProblem = (url: string) =>
  problemOf(async () => {
    const client = new MongoClient(url, { serverSelectionTimeoutMS: REACH_TIMEOUT_MS, connectTimeoutMS: REACH_TIMEOUT_MS });
    try {
      await client.db().command({ ping: 1 });
    } finally {
      await client.close();
    }
  });

/** Every check, in the order of SPEC.md's migration steps. */
export async function runChecks(env: NodeJS.ProcessEnv = process.env, other?: string): Promise<Check[]> {
  const checks: Check[] = [];
  const add = (name: string, verdict: Verdict, detail: string, fix?: string) => checks.push({ name, verdict, detail, ...(verdict === 'ok' ? {} : { fix }) });
  const appRoot = path.resolve(env.SVC_APP_PATH || process.cwd());
  const production = env.NODE_ENV === 'production';

  // A config file that does not load hides no other check: it is one FAIL, the checks of the file's own
  // settings wait for it, and the rest run on the environment alone (the file's settings at their defaults).
  let config: Config;
  let raw: unknown;
  let loaded = true;
  try {
    ({ config } = await loadConfig(env));
    raw = (await readConfigFile(appRoot)).raw;
    add('config', 'ok', config.source ? `${path.relative(process.cwd(), config.source) || config.source} is valid` : 'no config file: defaults apply');
  } catch (err) {
    const waiting = ['cookie name', ...(other ? ['cookie names distinct'] : []), 'requireAuthentication', 'cookie secure', ...(env.SVC_SMTP_URL ? ['email links'] : [])];
    try {
      ({ config } = await loadConfig(env, { raw: {} }));
    } catch {
      // The environment itself is wrong (its message names the variable): every other check reads it.
      add('config', 'fail', (err as Error).message, 'fix the variables or keys named above (docs/configuration.md); the other checks need a config that loads');
      return checks;
    }
    loaded = false;
    add('config', 'fail', (err as Error).message, `fix the keys named above (docs/configuration.md). The checks below ran on the environment alone (the file's settings at their defaults); ${waiting.slice(0, -1).join(', ')} and ${waiting.at(-1)} wait for a config that loads`);
  }

  if (loaded) await configChecks(config, raw, env, production, add, other);
  await environmentChecks(config, env, appRoot, production, add, loaded);
  return checks;
}

type Add = (name: string, verdict: Verdict, detail: string, fix?: string) => void;

/** Step 2 and the app config's own settings: only for a config that loaded. */
async function configChecks(config: Config, raw: unknown, env: NodeJS.ProcessEnv, production: boolean, add: Add, other?: string): Promise<void> {
  // Step 2: explicit (and, beside another app, distinct) cookie names; requireAuthentication. Two apps on
  // one host that both keep the default share one cookie (and key namespace): each login ends the other's
  // session. That is a deployment's problem; the quick start, one app on a laptop, works with the default.
  const cookie = config.auth.cookie.name;
  const explicit = get(raw, 'auth', 'cookie', 'name') !== undefined || Boolean(env.SVC_AUTH_COOKIE_NAME);
  add(
    'cookie name',
    explicit ? 'ok' : production ? 'fail' : 'warn',
    explicit ? `auth.cookie.name is "${cookie}"` : `auth.cookie.name is not set (default "${cookie}")${production ? ' in production' : ''}`,
    'set auth.cookie.name explicitly: "sid_app" for the app, "sid_workbench" for the workbench (two apps on one host with the same name end each other\'s sessions)',
  );
  if (other) {
    const otherConfig = (await loadConfig({ ...env, SVC_APP_PATH: other, SVC_AUTH_COOKIE_NAME: '' })).config;
    const clash = otherConfig.auth.cookie.name === cookie;
    add('cookie names distinct', clash ? 'fail' : 'ok', `this app "${cookie}", ${other}: "${otherConfig.auth.cookie.name}"`, 'give the two apps different auth.cookie.name values, or their sessions overwrite each other');
  }
  if (production) {
    const bundled = bundledPluginKeys();
    const listed = bundled.filter((key) => config.plugins.includes(key));
    add(
      'demo plugins',
      'ok',
      listed.length
        ? `bundled plugins loaded because "plugins" lists them: ${listed.join(', ')}`
        : `the bundled demo plugins are off in production: ${bundled.join(', ')} (list one in "plugins" of the app config to load it)`,
    );
  }
  const requireAuth = config.global.requireAuthentication;
  add('requireAuthentication', requireAuth ? 'ok' : 'warn', `global.requireAuthentication is ${requireAuth}`, 'keep global.requireAuthentication: true unless anonymous access is intended');
  add('cookie secure', config.auth.cookie.secure ? 'ok' : production ? 'fail' : 'warn', `auth.cookie.secure is ${config.auth.cookie.secure}`, 'set auth.cookie.secure: true (HTTPS in front of svc); false is for plain-HTTP development only');
}

/**
 * Steps 3 to 6, reachability and mail: the environment and the app's files. `loaded` false: `config`
 * is the environment's alone (the config file did not load), so mail links, a file setting, wait.
 */
async function environmentChecks(config: Config, env: NodeJS.ProcessEnv, appRoot: string, production: boolean, add: Add, loaded: boolean): Promise<void> {
  // Step 3: environment.
  const obsolete = ['SERVER_TOKEN_SECRET', 'SVC_SERVER_TOKEN_SECRET'].filter((k) => env[k] !== undefined);
  add('JWT variables', obsolete.length ? 'fail' : 'ok', obsolete.length ? `${obsolete.join(', ')} still set (0.1.x JWT)` : 'no 0.1.x JWT variables', `remove ${obsolete.join(' and ')}: sessions need no token secret`);
  const frontends = config.env.frontendUrls;
  const plain = frontends.filter((u) => u.startsWith('http:'));
  // Unset, only pages of svc's own origin (the example UI, a frontend proxied through it) can log in. In
  // production that rests on Host surviving the proxy, which doctor cannot see: list the origin there.
  if (!frontends.length) {
    add(
      'SVC_FRONTEND_URLS',
      production ? 'fail' : 'warn',
      `not set${production ? ' in production' : ''}: only pages served from svc's own origin can log in (a same-origin frontend, or one proxied through it)`,
      production
        ? "set SVC_FRONTEND_URLS to the frontend origins (comma-separated), svc's own public origin too for a same-origin frontend; cross-origin frontends' logins are 403 csrf_failed without it"
        : 'set SVC_FRONTEND_URLS to the origins of cross-origin frontends (comma-separated), or their logins are 403 csrf_failed; a same-origin frontend needs none',
    );
  }
  else if (production && plain.length) add('SVC_FRONTEND_URLS', 'fail', `${plain.join(', ')} is plain http: in production`, 'serve the frontend over https: and list its https: origin (cookies and CORS credentials over plain HTTP can be read on the way)');
  else add('SVC_FRONTEND_URLS', 'ok', frontends.join(', '));

  // Issue 35 finding 10: settings that are fine on a laptop and a leak in production.
  const onlyDev = (name: string, risky: boolean, detail: string, fix: string, fine = 'not set') => add(name, !risky ? 'ok' : production ? 'fail' : 'warn', risky ? `${detail}${production ? ' in production' : ''}` : fine, fix);
  onlyDev('HIDE_SECRETS', !config.env.hideSecrets, 'HIDE_SECRETS=false: the cache list shows passwords and tokens', 'remove HIDE_SECRETS (secret values stay redacted in the cache list)', 'secret values are redacted in the cache list');
  onlyDev('SVC_ALLOW_INSECURE_PROVIDER_URLS', config.env.allowInsecureProviderUrls, 'set: OAuth provider URLs may be plain http: to any host', 'remove SVC_ALLOW_INSECURE_PROVIDER_URLS (client secrets and tokens would cross the network in clear text)');
  onlyDev('SVC_ALLOW_INSECURE_WEBHOOK_URLS', config.env.allowInsecureWebhookUrls, 'set: webhook URLs may be plain http: and point to private or loopback addresses', 'remove SVC_ALLOW_INSECURE_WEBHOOK_URLS (events would cross the network in clear, and an admin could make svc call internal services)');
  onlyDev('SVC_ADMIN_PASSWORD', Boolean(env.SVC_ADMIN_PASSWORD), 'still set', 'remove SVC_ADMIN_PASSWORD from the deployment once the bootstrap admin exists (change that password after the first login)');
  // The app's plugins/: none when the app root is svc's own checkout (its plugins/ are the bundled ones).
  const pluginsDir = appPluginsDir(appRoot);
  const pluginFiles = pluginsDir ? sourceFiles(pluginsDir) : [];
  const open = openScripts(appRoot, pluginFiles);
  onlyDev('CLI scripts', open.length > 0, `${open.join(', ')}: a free {} value without admin: true`, 'mark these scripts admin: true, or give every value an allow, deny or path rule (docs/cli-connector.md)', 'every script that takes a free {} value is admin: true');
  const cacheUrl = config.env.storeUrls.cache;
  add(
    'CACHE_URL',
    cacheUrl ? 'ok' : production ? 'fail' : 'warn',
    cacheUrl ? 'Redis configured for sessions' : `not set${production ? ' in production' : ''}: sessions live in the embedded in-memory store of one process`,
    'set CACHE_URL=redis://host:6379 (Redis 7+)',
  );
  const key = env.SVC_SECRET_ENCRYPTION_KEY ?? '';
  const weakKey = key.length > 0 && key.length < MIN_SECRET_KEY_LENGTH;
  add(
    'SVC_SECRET_ENCRYPTION_KEY',
    key && !weakKey ? 'ok' : production ? 'fail' : 'warn',
    !key
      ? `not set${production ? ' in production' : ''}: OAuth client secrets, TOTP secrets and provider tokens are stored unencrypted`
      : weakKey
        ? `${key.length} characters: a short passphrase can be guessed against the stored ciphertext (fewer than ${MIN_SECRET_KEY_LENGTH})`
        : 'set',
    'set SVC_SECRET_ENCRYPTION_KEY to a long random secret (openssl rand -base64 32)',
  );

  // Step 6 (read first: 0.1.x code is what tells an app that migrates from a new one).
  const legacy = pluginFiles.flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return LEGACY_PATTERNS.filter(([re]) => re.test(text)).map(([, what]) => `${path.relative(appRoot, file)}: ${what}`);
  });

  // Step 5: landing seeds. An app from 0.1.x (JWT variables, 0.1.x plugin code) must seed its landing
  // page; a new app needs one only once a frontend lands on / after login.
  try {
    const { landing } = await checkedSeeds(appRoot, []);
    const migrating = obsolete.length > 0 || legacy.length > 0;
    if (landing.length === 1) add('landing page', 'ok', `"${landing[0]!.doc._id}" is the landing page`);
    else if (!migrating) add('landing page', 'ok', 'none seeded (a new app: needed once a frontend lands on / after login, docs/landing-seeds.md)');
    else add('landing page', 'fail', 'no interaction link has isLandingPage: true', 'seed config/compositions.js and config/interactionLinks.js with exactly one link marked isLandingPage: true');
  } catch (err) {
    add('landing page', 'fail', (err as Error).message, 'fix the seeds named above (docs/landing-seeds.md); /login and /logout are the frontend\'s own pages');
  }

  add('plugin sources', legacy.length ? 'fail' : 'ok', legacy.length ? legacy.join('; ') : 'no 0.1.x request identity or token code in plugins/', 'use c.get("authUser")!.userId / .isAdmin and instance.auth.authenticate(); drop the legacy authentication import');

  // Reachability.
  if (cacheUrl) {
    const problem = await redisProblem(config);
    add('Redis reachable', problem ? 'fail' : 'ok', problem ?? 'PING answered', 'start Redis or fix CACHE_URL (and SVC_STORE_PASSWORD)');
  }
  if (config.env.mongodbUrl) {
    const problem = await mongoProblem(config.env.mongodbUrl);
    add('MongoDB reachable', problem ? 'fail' : 'ok', problem ?? 'ping answered', 'start MongoDB or fix MONGODB_URL');
    if (!problem) await webhookCheck(config, add);
  } else {
    await webhookCheck(config, add);
    add('MongoDB', production ? 'fail' : 'warn', 'MONGODB_URL not set: the embedded database (one process, one folder)', 'set MONGODB_URL for production and for several instances');
  }

  // Mail (CONTRACT 12): the relay answers EHLO, the sender is this app's, and links lead to a listed frontend.
  if (config.env.smtpUrl) {
    let problem: string | null = null;
    try {
      await new Mailer(config, createLogger('silent')).verify();
    } catch (err) {
      problem = (err as Error).message.replace(/\/\/[^@/]*@/g, '//***@');
    }
    add('SMTP reachable', problem ? 'fail' : 'ok', problem ?? 'EHLO answered', 'start the relay or fix SVC_SMTP_URL (smtp://user:pass@host:587, smtps://host:465)');
    add('SVC_MAIL_FROM', env.SVC_MAIL_FROM ? 'ok' : 'fail', env.SVC_MAIL_FROM ? config.env.mailFrom : `not set: mails come from "${config.env.mailFrom}"`, 'set SVC_MAIL_FROM to an address of your domain ("App <no-reply@example.com>"), or relays and mailboxes reject the mails');
    const linkBase = config.auth.email.linkBaseUrl;
    const listed = frontends.includes(new URL(linkBase).origin);
    if (loaded) add('email links', listed ? 'ok' : 'fail', `links in mails go to ${linkBase}${listed ? '' : ', which is not in SVC_FRONTEND_URLS'}`, 'set auth.email.linkBaseUrl to a frontend listed in SVC_FRONTEND_URLS: its pages POST the tokens, and other origins are refused (csrf_failed)');
  } else {
    add('mail', 'ok', 'SVC_SMTP_URL not set: sign-up, verification, password reset and magic links are off (501 email_not_configured)');
  }
}

/**
 * Webhook endpoints whose last FAILING_AFTER deliveries all failed (a receiver down, a URL gone, a
 * secret it no longer takes): read from the database, as the deliveries route shows them. The embedded
 * database is read only when svc is not running on it (one process at a time) and it has endpoints.
 */
async function webhookCheck(config: Config, add: Add): Promise<void> {
  let db: Database;
  try {
    if (config.env.mongodbUrl) {
      const { MongoDatabase } = await import('./db/mongo.ts');
      db = await MongoDatabase.connect(config.env.mongodbUrl);
    } else {
      if (!existsSync(path.join(config.env.dataDir, `${WEBHOOK_COLLECTION}.db`))) return;
      db = new EmbeddedDatabase(config.env.dataDir);
    }
  } catch (err) {
    // Not an error of the deployment, but a check that did not run: say so, and how to run it.
    add(
      'webhooks',
      'warn',
      `not checked: ${(err as Error).message.replace(/\/\/[^@/]*@/g, '//***@')}`,
      config.env.mongodbUrl
        ? 'make MONGODB_URL reachable from here and run svc doctor again'
        : 'the embedded database is one process\'s at a time: run svc doctor while svc is stopped, or read GET /auth/webhooks/<id>/deliveries',
    );
    return;
  }
  try {
    const failing = await failingEndpoints(db);
    if (!failing.length) return add('webhooks', 'ok', `no endpoint failed its last ${FAILING_AFTER} deliveries`);
    const list = failing.map((f) => `${f.id} (${f.url}: ${f.lastError ?? `status ${f.lastStatusCode}`}, failing since ${f.since})`).join('; ');
    add(
      'webhooks',
      'warn',
      `${failing.length === 1 ? 'an endpoint' : `${failing.length} endpoints`} failed the last ${FAILING_AFTER} deliveries: ${list}`,
      'check the receiver (GET /auth/webhooks/<id>/deliveries shows each attempt; the log has "webhook delivery attempt failed" lines), or set it inactive (PATCH active: false) or delete it',
    );
  } finally {
    await db.close();
  }
}

const MARK: Record<Verdict, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' };

/** Prints one line per check (with its fix) and returns the exit code; `other`: the app root of `--with`. */
export async function doctor(other?: string, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const checks = await runChecks(env, other ? path.resolve(other) : undefined);
  for (const c of checks) process.stdout.write(`${MARK[c.verdict]} ${c.name}: ${c.detail}${c.fix ? `\n       fix: ${c.fix}` : ''}\n`);
  const failed = checks.filter((c) => c.verdict === 'fail').length;
  process.stdout.write(failed ? `${failed} check${failed === 1 ? '' : 's'} failed\n` : 'all checks passed\n');
  return failed ? 1 : 0;
}
