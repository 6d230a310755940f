// The stacks under test: how each one starts (its own child process on a free loopback port, all on
// the one bench Redis), how the bench gets a session cookie from it, and what a correct answer of
// its authenticated endpoint looks like.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { baseEnv, freePort, npmStartFlags, npmStartV8Flags, PROJECT_DIR, startChild, waitHealthy, writeDotEnv, type Child } from './lib/procs.ts';

export interface StackContext {
  redisUrl: string;
  /** Extra `node` flags per stack id (e.g. `--cpu-prof`). */
  nodeFlags: (id: string) => string[];
  /** `--cpu-prof` per stack id, for Bun too (its flags have Node's names). */
  profFlags: (id: string) => string[];
  /** Temp dirs to remove at the end. */
  tempDirs: string[];
  /** The svc checkout to start (`src/server.ts` in it): this one unless `--svc-dir` says otherwise. */
  svcDir: string;
  /** `--svc-b DIR`: another svc checkout, measured in the same run as `svc-b` (before/after a change, side by side). */
  svcBDir?: string;
  /** Extra environment for svc (`--svc-env K=V`), e.g. UV_THREADPOOL_SIZE. */
  svcEnv: Record<string, string>;
  /** `--pinned`: the CPUs every server runs on (`taskset -c`); unset, the kernel places them. */
  serverCpus?: string;
  /** A program every server runs under (bench/instructions.ts: callgrind), which makes starting take minutes. */
  wrap?: string[];
}

/** What `startChild` takes of the context: the CPUs and the wrapper. */
const placement = (ctx: StackContext) => ({ ...(ctx.serverCpus ? { cpus: ctx.serverCpus } : {}), ...(ctx.wrap ? { wrap: ctx.wrap } : {}) });
/** How long a server may take to answer /health: `normal`, or 10 minutes under a wrapper. */
const startTimeout = (ctx: StackContext, normal: number) => (ctx.wrap ? 600_000 : normal);

export interface RunningStack {
  child: Child;
  url: string;
}

export interface Stack {
  id: string;
  /** Table label. */
  label: string;
  /** What is measured, for docs/benchmarks.md and the results file. */
  description: string;
  /** The measured GET path. */
  path: string;
  start(ctx: StackContext): Promise<RunningStack>;
  /**
   * A fresh session (after a FLUSHALL): the `Cookie` header to send (or the header `header` names), or
   * null when no auth is involved.
   */
  login(url: string): Promise<string | null>;
  /** The request header `login`'s value goes in: `cookie` unless told (`authorization` for an API key). */
  header?: 'cookie' | 'authorization';
  /** Whether a 200 body is the authenticated answer we expect. */
  check(body: unknown): boolean;
}

const PEERS = path.join('bench', 'peers');

/** `name=value` pairs of the Set-Cookie headers (cleared cookies left out), as a Cookie header. */
function cookieHeader(res: Response): string {
  const pairs: string[] = [];
  for (const line of res.headers.getSetCookie()) {
    const [pair, ...attrs] = line.split(';');
    if (!pair || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a))) continue;
    const eq = pair.indexOf('=');
    if (eq > 0 && pair.slice(eq + 1).trim() !== '') pairs.push(pair.trim());
  }
  return pairs.join('; ');
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    redirect: 'manual',
    signal: AbortSignal.timeout(60_000),
  });
}

