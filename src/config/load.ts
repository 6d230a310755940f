import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import addressparser from 'nodemailer/lib/addressparser';
import * as v from 'valibot';
import { providerUrlProblem } from '../auth/oauth/provider-urls.ts';
import { configSchema, type CustomTemplate, type FileConfig } from './schema.ts';
import { defaultExport } from '../typescript.ts';
import { parseRedisUrl } from '../store/redis-url.ts';

/** Everything svc reads from the environment (CONTRACT section 1 and SPEC.md's table), parsed once. */
export interface EnvConfig {
  /** `NODE_ENV=production`: what is for development only (the demo plugins) stays off unless asked for. */
  production: boolean;
  port: number;
  host: string;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** `LOG_PRETTY=1` (development): human log lines through pino-pretty, a devDependency; JSON lines otherwise. */
  logPretty: boolean;
  appRoot: string;
  dataDir: string;
  /** Store instance id -> Redis URL. Empty: the embedded in-memory store serves instance `cache`. */
  storeUrls: Record<string, string>;
  storePassword?: string;
  mongodbUrl?: string;
  adminEmail?: string;
  adminPassword?: string;
  cookieName?: string;
  callbackBaseUrl: string;
  serverBaseUrl?: string;
  frontendUrls: string[];
  /**
   * The service's own public origins besides each request's own: those of `SVC_SERVER_BASE_URL` and
   * `AUTH_CALLBACK_BASE_URL`; with neither set, `http://localhost:$PORT` only when HOST is a loopback
   * address (issue 24, finding 14: on 0.0.0.0 that origin is any page on the visitor's own machine).
   */
  ownOrigins: string[];
  secretEncryptionKey?: string;
  /** `SVC_ALLOW_INSECURE_PROVIDER_URLS=1`: provider URLs may use plain http: to any host, not only to loopback. */
  allowInsecureProviderUrls: boolean;
  /** `SVC_ALLOW_INSECURE_WEBHOOK_URLS=1`: webhook URLs may use plain http: and point to private or loopback addresses. */
  allowInsecureWebhookUrls: boolean;
  /** `HIDE_SECRETS` (SPEC.md rule 7): anything but `false`/`0` keeps secret-looking JSON values redacted in the cache list. */
  hideSecrets: boolean;
  /** `SVC_SMTP_URL` (CONTRACT 12): `smtp://[user:pass@]host:port` (STARTTLS when offered) or `smtps://`; unset: no mail. */
  smtpUrl?: string;
  /** `SVC_MAIL_FROM`: the sender of every mail. */
  mailFrom: string;
  /** The captcha provider's secret (CONTRACT 14), from the variable `auth.captcha.secretEnv` names. */
  captchaSecret?: string;
}

type EmailConfig = FileConfig['auth']['email'];

