// A whole deployment on one machine, the way operators run svc (issue 19): nginx (Debian's package)
// started from deploy/nginx.conf, serving the static test frontend (test/deploy/frontend/) and
// forwarding /api/ to two svc processes in turn; a third svc process behind the workbench's server
// block (cookie sid_workbench); all three sharing one Redis and one MongoDB; a real OpenID provider
// (oidc-provider, test/support/oidc.ts) configured as provider `corp`; and a Vite-style dev server on
// another port that serves the same frontend with the proxy's origin as its API.
//
// Harness API (for browser suites such as passkeys, issue 23):
//   const d = await startDeployment({ redisUrl, mongoUrl });   // inject('redisUrl'), inject('mongoUrl')
//   startDeployment({ ..., host: 'localhost' })                origins on localhost: WebAuthn takes no IP
//                                                              address as RP ID (a passkeys suite needs this)
//   startDeployment({ ..., frontendDir, appConfig })           another static frontend at the app's origin
//                                                              (the built example, issue 38), extra app config
//   startDeployment({ ..., email: true })                      a real SMTP server (test/support/smtp.ts) as the
//                                                              app's relay, sign-up and magic links on, links in
//                                                              mails to d.appOrigin; d.smtp reads what arrived
//   d.appOrigin / d.workbenchOrigin / d.devOrigin              'http://<host>:<port>' (listening on 127.0.0.1)
//   d.app: [SvcProcess, SvcProcess]; d.workbench: SvcProcess   (test/support/spawn.ts handles)
//   d.admin: { email, password }; d.adminFetch('/auth/users')  as the admin, through nginx (/api prefix added)
//   await d.createUser('bob@example.com', 'a long password')   a password user (through the admin API)
//   d.idp, d.oauthProvider = { id: 'corp', label, login, email }   IdP account `login`, verified `email`
//   missingPrograms()                                          nginx / Chromium this machine lacks
//   await d.stop()                                             stops everything, removes keys and temp dirs
// Every port is picked below the kernel's ephemeral range (ip_local_port_range), so no outgoing
// connection can take one between picking and binding it. Nothing waits on a timer: each part is ready
// when it answers.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { startIdp, type Idp } from '../../support/oidc.ts';
import { dropPrefix } from '../../support/redis.ts';
import { startSmtp, type TestSmtp } from '../../support/smtp.ts';
import { CHROMIUM } from './browser.ts';
import { freePort, PROJECT_DIR, sleep, startReadySvc, stopAll, tempDir, type SvcProcess } from '../../support/spawn.ts';

export const NGINX_CONF = path.join(PROJECT_DIR, 'deploy/nginx.conf');
export const FRONTEND_DIR = path.join(PROJECT_DIR, 'test/deploy/frontend');

export interface DeploymentOptions {
  redisUrl: string;
  mongoUrl: string;
  /** Extra environment for the three svc processes. */
  env?: Record<string, string>;
  /** Host name in every origin: `127.0.0.1` (default) or `localhost`. Everything listens on 127.0.0.1. */
  host?: '127.0.0.1' | 'localhost';
  /** The static frontend nginx serves at the app's origin (default: test/deploy/frontend). */
  frontendDir?: string;
  /** Extra app config (svc.config.json) of the two app instances, merged over the operator's one (`auth` one level deep). */
  appConfig?: { auth?: Record<string, unknown>; [key: string]: unknown };
  /**
   * Mail (README "Sign-up and recovery"): the app's two svc processes send through a real SMTP server
   * on loopback, with `auth.signup.enabled`, `auth.magicLink.enabled` and `auth.email.linkBaseUrl` =
   * the app's origin. The workbench keeps no mail.
   */
  email?: boolean;
}