/** Logs in with a JSON POST; `Origin` as a browser on the same origin would send it (better-auth requires one). */
async function loginAt(url: string, body: unknown, origin?: string): Promise<string> {
  const res = await postJson(url, body, origin ? { origin } : {});
  const text = await res.text();
  if (res.status !== 200) throw new Error(`POST ${url} answered ${res.status}: ${text.slice(0, 300)}`);
  const cookie = cookieHeader(res);
  if (!cookie) throw new Error(`POST ${url} set no cookie`);
  return cookie;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null;

/**
 * The flags of svc's `npm start` that every Node stack gets: the ones for speed. `--no-memory-reducer` keeps
 * a process that idles in its first seconds (every stack here waits for the others' runs) from the slower
 * path Node 20 takes for good after V8's first memory-reducing collection (docs/operations.md, "Shutdown"): without it
 * for all, the bench would compare that V8 quirk rather than code. `--max-semi-space-size`,
 * `--heap-growing-percent`, `--no-maglev` and `--v8-pool-size` are svc's own memory choices (docs/operations.md), and stay svc's.
 */
export const sharedNodeFlags = () => npmStartFlags().filter((flag) => !['--max-semi-space-size', '--heap-growing-percent', '--no-maglev', '--v8-pool-size'].some((memory) => flag.startsWith(memory)));

async function startPeer(ctx: StackContext, id: string, file: string, env: Record<string, string> = {}): Promise<RunningStack> {
  const port = await freePort();
  const child = startChild({
    name: id,
    argv: ['node', ...sharedNodeFlags(), ...ctx.nodeFlags(id), path.join(PEERS, file)],
    ...placement(ctx),
    env: { ...baseEnv(), PORT: String(port), REDIS_URL: ctx.redisUrl, ...env },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(child, `${url}/health`, startTimeout(ctx, 60_000));
  return { child, url };
}

/** The runtimes with a Web door of their own, as a stack's label names them. */
type WebRuntime = 'bun' | 'deno';
const RUNTIME_NAME: Record<WebRuntime, string> = { bun: 'Bun', deno: 'Deno' };
/** Bun and Deno as `npm run start:bun` / `start:deno` run svc (docs/runtimes.md), from PATH. */
const webRuntimeArgv = (runtime: WebRuntime): string[] =>
  runtime === 'bun' ? ['bun'] : ['deno', 'run', '--allow-all', `--v8-flags=${npmStartV8Flags().join(',')}`];

/** The login credentials svc's bootstrap admin gets (a random password per bench run). */
export const svcAdmin = { email: 'bench-admin@example.com', password: randomBytes(18).toString('base64url') };

/**
 * svc as `npm start` runs it (`node <its flags> bin/start.js`: the compiled service in dist/, built first when
 * stale), with `session` merged into `auth.session` of its config.
 */
/** A folder plugin the `svc-plugin` stack adds to its app root: one route behind `authenticate()`. */
const BENCH_PLUGIN = 'bench__whoami';

function writeBenchPlugin(appRoot: string, svcDir: string): void {
  const folder = path.join(appRoot, 'plugins', BENCH_PLUGIN);
  mkdirSync(folder, { recursive: true });
  // Plain JS, Hono by file URL from svc's own node_modules: no tsx, the same Hono as svc's.
  const hono = pathToFileURL(path.join(svcDir, 'node_modules', 'hono', 'dist', 'index.js')).href;
  writeFileSync(
    path.join(folder, 'index.js'),
    [
      `import { Hono } from ${JSON.stringify(hono)};`,
      'export default function whoami(instance) {',
      '  const app = new Hono();',
      "  app.get('/whoami', instance.auth.authenticate(), (c) => c.json(c.get('authUser')));",
      '  return app;',
      '}',
      '',
    ].join('\n'),
  );
}

function svcStack(
  id: string,
  label: string,
  auth: { session: Record<string, unknown>; store?: { keyPrefix: string }; apiKeys?: Record<string, number> },
  what: string,
  route: { path: string; plugin?: boolean; appConfig?: Record<string, unknown> } = { path: '/auth/session' },
  dirOf: (ctx: StackContext) => string = (ctx) => ctx.svcDir,
  runtime: 'node' | WebRuntime = 'node',
): Stack {
  const argv = runtime === 'node' ? ['node-js', ...npmStartFlags()] : webRuntimeArgv(runtime);
  return {
    id,
    label,
    description:
      `The real service as \`${{ node: 'npm start', bun: 'npm run start:bun', deno: 'npm run start:deno' }[runtime]}\` runs it (\`${argv.join(' ').replace('node-js', 'node')} bin/start.js\`, compiled), Redis store,` +
      ' embedded database, `LOG_LEVEL=warn`; ' +
      `\`GET ${route.path}\` with the cookie from \`POST /auth/login\` (${what}).`,
    path: route.path,
    async start(ctx) {
      const appRoot = mkdtempSync(path.join(tmpdir(), 'svc-bench-app-'));
      const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-bench-data-'));
      ctx.tempDirs.push(appRoot, dataDir);
      mkdirSync(appRoot, { recursive: true });
      // trustProxy: the login storm speaks for many clients through X-Forwarded-For (per-IP login limits).
      writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ ...route.appConfig, auth: { cookie: { secure: false }, ...auth }, server: { trustProxy: 1 } }));
      if (route.plugin) writeBenchPlugin(appRoot, dirOf(ctx));
      writeDotEnv(appRoot, { CACHE_URL: ctx.redisUrl, SVC_ADMIN_PASSWORD: svcAdmin.password });
      const port = await freePort();
      const child = startChild({
        name: id,
        argv: [...argv, ...(runtime === 'node' ? ctx.nodeFlags(id) : runtime === 'bun' ? ctx.profFlags(id) : []), 'bin/start.js'],
        cwd: dirOf(ctx),
        ...placement(ctx),
        env: {
          ...baseEnv(),
          HOST: '127.0.0.1',
          PORT: String(port),
          LOG_LEVEL: 'warn',
          SVC_APP_PATH: appRoot,
          SVC_DATA_DIR: dataDir,
          SVC_ADMIN_EMAIL: svcAdmin.email,
          ...ctx.svcEnv,
        },
      });
      const url = `http://127.0.0.1:${port}`;
      await waitHealthy(child, `${url}/health`, startTimeout(ctx, 120_000));
      return { child, url };
    },
    login: (url) => loginAt(`${url}/auth/login`, svcAdmin),
    check: (body) => isObject(body) && typeof body.userId === 'string' && (route.plugin === true || typeof body.expiresAt === 'string'),
  };
}