export interface Config extends Omit<FileConfig, 'auth'> {
  auth: Omit<FileConfig['auth'], 'store' | 'email'> & { store: { keyPrefix: string }; email: Omit<EmailConfig, 'linkBaseUrl'> & { linkBaseUrl: string } };
  env: EnvConfig;
  /** Which file the config came from, if any (for log lines). */
  source?: string;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const CONFIG_FILES = ['svc.config.ts', 'svc.config.js', 'svc.config.json'];

/** `SVC_STORE_CACHE_PERSISTENT_URL` -> `cachePersistent`. */
export function storeInstanceName(envName: string): string {
  return envName
    .toLowerCase()
    .split('_')
    .map((part, i) => (i === 0 ? part : part.charAt(0).toUpperCase() + part.slice(1)))
    .join('');
}

/**
 * The origin of an http(s) URL from the environment. Any other scheme (`capacitor:`, `tauri:`, `app:`,
 * `file:`) has the opaque origin, which browsers send as `Origin: null`, as do sandboxed iframes and
 * data: URLs of any site: allowing it would let every such page pass CSRF and CORS (security review,
 * issue 24, finding 6). So such an entry stops start-up instead.
 */
function webOrigin(variable: string, value: string): string {
  // `localhost:4302` parses as a URL of scheme "localhost:", so say what is missing rather than
  // calling it a custom scheme. A scheme is letters before a colon that no port digit follows.
  if (!/^[a-z][a-z0-9+.-]*:(?!\d)/i.test(value)) {
    throw new ConfigError(`${variable}: "${value}" must start with http:// or https:// (e.g. http://${value})`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${variable}: "${value}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${variable}: "${value}" has no web origin (custom schemes and file: are not supported; use the http(s) origin the app is served from)`);
  }
  return url.origin;
}

/** A base URL variable: checked like an origin, kept with its path, without a trailing slash. */
function baseUrl(variable: string, value: string | undefined): string | undefined {
  const trimmed = value?.trim().replace(/\/+$/, '');
  if (!trimmed) return undefined;
  webOrigin(variable, trimmed);
  return trimmed;
}

/** 127.0.0.0/8, ::1 and localhost: only this machine can connect. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * `localhost` and `127.0.0.1` are different sites to a browser: a cookie the service sets under one
 * name is not sent from a frontend under the other (SameSite), so logins "work" and then every call
 * is 401. Worth a start-up warning when the service's base URL and the frontends disagree.
 */
function mixedLoopbackNames(ownUrls: string[], frontendUrls: string[]): string | undefined {
  const loopbackName = (u: string) => {
    const host = new URL(u).hostname;
    return host === 'localhost' ? 'localhost' : isLoopback(host) ? 'address' : undefined;
  };
  for (const own of ownUrls) {
    const name = loopbackName(own);
    const clashing = name ? frontendUrls.filter((f) => ![undefined, name].includes(loopbackName(f))) : [];
    if (clashing.length === 0) continue;
    return (
      `the service's base URL (${own}) and SVC_FRONTEND_URLS (${clashing.join(', ')}) mix localhost and 127.0.0.1: browsers treat ` +
      'them as different sites, so the session cookie is not sent; use the same host name in both (set SVC_SERVER_BASE_URL)'
    );
  }
  return undefined;
}

const SMTP_FORM = 'smtp://[user:pass@]host:port (STARTTLS when the server offers it) or smtps://[user:pass@]host:port (TLS from the start)';
const PERCENT_ENCODE = 'percent-encode special characters in the user and password (/ as %2F, @ as %40, ? as %3F, # as %23)';

/**
 * What is wrong with a `SVC_SMTP_URL`, or undefined. Checked here because nodemailer reads it only
 * when the mailer is built, failing with a bare "Invalid URL" that names no variable; and because its
 * parser (Node's legacy `url.parse`) takes `smtp://us/er:pw@host` as host "us": an unencoded `/`, `?`,
 * `#` or `@` in the credentials would send the mail and the password elsewhere rather than fail. So no
 * `@` may stand outside the credentials. The URL is never repeated: it may hold a password.
 */
function smtpUrlProblem(url: string): string | undefined {
  if (!/^smtps?:\/\//.test(url)) return `must be ${SMTP_FORM}`;
  if (!URL.canParse(url)) return `is not a valid URL: it must be ${SMTP_FORM}; ${PERCENT_ENCODE}`;
  const authority = /^smtps?:\/\/([^/?#]*)/.exec(url)?.[1] ?? '';
  const afterAuthority = url.slice(url.indexOf('//') + 2 + authority.length);
  if (authority.split('@').length > 2 || afterAuthority.includes('@')) return `has an unencoded /, ?, # or @ in its user or password: ${PERCENT_ENCODE}`;
  if (!new URL(url).hostname) return `names no host: it must be ${SMTP_FORM}`;
  return undefined;
}

/**
 * Whether `value` is one mailbox, `user@host` or `Name <user@host>`, read by nodemailer's own address
 * parser (the one that reads it when sending): a list, a group or a bare name would be sent as another
 * sender than meant, or refused by the relay at the first mail rather than at start-up. A line break
 * would start a new mail header.
 */
function isOneMailbox(value: string): boolean {
  // Control characters (a line break starts a header), and angle brackets that do not pair up.
  const control = [...value].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);
  if (control || (value.match(/</g) ?? []).length !== (value.match(/>/g) ?? []).length) return false;
  const parsed = addressparser(value);
  const only = parsed.length === 1 ? parsed[0] : undefined;
  if (only === undefined || ('group' in only && only.group)) return false;
  // A second address the parser took for the name (`a@b c@d`) is a list all the same.
  return ADDR_SPEC.test(only.address) && !only.name.includes('@');
}
/** `local@domain` without the characters that delimit addresses, names and lists. */
const ADDR_SPEC = /^[^@\s<>()",;:\\[\]]+@[^@\s<>()",;:\\[\]]+$/;

function parseEnv(env: NodeJS.ProcessEnv, appRoot: string): { env: EnvConfig; warnings: string[] } {
  const warnings: string[] = [];
  const port = Number(env.PORT ?? 3000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError(`PORT must be a port number, got "${env.PORT}"`);
  const logLevel = (env.LOG_LEVEL ?? 'info').toLowerCase();
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of debug, info, warn, error, got "${env.LOG_LEVEL}"`);
  }
  const logPretty = (env.LOG_PRETTY ?? '').trim().toLowerCase();
  if (!['', '0', 'false', '1', 'true'].includes(logPretty)) throw new ConfigError(`LOG_PRETTY must be 1 (human log lines, development) or 0, got "${env.LOG_PRETTY}"`);

  // No prototype: store instance names come from requests too (the cache list's `instance`), and a name
  // like `constructor` must not find an inherited property.
  const storeUrls: Record<string, string> = Object.create(null) as Record<string, string>;
  const cacheUrl = env.CACHE_URL || env.SVC_CACHE_URL;
  if (env.CACHE_URL && env.SVC_CACHE_URL && env.CACHE_URL !== env.SVC_CACHE_URL) {
    warnings.push('CACHE_URL and SVC_CACHE_URL are both set and differ: CACHE_URL is used; remove one of them');
  }
  if (cacheUrl) storeUrls.cache = cacheUrl;
  for (const [name, value] of Object.entries(env)) {
    const m = /^SVC_STORE_([A-Z0-9_]+)_URL$/.exec(name);
    if (m?.[1] && value) storeUrls[storeInstanceName(m[1])] = value;
  }
  for (const [id, url] of Object.entries(storeUrls)) {
    // Named by its variable; the URL itself is not repeated: it may hold a password.
    const variable = id === 'cache' ? (env.CACHE_URL ? 'CACHE_URL' : 'SVC_CACHE_URL') : `SVC_STORE_${id.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}_URL`;
    try {
      parseRedisUrl(url);
    } catch (err) {
      throw new ConfigError(`${variable} (store instance "${id}"): ${(err as Error).message}`);
    }
  }

  const smtpUrl = env.SVC_SMTP_URL?.trim() || undefined;
  const smtpProblem = smtpUrl && smtpUrlProblem(smtpUrl);
  if (smtpProblem) throw new ConfigError(`SVC_SMTP_URL ${smtpProblem}`);
  const mailFrom = env.SVC_MAIL_FROM?.trim() || 'svc <no-reply@localhost>';
  if (!isOneMailbox(mailFrom)) throw new ConfigError(`SVC_MAIL_FROM must be one address ("Name <user@host>" or "user@host") on one line, got ${JSON.stringify(mailFrom)}`);

  if (env.MONGODB_URL && !/^mongodb(\+srv)?:\/\//.test(env.MONGODB_URL)) {
    throw new ConfigError('MONGODB_URL must start with mongodb:// or mongodb+srv://');
  }
  if (env.SERVER_TOKEN_SECRET || env.SVC_SERVER_TOKEN_SECRET) {
    warnings.push('SERVER_TOKEN_SECRET / SVC_SERVER_TOKEN_SECRET are obsolete since 0.2 (sessions replaced JWTs): remove them');
  }
  const keyLength = env.SVC_SECRET_ENCRYPTION_KEY?.length ?? 0;
  if (keyLength > 0 && keyLength < MIN_SECRET_KEY_LENGTH) {
    warnings.push(`SVC_SECRET_ENCRYPTION_KEY has ${keyLength} characters: a short passphrase can be guessed against the stored ciphertext; use ${MIN_SECRET_KEY_LENGTH} or more (openssl rand -base64 32)`);
  }
  const insecure = (env.SVC_ALLOW_INSECURE_PROVIDER_URLS ?? '').trim().toLowerCase();
  if (!['', '0', 'false', '1', 'true'].includes(insecure)) {
    throw new ConfigError(`SVC_ALLOW_INSECURE_PROVIDER_URLS must be 1 (or true) to allow, 0 (or false) to refuse, got "${env.SVC_ALLOW_INSECURE_PROVIDER_URLS}"`);
  }
  const allowInsecureProviderUrls = insecure === '1' || insecure === 'true';
  if (allowInsecureProviderUrls) {
    warnings.push('SVC_ALLOW_INSECURE_PROVIDER_URLS=1: OAuth provider URLs may use plain http: to any host (codes and tokens cross the network in clear); for development only');
  }
  const insecureWebhooks = (env.SVC_ALLOW_INSECURE_WEBHOOK_URLS ?? '').trim().toLowerCase();
  if (!['', '0', 'false', '1', 'true'].includes(insecureWebhooks)) {
    throw new ConfigError(`SVC_ALLOW_INSECURE_WEBHOOK_URLS must be 1 (or true) to allow, 0 (or false) to refuse, got "${env.SVC_ALLOW_INSECURE_WEBHOOK_URLS}"`);
  }
  const allowInsecureWebhookUrls = insecureWebhooks === '1' || insecureWebhooks === 'true';
  if (allowInsecureWebhookUrls) {
    warnings.push('SVC_ALLOW_INSECURE_WEBHOOK_URLS=1: webhook URLs may use plain http: and point to private or loopback addresses (events cross the network in clear, and an admin can make svc call internal services); for development only');
  }
  const frontendUrls = (env.SVC_FRONTEND_URLS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((u) => {
      const origin = webOrigin('SVC_FRONTEND_URLS', u);
      // Browsers send only the origin (scheme, host, port), and CORS, the CSRF check and return-to
      // compare just that: a path cannot narrow them, so it is dropped, but said, as the writer meant something by it.
      const { pathname, search, hash } = new URL(u);
      if (pathname !== '/' || search || hash) {
        warnings.push(`SVC_FRONTEND_URLS: the path of "${u}" is ignored: an origin has none, so ${origin} is allowed (links in mails go there too unless auth.email.linkBaseUrl is set)`);
      }
      return origin;
    });
  const serverBaseUrl = baseUrl('SVC_SERVER_BASE_URL', env.SVC_SERVER_BASE_URL);
  const explicitCallback = baseUrl('AUTH_CALLBACK_BASE_URL', env.AUTH_CALLBACK_BASE_URL);
  const callbackBaseUrl = explicitCallback ?? serverBaseUrl ?? `http://localhost:${port}`;
  const host = env.HOST || '127.0.0.1';
  const configured = [serverBaseUrl, explicitCallback].filter((u) => u !== undefined);
  const ownOrigins = configured.length > 0 ? configured : isLoopback(host) ? [callbackBaseUrl] : [];
  const mixed = mixedLoopbackNames([serverBaseUrl, callbackBaseUrl].filter((u) => u !== undefined), frontendUrls);
  if (mixed) warnings.push(mixed);

  return {
    warnings,
    env: {
      production: env.NODE_ENV === 'production',
      port,
      host,
      logLevel: logLevel as EnvConfig['logLevel'],
      logPretty: logPretty === '1' || logPretty === 'true',
      appRoot,
      dataDir: path.resolve(appRoot, env.SVC_DATA_DIR || '.svc-data'),
      storeUrls,
      storePassword: env.SVC_STORE_PASSWORD || undefined,
      mongodbUrl: env.MONGODB_URL || undefined,
      adminEmail: env.SVC_ADMIN_EMAIL || undefined,
      adminPassword: env.SVC_ADMIN_PASSWORD || undefined,
      cookieName: env.SVC_AUTH_COOKIE_NAME || undefined,
      callbackBaseUrl,
      serverBaseUrl,
      frontendUrls,
      ownOrigins: [...new Set(ownOrigins.map((u) => new URL(u).origin))],
      secretEncryptionKey: env.SVC_SECRET_ENCRYPTION_KEY || undefined,
      allowInsecureProviderUrls,
      allowInsecureWebhookUrls,
      // Only an explicit "false" (or "0") shows secrets: a typo must fail closed.
      hideSecrets: !['false', '0'].includes((env.HIDE_SECRETS ?? '').trim().toLowerCase()),
      smtpUrl,
      mailFrom,
    },
  };
}

/**
 * Loads the app root's `.env` (SVC_APP_PATH as the real environment sets it, else the working directory)
 * into `process.env` when there is one: Node's own parser (`process.loadEnvFile`), and a variable the
 * real environment already sets keeps its value. Returns the file's path, or undefined without one.
 */
export function loadDotEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const file = path.join(path.resolve(env.SVC_APP_PATH || process.cwd()), '.env');
  if (!existsSync(file)) return undefined;
  // Variables of the real environment keep their values: Node's loadEnvFile leaves them, Deno's overwrites them.
  const real = { ...process.env };
  process.loadEnvFile(file);
  for (const [name, value] of Object.entries(real)) process.env[name] = value;
  return file;
}

export async function readConfigFile(appRoot: string): Promise<{ raw: unknown; source?: string }> {
  const found = CONFIG_FILES.map((f) => path.join(appRoot, f)).filter((f) => existsSync(f));
  if (found.length > 1) throw new ConfigError(`more than one config file in ${appRoot}: ${found.map((f) => path.basename(f)).join(', ')}`);
  const file = found[0];
  if (!file) return { raw: {} };
  try {
    if (file.endsWith('.json')) return { raw: JSON.parse(await readFile(file, 'utf8')), source: file };
    const mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
    return { raw: defaultExport(mod) ?? {}, source: file };
  } catch (err) {
    throw new ConfigError(`${path.basename(file)} cannot be read: ${(err as Error).message}`);
  }
}

/** Edits (insert, delete, replace one character) that turn `a` into `b`: Levenshtein, two rows at a time. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** The parts of a valibot schema `knownKeys` walks: wrappers (`optional`) keep theirs under `wrapped`. */
interface SchemaNode {
  wrapped?: SchemaNode;
  entries?: Record<string, SchemaNode>;
  item?: SchemaNode;
  value?: SchemaNode;
}

/** The keys an object of `schema` at `path` may have (none when the path leads to no object). */
function knownKeys(schema: v.GenericSchema, path: readonly unknown[]): string[] {
  const unwrap = (node: SchemaNode | undefined) => {
    while (node?.wrapped) node = node.wrapped;
    return node;
  };
  let node = unwrap(schema as SchemaNode);
  for (const key of path) {
    // An object's entry by name; an array's item or a record's value whatever the index or key.
    node = unwrap(node?.entries ? (Object.hasOwn(node.entries, String(key)) ? node.entries[String(key)] : undefined) : (node?.item ?? node?.value));
  }
  return node?.entries ? Object.keys(node.entries) : [];
}

/**
 * The known key an unknown one was most likely meant to be: within two edits, case aside (`sesion`,
 * `SameSite`), and nearer than any other; undefined when none or several are as near.
 */
function closestKey(unknown: string, known: string[]): string | undefined {
  const near = known.map((key) => ({ key, distance: editDistance(unknown.toLowerCase(), key.toLowerCase()) })).filter((k) => k.distance <= 2);
  const best = Math.min(...near.map((k) => k.distance));
  const nearest = near.filter((k) => k.distance === best);
  return nearest.length === 1 ? nearest[0]!.key : undefined;
}

/**
 * Turns valibot issues into one line per problem, each naming the key: `auth.session.ttl: ...`. With
 * the `schema` they came from, an unknown key close to a known one says which: a typo is the usual
 * cause, and the fix is then in the message (`auth.sesion: unknown key (did you mean auth.session?)`).
 */
export function describeIssues(issues: readonly v.BaseIssue<unknown>[], schema?: v.GenericSchema): string[] {
  return issues.map((issue) => {
    const key = v.getDotPath(issue) ?? '(root)';
    if (issue.kind === 'schema' && issue.expected === 'never' && issue.type === 'strict_object') {
      const keys = (issue.path ?? []).map((item) => (item as { key: unknown }).key);
      const parents = keys.slice(0, -1);
      const meant = schema && closestKey(String(keys.at(-1)), knownKeys(schema, parents));
      return meant ? `${key}: unknown key (did you mean ${[...parents, meant].join('.')}?)` : `${key}: unknown key`;
    }
    return `${key}: ${issue.message}`;
  });
}

/** Custom templates follow the provider URL rule of the admin API (CONTRACT 5): one line per bad key. */
function templateUrlProblems(templates: CustomTemplate[], allowInsecure: boolean): string[] {
  return templates.flatMap((template, i) =>
    (['authorizationEndpoint', 'tokenEndpoint', 'userInfoEndpoint'] as const).flatMap((key) => {
      const problem = providerUrlProblem(template[key], allowInsecure);
      return problem ? [`auth.providers.custom.${i}.${key}: ${problem}`] : [];
    }),
  );
}

/**
 * Fewer characters than this in SVC_SECRET_ENCRYPTION_KEY: a start-up warning, and `svc doctor` fails
 * it in production (`openssl rand -base64 32` gives 44; a passphrase under this is guessable offline).
 */
export const MIN_SECRET_KEY_LENGTH = 24;

/**
 * Each app its own key namespace on a shared store, unless its config names one: two apps on one host
 * already need distinct cookie names (SPEC.md migration step 2), so the cookie name is the app's name.
 * The app with the default cookie (`sid_app`) keeps SPEC.md's `auth:`; any other app gets
 * `auth:<cookie name>:` (`auth:sid_workbench:`), so neither accepts, lists or ends the other's sessions.
 */
export function defaultKeyPrefix(cookieName: string): string {
  return cookieName === 'sid_app' ? 'auth:' : `auth:${cookieName}:`;
}

/**
 * Reads the app config file (if any) and the environment, validates both and applies SPEC.md's
 * defaults. Throws ConfigError naming every wrong key, so start-up fails before anything listens.
 */
export async function loadConfig(
  processEnv: NodeJS.ProcessEnv = process.env,
  overrides: { raw?: unknown; sendsMail?: boolean } = {},
): Promise<{ config: Config; warnings: string[] }> {
  const appRoot = path.resolve(processEnv.SVC_APP_PATH || process.cwd());
  const { env, warnings } = parseEnv(processEnv, appRoot);
  const { raw, source } = overrides.raw !== undefined ? { raw: overrides.raw, source: undefined } : await readConfigFile(appRoot);
  const where = source ? path.basename(source) : 'config';
  const parsed = v.safeParse(configSchema, raw);
  if (!parsed.success) {
    throw new ConfigError(`${where} is not valid:\n  ${describeIssues(parsed.issues, configSchema).join('\n  ')}`);
  }
  const { auth, app } = parsed.output;
  // Links in mails go to the frontend, whose page POSTs the token (CONTRACT 12).
  const linkBaseUrl = (auth.email.linkBaseUrl ?? app.url ?? env.frontendUrls[0] ?? env.callbackBaseUrl).replace(/\/+$/, '');
  if (env.smtpUrl && auth.email.linkBaseUrl === undefined && app.url === undefined && env.frontendUrls.length === 0) {
    // svc has no pages at these paths: unless a frontend served from its origin has them, every link is a 404.
    warnings.push(
      `links in mails go to svc's own address (${linkBaseUrl}${auth.email.paths.reset}?token=...): unless a frontend served from that origin has these pages, set SVC_FRONTEND_URLS (or auth.email.linkBaseUrl) to the frontend whose pages POST the tokens`,
    );
  }
  if (auth.captcha) {
    env.captchaSecret = processEnv[auth.captcha.secretEnv] || undefined;
    if (!env.captchaSecret && overrides.sendsMail !== false) throw new ConfigError(`auth.captcha: set ${auth.captcha.secretEnv} (auth.captcha.secretEnv) to the ${auth.captcha.provider} secret key`);
  }
  const config: Config = { ...parsed.output, auth: { ...auth, store: { keyPrefix: auth.store.keyPrefix ?? '' }, email: { ...auth.email, linkBaseUrl } }, env, source };
  // Only what sends mail needs the relay: `svc user create` on the same app root does not.
  for (const feature of ['signup', 'magicLink'] as const) {
    if (config.auth[feature].enabled && !env.smtpUrl && overrides.sendsMail !== false) throw new ConfigError(`auth.${feature}.enabled needs mail: set SVC_SMTP_URL (smtp://host:port or smtps://host:port)`);
  }
  const urlProblems = templateUrlProblems(config.auth.providers.custom, env.allowInsecureProviderUrls);
  if (urlProblems.length) throw new ConfigError(`${where} is not valid:\n  ${urlProblems.join('\n  ')}`);
  if (env.cookieName) config.auth.cookie.name = env.cookieName;
  config.auth.store.keyPrefix ||= defaultKeyPrefix(config.auth.cookie.name);
  if (config.auth.cookie.sameSite === 'none' && !config.auth.cookie.secure) {
    // Started anyway, so that GET /auth/diagnostics and `svc doctor --url` name it beside the other findings (CONTRACT 17).
    warnings.push('auth.cookie: sameSite "none" without secure: true: browsers drop such cookies, so no login will hold (finding samesite_none_without_secure)');
  }
  if (config.auth.cookie.partitioned && (config.auth.cookie.sameSite !== 'none' || !config.auth.cookie.secure)) {
    throw new ConfigError('auth.cookie.partitioned: a Partitioned cookie needs sameSite "none" and secure: true (browsers refuse it otherwise)');
  }
  if (config.auth.cookie.hostPrefix && (config.auth.cookie.domain || !config.auth.cookie.secure)) {
    throw new ConfigError('auth.cookie.hostPrefix: a __Host- cookie needs secure: true and no domain (browsers refuse it otherwise)');
  }
  const session = config.auth.session;
  if (session.localCache && session.ttlMode === 'sliding' && session.touchInterval >= session.ttl) {
    // Pushed less often than it lapses, a session in use would end.
    throw new ConfigError(`auth.session.touchInterval (${session.touchInterval}) must be shorter than auth.session.ttl (${session.ttl})`);
  }
  for (const role of ['sessions', 'oauthState', 'providerTokens'] as const) {
    const id = config.auth.storeInstances[role];
    if (id !== 'cache' && !env.storeUrls[id]) {
      throw new ConfigError(`auth.storeInstances.${role}: store instance "${id}" has no URL (set SVC_STORE_<NAME>_URL)`);
    }
  }
  return { config, warnings };
}