export interface Deployment {
  appOrigin: string;
  workbenchOrigin: string;
  devOrigin: string;
  app: [SvcProcess, SvcProcess];
  workbench: SvcProcess;
  admin: { email: string; password: string };
  idp: Idp;
  oauthProvider: { id: string; label: string; login: string; email: string };
  /** With `email: true`: the relay the app sends through, and the mails it got. */
  smtp?: TestSmtp;
  /** `fetch(appOrigin + '/api' + path)` with the admin's session cookie (no Origin: a non-browser client). */
  adminFetch(path: string, init?: RequestInit): Promise<Response>;
  createUser(email: string, password: string): Promise<void>;
  /** nginx's error log so far (for assertion messages). */
  nginxErrors(): string;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Ports

/** A free port outside the ephemeral range (see `freePort`). */
export const pickPort = freePort;

// ---------------------------------------------------------------------------------------------
// nginx

export interface Nginx {
  pid: number;
  errors(): string;
  /** What deploy/nginx.conf's servers wrote to their access log (its /var/log/nginx/ is the run's folder). */
  accessLog(): string;
  stop(): Promise<void>;
}

export const NGINX_BIN = existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx';

/** Programs the deployment needs that this machine lacks (Debian: `apt-get install nginx-light chromium`). */
export function missingPrograms(): string[] {
  const missing: string[] = [];
  const onPath = (name: string) => (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir && existsSync(path.join(dir, name)));
  if (!existsSync('/usr/sbin/nginx') && !onPath('nginx')) missing.push('nginx (nginx-light)');
  if (!existsSync(CHROMIUM)) missing.push(`Chromium (${CHROMIUM})`);
  return missing;
}

/**
 * deploy/nginx.conf with the operator's example values replaced by ours (every occurrence). A value
 * the file no longer has is an error, so the file cannot drift away from what the suite runs.
 */
function nginxSite(replacements: Record<string, string>): string {
  let text = readFileSync(NGINX_CONF, 'utf8');
  for (const [from, to] of Object.entries(replacements)) {
    if (!text.includes(from)) throw new Error(`deploy/nginx.conf no longer has "${from}": update test/deploy/support/deployment.ts`);
    text = text.replaceAll(from, to);
  }
  return text;
}

/**
 * deploy/nginx.conf on loopback ports: the app's two svc instances (`app`), the workbench's one, the
 * ports nginx listens on for each, and the folder of the app's static frontend.
 */
export function deploySite(p: { app: [number, number]; workbench: number; appPort: number; workbenchPort: number; frontendDir?: string }): string {
  return nginxSite({
    '127.0.0.1:3001': `127.0.0.1:${p.app[0]}`,
    '127.0.0.1:3002': `127.0.0.1:${p.app[1]}`,
    '127.0.0.1:3101': `127.0.0.1:${p.workbench}`,
    'listen 8080;': `listen 127.0.0.1:${p.appPort};`,
    'listen 8081;': `listen 127.0.0.1:${p.workbenchPort};`,
    '/srv/svc/app;': `${p.frontendDir ?? FRONTEND_DIR};`,
    '/srv/svc/workbench;': `${FRONTEND_DIR};`,
  });
}

/**
 * Starts nginx in the foreground with everything it writes (pid, logs, temp files) under a fresh
 * folder: `nginx -p <dir> -c <dir>/nginx.conf -e <dir>/error.log`. One process (`master_process off`),
 * so that a stop or this process's exit leaves no worker behind. Ready when `readyUrls` answer.
 */
export async function startNginx(site: string, readyUrls: string[]): Promise<Nginx> {
  const dir = tempDir('svc-nginx-');
  const temp = (name: string) => path.join(dir, 'temp', name);
  mkdirSync(path.join(dir, 'temp'));
  // deploy/nginx.conf's servers log to /var/log/nginx/ (root's): here, to this run's folder.
  writeFileSync(path.join(dir, 'site.conf'), site.replaceAll('/var/log/nginx/', `${dir}/`));
  const conf = path.join(dir, 'nginx.conf');
  const errorLog = path.join(dir, 'error.log');
  writeFileSync(
    conf,
    [
      'daemon off;',
      'master_process off;',
      `pid ${path.join(dir, 'nginx.pid')};`,
      `error_log ${errorLog} warn;`,
      'events { worker_connections 512; }',
      'http {',
      '    types { text/html html; text/css css; text/javascript js; application/json json; }',
      '    default_type application/octet-stream;',
      `    access_log ${path.join(dir, 'access.log')};`,
      `    client_body_temp_path ${temp('body')};`,
      `    proxy_temp_path ${temp('proxy')};`,
      `    fastcgi_temp_path ${temp('fastcgi')};`,
      `    uwsgi_temp_path ${temp('uwsgi')};`,
      `    scgi_temp_path ${temp('scgi')};`,
      `    include ${path.join(dir, 'site.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  const child = spawn(NGINX_BIN, ['-p', dir, '-c', conf, '-e', errorLog], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (err) => {
      output += String(err);
      resolve();
    });
  });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  const errors = () => {
    let log = '';
    try {
      log = readFileSync(errorLog, 'utf8');
    } catch {
      // not written yet
    }
    return `${output}${log}`;
  };
  const stop = async () => {
    process.off('exit', kill);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGQUIT'); // graceful: finish what is in flight
      const timer = setTimeout(kill, 10_000);
      await exited;
      clearTimeout(timer);
    }
  };
  if (!(await answering(readyUrls, exited, 30_000))) {
    await stop();
    throw new Error(`nginx did not start:\n${errors()}`);
  }
  const accessLog = () => {
    try {
      return readFileSync(path.join(dir, 'svc.access.log'), 'utf8');
    } catch {
      return ''; // nothing logged yet
    }
  };
  return { pid: child.pid!, errors, accessLog, stop };
}

/** True once every URL answers (any status), false when `gone` settles first or after `timeoutMs`. */
async function answering(urls: string[], gone: Promise<void>, timeoutMs: number): Promise<boolean> {
  let over = false;
  void gone.then(() => (over = true));
  const deadline = Date.now() + timeoutMs;
  const pending = new Set(urls);
  while (!over && Date.now() < deadline) {
    for (const url of [...pending]) {
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        pending.delete(url);
      } catch {
        // not listening yet
      }
    }
    if (pending.size === 0) return !over;
    await Promise.race([sleep(100), gone]);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The Vite-style dev server: the same frontend on another port, its API at the proxy's origin

const CONTENT_TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

export async function startDevServer(port: number, apiOrigin: string): Promise<{ close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://x').pathname;
    if (pathname === '/config.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(`window.SVC_API = ${JSON.stringify(apiOrigin)};\n`);
      return;
    }
    const file = path.join(FRONTEND_DIR, path.normalize(pathname));
    const known = file.startsWith(FRONTEND_DIR + path.sep) && existsSync(file) && CONTENT_TYPES[path.extname(file)];
    const served = known ? file : path.join(FRONTEND_DIR, 'index.html'); // single-page fallback
    res.writeHead(200, { 'content-type': CONTENT_TYPES[path.extname(served)]! }).end(readFileSync(served));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// The deployment

/** The mongo URL with a database of our own. */
function withDatabase(mongoUrl: string, name: string): string {
  const url = new URL(mongoUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

function appRoot(config: unknown): string {
  const dir = tempDir('svc-deploy-app-');
  writeFileSync(path.join(dir, 'svc.config.json'), JSON.stringify(config, null, 2));
  return dir;
}

export async function startDeployment(opts: DeploymentOptions): Promise<Deployment> {
  if (!opts.redisUrl || !opts.mongoUrl) throw new Error('startDeployment needs a Redis URL and a MongoDB URL');
  const [appPort, workbenchPort, devPort, portA, portB, portW] = await Promise.all([pickPort(), pickPort(), pickPort(), pickPort(), pickPort(), pickPort()]);
  const host = opts.host ?? '127.0.0.1';
  const appOrigin = `http://${host}:${appPort}`;
  const workbenchOrigin = `http://${host}:${workbenchPort}`;
  const devOrigin = `http://${host}:${devPort}`;
  const run = randomBytes(4).toString('hex');
  const keyPrefix = `deploy-${run}:`;
  const database = `svc_deploy_${run}`;
  const mongoUrl = withDatabase(opts.mongoUrl, database);
  const admin = { email: `admin-${run}@example.com`, password: `admin password ${run}` };

  const stoppers: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const s of stoppers.reverse()) await s().catch(() => {});
    stoppers.length = 0;
  };
  try {
    const oauthProvider = { id: 'corp', label: 'Corp SSO', login: `alice-${run}`, email: `alice-${run}@example.com` };
    const clientSecret = randomBytes(24).toString('base64url');
    const idp = await startIdp({
      clients: [{ clientId: 'svc-deploy', clientSecret, redirectUris: [`${appOrigin}/api/auth/oauth/${oauthProvider.id}/callback`], pkce: true }],
    });
    stoppers.push(() => idp.close());
    idp.setAccount(oauthProvider.login, { email: oauthProvider.email, email_verified: true, name: 'Alice Example' });

    const smtp = opts.email ? await startSmtp() : undefined;
    if (smtp) stoppers.push(() => smtp.close());
    const mail = smtp ? { signup: { enabled: true }, magicLink: { enabled: true }, email: { linkBaseUrl: appOrigin } } : {};

    // What an operator sets for instances behind the proxy (docs/operations.md); the workbench keeps no mail.
    const config = (cookieName: string, extra: DeploymentOptions['appConfig'] = {}) => ({
      global: { requireAuthentication: true },
      server: { trustProxy: 1 },
      ...extra,
      auth: { ...extra.auth, cookie: { name: cookieName }, store: { keyPrefix } },
    });
    const env = (origin: string, frontends: string[]) => ({
      ...(smtp && origin === appOrigin ? { SVC_SMTP_URL: smtp.url, SVC_MAIL_FROM: 'Example app <accounts@example.test>' } : {}),
      CACHE_URL: opts.redisUrl,
      MONGODB_URL: mongoUrl,
      SVC_FRONTEND_URLS: frontends.join(','),
      SVC_SERVER_BASE_URL: origin,
      AUTH_CALLBACK_BASE_URL: origin,
      SVC_ADMIN_EMAIL: admin.email,
      SVC_ADMIN_PASSWORD: admin.password,
      ...opts.env,
    });
    const start = (port: number, root: string, origin: string, frontends: string[]) =>
      startReadySvc({ port, appRoot: root, env: env(origin, frontends), startTimeoutMs: 90_000 });
    const appDir = appRoot(config('sid_app', { ...opts.appConfig, auth: { ...mail, ...opts.appConfig?.auth } }));
    stoppers.push(stopAll); // svc processes and temp folders (nginx's included)
    // The first instance creates the bootstrap admin; then the others come up beside it.
    const a = await start(portA, appDir, appOrigin, [appOrigin, devOrigin]);
    const [b, workbench] = await Promise.all([
      start(portB, appDir, appOrigin, [appOrigin, devOrigin]),
      // The workbench shares the app's Redis key prefix, so its worker takes webhook jobs of the app's queue
      // too: it retries them on the app's schedule (auth.webhooks), or a short one in a test would not hold.
      start(portW, appRoot(config('sid_workbench', opts.appConfig?.auth?.webhooks ? { auth: { webhooks: opts.appConfig.auth.webhooks } } : {})), workbenchOrigin, [workbenchOrigin]),
    ]);

    const site = deploySite({ app: [portA, portB], workbench: portW, appPort, workbenchPort, frontendDir: opts.frontendDir });
    const nginx = await startNginx(site, [`${appOrigin}/config.js`, `${workbenchOrigin}/config.js`]);
    stoppers.push(() => nginx.stop());
    const dev = await startDevServer(devPort, appOrigin);
    stoppers.push(() => dev.close());
    stoppers.push(async () => {
      await dropPrefix(opts.redisUrl!, keyPrefix);
      const mongo = new MongoClient(mongoUrl, { serverSelectionTimeoutMS: 5000 });
      try {
        await mongo.db(database).dropDatabase();
      } finally {
        await mongo.close();
      }
    });

    // The admin's session, through the proxy like any client.
    const login = await fetch(`${appOrigin}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(admin) });
    if (login.status !== 200) throw new Error(`admin login through nginx answered ${login.status}: ${await login.text()}\n${nginx.errors()}`);
    const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.startsWith('sid_app='));
    if (!cookie) throw new Error('admin login set no sid_app cookie');
    const adminFetch = (p: string, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      headers.set('cookie', cookie);
      if (typeof init.body === 'string') headers.set('content-type', 'application/json');
      return fetch(`${appOrigin}/api${p}`, { ...init, headers });
    };
    const created = await adminFetch('/auth/providers', {
      method: 'POST',
      body: JSON.stringify({ providerId: oauthProvider.id, type: 'oidc', label: oauthProvider.label, clientId: 'svc-deploy', clientSecret, enabled: true, config: { issuer: idp.issuer } }),
    });
    if (created.status !== 201) throw new Error(`creating the OIDC provider answered ${created.status}: ${await created.text()}`);

    return {
      appOrigin,
      workbenchOrigin,
      devOrigin,
      app: [a, b],
      workbench,
      admin,
      idp,
      oauthProvider,
      smtp,
      adminFetch,
      async createUser(email, password) {
        const res = await adminFetch('/auth/users', { method: 'POST', body: JSON.stringify({ email, password }) });
        if (res.status !== 201) throw new Error(`creating ${email} answered ${res.status}: ${await res.text()}`);
      },
      nginxErrors: () => nginx.errors(),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Request log lines of one svc process (`{"msg":"request","method","path","status"}`) that match;
 * `path` without the `/api` prefix (svc logs the route's path, with or without it).
 */
export function requestsLogged(svc: SvcProcess, match: { method?: string; path: string; status?: number }): number {
  const routePath = (p: unknown) => (typeof p === 'string' && p.startsWith('/api/') ? p.slice(4) : p);
  return svc.logs().filter(
    (l) => l.msg === 'request' && routePath(l.path) === match.path && (match.method === undefined || l.method === match.method) && (match.status === undefined || l.status === match.status),
  ).length;
}