const svc = svcStack('svc', 'svc', { session: {} }, 'the default: sliding TTL, one GETEX per request');
// `--svc-b DIR`: the default settings, from another checkout.
const svcBDir = (ctx: StackContext) => {
  if (!ctx.svcBDir) throw new Error('svc-b needs --svc-b DIR');
  return ctx.svcBDir;
};
export const svcB = svcStack('svc-b', 'svc (--svc-b)', { session: {} }, 'the default settings, from the checkout given as `--svc-b`', undefined, svcBDir);
/** `--svc-b DIR` with `svc-bun` or `svc-deno` measured: that checkout on Bun or Deno too, by the stack's id. */
export const svcRuntimeB: Record<string, Stack> = {
  'svc-bun': svcStack('svc-bun-b', 'svc on Bun (--svc-b)', { session: {}, store: { keyPrefix: 'bunb:' } }, 'the default settings, from the checkout given as `--svc-b`; Bun.serve', undefined, svcBDir, 'bun'),
  'svc-deno': svcStack('svc-deno-b', 'svc on Deno (--svc-b)', { session: {}, store: { keyPrefix: 'denob:' } }, 'the default settings, from the checkout given as `--svc-b`; Deno.serve', undefined, svcBDir, 'deno'),
};
// svc on Bun and on Deno (issue 59), the default settings: each beside svc on Node in one run.
const svcBun = svcStack('svc-bun', 'svc on Bun', { session: {}, store: { keyPrefix: 'bun:' } }, 'the default settings; Bun.serve', undefined, undefined, 'bun');
const svcDeno = svcStack('svc-deno', 'svc on Deno', { session: {}, store: { keyPrefix: 'deno:' } }, 'the default settings; Deno.serve', undefined, undefined, 'deno');
// What svc on Bun or Deno spends its time on (e.g. `--only svc-deno,svc-deno-cache,bare-deno`): with the
// local cache no store command per request, so no Redis socket on the request's path; bare Hono on the
// runtime's own server below (`bareOn`).
const svcCachedOn = (runtime: WebRuntime) =>
  svcStack(
    `svc-${runtime}-cache`,
    `svc on ${RUNTIME_NAME[runtime]} (localCache)`,
    { session: { localCache: true }, store: { keyPrefix: `${runtime}cached:` } },
    `\`auth.session.localCache: true\`; ${RUNTIME_NAME[runtime]}.serve`,
    undefined,
    undefined,
    runtime,
  );
// Its own key prefix: with the default one, Redis would announce every GETEX of the `svc` stack's runs to
// this process (it tracks the session prefix), which then took a fifth of a core from the stack measured.
const svcCached = svcStack(
  'svc-cache',
  'svc (localCache)',
  { session: { localCache: true }, store: { keyPrefix: 'cached:' } },
  '`auth.session.localCache: true`: records from memory, kept exact by Redis key tracking; the TTL pushed at most once a minute per session',
);

// An authenticated plugin route: a folder plugin's Hono sub-app, its route behind `authenticate()`.
const svcPlugin = svcStack(
  'svc-plugin',
  'svc plugin route',
  { session: {} },
  'a folder plugin in the app root, its one route behind `instance.auth.authenticate()`, answering the caller; the default session settings',
  { path: `/${BENCH_PLUGIN}/whoami`, plugin: true },
);

// The bundled todo plugin's list route (`GET /svc__todo/all`, three items of a plain user), called with
// the user's session cookie or with an API key of that user (`Authorization: Bearer svc_...`, scope
// svc__todo:read; issue 55): the two run side by side, so their ratio is the cost of the key (its
// per-key rate-limit counter, its record). The per-key limit is raised out of the way (1,000,000 a
// minute); `maxPerUser` too, since every run makes a new key.
const TODO_USER = { email: 'bench-todo@example.com', password: 'bench-todo-password-0123' };

function svcTodo(id: string, label: string, credential: 'cookie' | 'key', session: Record<string, unknown>, keyPrefix: string | undefined, what: string): Stack {
  const base = svcStack(
    id,
    label,
    { session, ...(keyPrefix ? { store: { keyPrefix } } : {}), apiKeys: { rateLimit: 1_000_000, maxPerUser: 1000 } },
    what,
    { path: '/svc__todo/all', appConfig: { plugins: ['svc__todo'] } },
  );
  return {
    ...base,
    description:
      base.description.replace(/; `GET .*$/, '') +
      `; \`GET /svc__todo/all\` (the bundled todo plugin, three items) as a plain user, ${credential === 'key' ? 'with an API key of the user (`Authorization: Bearer svc_...`, scope `svc__todo:read`; `auth.apiKeys.rateLimit` 1,000,000)' : 'with the cookie from `POST /auth/login`'} (${what}).`,
    header: credential === 'key' ? 'authorization' : 'cookie',
    async login(url) {
      const admin = await loginAt(`${url}/auth/login`, svcAdmin);
      const created = await postJson(`${url}/auth/users`, TODO_USER, { cookie: admin });
      if (created.status !== 201 && created.status !== 409) throw new Error(`POST /auth/users answered ${created.status}: ${(await created.text()).slice(0, 300)}`);
      await created.arrayBuffer();
      const cookie = await loginAt(`${url}/auth/login`, TODO_USER);
      if (created.status === 201) {
        for (const name of ['milk', 'bread', 'the bench']) {
          const res = await postJson(`${url}/svc__todo/todo`, { name }, { cookie });
          if (res.status !== 201) throw new Error(`POST /svc__todo/todo answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
          await res.arrayBuffer();
        }
      }
      if (credential === 'cookie') return cookie;
      const res = await postJson(`${url}/auth/api-keys`, { name: `bench ${Date.now()}`, scopes: ['svc__todo:read'] }, { cookie });
      const body = (await res.json()) as { key?: string };
      if (res.status !== 201 || !body.key) throw new Error(`POST /auth/api-keys answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
      return `Bearer ${body.key}`;
    },
    check: (body) => isObject(body) && Array.isArray(body.data) && body.data.length === 3,
  };
}

// The default session settings: the key's record is read from the store beside its counter.
const svcTodoKey = svcTodo('svc-todo-key', 'svc todo route, API key', 'key', {}, undefined, 'the default session settings');
const svcTodoCookie = svcTodo('svc-todo-cookie', 'svc todo route, cookie', 'cookie', {}, undefined, 'the default session settings');
// `auth.session.localCache`: the key's record (like a session's) from memory, kept exact by key tracking;
// each with its own key prefix, so that neither process is told of the other's store traffic.
const svcTodoKeyCached = svcTodo('svc-todo-key-cache', 'svc todo route, API key (localCache)', 'key', { localCache: true }, 'todo-key:', '`auth.session.localCache: true`');
const svcTodoCookieCached = svcTodo('svc-todo-cookie-cache', 'svc todo route, cookie (localCache)', 'cookie', { localCache: true }, 'todo-cookie:', '`auth.session.localCache: true`');

const express: Stack = {
  id: 'express',
  label: 'express-session',
  description: 'Express 5 + express-session + connect-redis 9 (node-redis 5), `rolling: true`, `resave: false`; `GET /session` returns the session user.',
  path: '/session',
  start: (ctx) => startPeer(ctx, 'express', 'express.ts'),
  login: (url) => loginAt(`${url}/login`, {}),
  check: (body) => isObject(body) && typeof body.userId === 'string',
};

const fastify: Stack = {
  id: 'fastify',
  label: '@fastify/session',
  description: 'Fastify 5 + @fastify/cookie + @fastify/session + connect-redis 9 store (node-redis 5), `rolling: true`; `GET /session`.',
  path: '/session',
  start: (ctx) => startPeer(ctx, 'fastify', 'fastify.ts'),
  login: (url) => loginAt(`${url}/login`, {}),
  check: (body) => isObject(body) && typeof body.userId === 'string',
};

function betterAuth(id: string, label: string, updateAge: string | undefined, what: string): Stack {
  const user = { email: 'bench@example.com', password: 'bench-password-123', name: 'Bench' };
  let signedUp = false;
  return {
    id,
    label,
    description: `better-auth on Hono, ioredis as \`secondaryStorage\`, memory adapter for users; \`GET /api/auth/get-session\`. ${what}`,
    path: '/api/auth/get-session',
    start: (ctx) => startPeer(ctx, id, 'better-auth.ts', updateAge === undefined ? {} : { BA_UPDATE_AGE: updateAge }),
    async login(url) {
      if (!signedUp) {
        signedUp = true;
        return loginAt(`${url}/api/auth/sign-up/email`, user, url);
      }
      return loginAt(`${url}/api/auth/sign-in/email`, { email: user.email, password: user.password }, url);
    },
    check: (body) => isObject(body) && isObject(body.session) && isObject(body.user),
  };
}

const lean: Stack = {
  id: 'lean',
  label: 'lean (Hono+ioredis)',
  description: 'bench/peers/lean.ts: bare Hono + @hono/node-server + ioredis; cookie -> SHA-256 -> one `GETEX key EX ttl` -> JSON record.',
  path: '/session',
  start: (ctx) => startPeer(ctx, 'lean', 'lean.ts'),
  login: (url) => loginAt(`${url}/login`, {}),
  check: (body) => isObject(body) && typeof body.userId === 'string',
};

// The same route with ioredis' `enableAutoPipelining`: the GETEXes of one turn of the event loop go to
// Redis as one write. The reference of issue 40's goals.
const leanPipelined: Stack = {
  ...lean,
  id: 'lean-pipelined',
  label: 'lean + auto-pipelining',
  description: 'bench/peers/lean.ts with `LEAN_PIPELINING=1`: the lean route, its ioredis client with `enableAutoPipelining: true`; one `GETEX` per request.',
  start: (ctx) => startPeer(ctx, 'lean-pipelined', 'lean.ts', { LEAN_PIPELINING: '1' }),
};

const bare: Stack = {
  id: 'bare',
  label: 'bare Hono (no auth)',
  description: 'bench/peers/hono-bare.ts: a Hono route returning a static JSON object; no cookie, no store (the ceiling).',
  path: '/session',
  start: (ctx) => startPeer(ctx, 'bare', 'hono-bare.ts'),
  login: async () => null,
  check: (body) => isObject(body) && typeof body.userId === 'string',
};

/** The bare Hono route on another runtime's own server (bench/peers/hono-bare-web.ts), that runtime from PATH as svc-bun and svc-deno. */
function bareOn(runtime: WebRuntime): Stack {
  const name = RUNTIME_NAME[runtime];
  return {
    ...bare,
    id: `bare-${runtime}`,
    label: `bare Hono on ${name}`,
    description: `bench/peers/hono-bare-web.ts: the bare Hono route on \`${name}.serve\`; no cookie, no store (the ceiling on ${name}).`,
    async start(ctx) {
      const port = await freePort();
      const child = startChild({
        name: `bare-${runtime}`,
        argv: [...webRuntimeArgv(runtime), path.join(PEERS, 'hono-bare-web.ts')],
        cwd: PROJECT_DIR,
        ...placement(ctx),
        env: { ...baseEnv(), PORT: String(port) },
      });
      const url = `http://127.0.0.1:${port}`;
      await waitHealthy(child, `${url}/health`, startTimeout(ctx, 60_000));
      return { child, url };
    },
  };
}

// The same static answer on node:http with no framework: the floor of Node's own HTTP work.
const nodeRaw: Stack = {
  ...bare,
  id: 'node-raw',
  label: 'node:http (no framework)',
  description: 'bench/peers/node-raw.ts: node:http answering a static JSON object; no framework, no cookie, no store (the floor of Node itself).',
  start: (ctx) => startPeer(ctx, 'node-raw', 'node-raw.ts'),
};

/** In ABBA order the list is run forwards, then backwards. */
export const STACKS: Stack[] = [
  svc,
  svcCached,
  svcPlugin,
  svcTodoKey,
  svcTodoCookie,
  svcTodoKeyCached,
  svcTodoCookieCached,
  svcBun,
  svcDeno,
  svcCachedOn('bun'),
  svcCachedOn('deno'),
  express,
  fastify,
  betterAuth('better-auth', 'better-auth', undefined, 'Its default `updateAge` (1 day): within a run the session is only read, its expiry does not move.'),
  betterAuth('better-auth-slide', 'better-auth (updateAge 0)', '0', '`session.updateAge: 0`: every request slides the expiry (rewrites the session and its user index).'),
  lean,
  leanPipelined,
  bare,
  bareOn('bun'),
  bareOn('deno'),
  nodeRaw,
];

/** What `--pinned` measures unless `--only` says otherwise: the stacks of issue 40's and issue 59's goals. */
export const PINNED_STACKS = ['svc', 'svc-cache', 'lean-pipelined', 'lean', 'bare'];
/** With them, svc on each other runtime found on PATH (issue 59: its ratio to svc on Node in every run). */
export const PINNED_RUNTIME_STACKS: [id: string, runtime: WebRuntime][] = [
  ['svc-bun', 'bun'],
  ['svc-deno', 'deno'],
];
