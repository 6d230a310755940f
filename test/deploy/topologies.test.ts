// Topologies 2 (sibling subdomains) and 3 (cross-site) of docs/deployment-topologies.md (issue 58),
// proven in Debian's Chromium over TLS: a throw-away CA made here with openssl signs one leaf for
// *.example.test and *.other.test; nginx terminates TLS on one loopback port for every host name
// (server_name) and forwards to svc with X-Forwarded-Proto/Host/For (`server.trustProxy: 1`), and serves
// a tiny static app page (index.html + client.js, every call `credentials: 'include'`). Chromium maps the
// names to 127.0.0.1 (`--host-resolver-rules`) and trusts the leaf by its SPKI hash
// (`--ignore-certificate-errors-spki-list`), so the page's origin, the cookie's Domain and SameSite are
// what a real deployment has.
//
// Three svc processes (started at once, embedded store and database: nothing here needs Redis or
// MongoDB): topology 2's, topology 3's, and topology 3 with a deliberately wrong `sameSite: "lax"`,
// which must name `cross_site_without_none` and fail in the browser as the finding says. One real
// OpenID provider (oidc-provider, test/support/oidc.ts, plain http on loopback) serves both topologies.
// Proven in each of topologies 2 and 3, from the app's page: password login, session, logout; the
// self-check without findings as the admin; an OAuth round trip through the provider's real pages; a
// passkey (CDP virtual authenticator, docs/account.md's snippet) added, then the login with it alone; a
// socket.io connection on the session cookie, upgraded to a WebSocket through nginx, ended by the logout.
// In topology 2 an unlisted origin gets no CORS answer and its state-changing request is 403. Topology 3's
// OAuth cannot sign the shop in (the callback's cookie is kept under svc's own site, CHIPS): the test
// asserts that, as docs/deployment-topologies.md says. Not here: TOTP (topology 1's suites), a browser
// with third-party cookies blocked.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIdp, type Idp } from '../support/oidc.ts';
import { startReadySvc, stopAll, tempDir } from '../support/spawn.ts';
import { CHROMIUM, CHROMIUM_ARGS } from './support/browser.ts';
import { missingPrograms, pickPort, startNginx, type Nginx } from './support/deployment.ts';
import { addPasskey, addPasskeySnippet, connectSocket, loginWithPasskey, oauthLogin, realtime, virtualAuthenticator } from './topologies/flows.ts';

const onPath = (name: string) => (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir && existsSync(path.join(dir, name)));
const missing = [...missingPrograms(), ...(onPath('openssl') ? [] : ['openssl'])];
if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but the topologies test lacks: ${missing.join(', ')}`);
if (missing.length) process.stderr.write(`\n!!!!!!!! SKIPPED: the topologies test needs ${missing.join(' and ')} !!!!!!!!\n\n`);

interface Diagnostics {
  seen: { scheme: string; host: string; clientIp: string; forwarded: boolean };
  cookie: { name: string; secure: boolean; sameSite: string; domain: string | null; partitioned: boolean };
  frontendOrigins: string[];
  findings: { code: string; message: string }[];
}
/** What the page's `window.svc(path, init)` resolves with: the status and JSON body, or the fetch's error. */
type Called = { status: number; body: unknown } | { error: string };

function openssl(args: string[], input?: string | Buffer): Buffer {
  const run = spawnSync('openssl', args, { input });
  if (run.status !== 0) throw new Error(`openssl ${args.join(' ')} failed:\n${run.stderr.toString()}`);
  return run.stdout;
}

/** A CA (key + self-signed cert) and a leaf it signs for `names`; the leaf's SPKI sha256, base64 (Chromium's flag). */
function throwAwayPki(dir: string, names: string[]) {
  const file = (name: string) => path.join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '2', '-subj', '/CN=svc topologies test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  openssl(['req', ...ec, '-keyout', file('leaf.key'), '-out', file('leaf.csr'), '-subj', '/CN=svc topologies test']);
  writeFileSync(file('leaf.ext'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`);
  openssl(['x509', '-req', '-in', file('leaf.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '2', '-out', file('leaf.crt'), '-extfile', file('leaf.ext')]);
  const publicKey = openssl(['x509', '-in', file('leaf.crt'), '-pubkey', '-noout']);
  const der = openssl(['pkey', '-pubin', '-outform', 'der'], publicKey);
  const spki = openssl(['dgst', '-sha256', '-binary'], der).toString('base64');
  return { caPem: readFileSync(file('ca.crt'), 'utf8'), cert: file('leaf.crt'), key: file('leaf.key'), spki };
}

/** The app's frontend: svc's base URL from `?api=` (then the tab's sessionStorage), every call with credentials (as `@svc/client` makes them). */
const INDEX_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Topology test app</title></head>
<body><h1>Topology test app</h1><script src="/client.js"></script></body></html>
`;
const CLIENT_JS = `const given = new URLSearchParams(location.search).get('api');
if (given) sessionStorage.setItem('api', given); // kept for the page svc's OAuth callback sends the tab back to
window.api = given || sessionStorage.getItem('api');
window.svc = async (path, init = {}) => {
  try {
    const headers = init.body === undefined ? {} : { 'content-type': 'application/json' };
    const res = await fetch(window.api + path, { method: init.method || 'GET', headers, body: init.body, credentials: 'include' });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  } catch (error) {
    return { error: String(error) };
  }
};
`;

/** Every name resolves to loopback (Node's side of Chromium's --host-resolver-rules). */
const toLoopback = ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) =>
  opts.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)) as unknown as LookupFunction;

describe.skipIf(missing.length > 0)('deployment topologies 2 and 3 in Chromium over TLS', () => {
  const admin = { email: 'admin@example.com', password: 'topologies admin password' };
  let nginx: Nginx;
  let browser: Browser;
  let caPem: string;
  let port: number;
  let idp: Idp;
  const oauth = { id: 'corp', label: 'Corp SSO', secret: randomBytes(24).toString('base64url'), login: 'olga', email: 'olga@example.com' };
  const origin = (host: string) => `https://${host}:${port}`;

  /** A request from Node through nginx (TLS checked against the throw-away CA), as a non-browser client or with a forged Origin. */
  function tlsFetch(url: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) {
    const body = init.body === undefined ? undefined : JSON.stringify(init.body);
    const headers = { ...init.headers, ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }) };
    return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }>((resolve, reject) => {
      const req = https.request(url, { method: init.method ?? 'GET', headers, ca: caPem, lookup: toLoopback, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  /** The admin's session cookie (`name=value`) from a login made from Node (no Origin: a non-browser client). */
  async function adminCookie(api: string): Promise<string> {
    const res = await tlsFetch(`${api}/auth/login`, { method: 'POST', body: admin });
    expect(res.status, res.text).toBe(200);
    return [res.headers['set-cookie'] ?? []].flat().map((c) => c.split(';')[0]!).join('; ');
  }

  /** The app page at `appOrigin` (`pathname`: any path serves it), configured with svc at `api`, in a fresh context (its own cookie jar). */
  async function appPage(appOrigin: string, api: string, pathname = '/'): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${appOrigin}${pathname}?api=${encodeURIComponent(api)}`);
    await clientReady(page);
    return { context, page };
  }
  const clientReady = (page: Page) => page.waitForFunction(() => typeof (window as unknown as { svc?: unknown }).svc === 'function');
  const call = (page: Page, p: string, init: { method?: string; body?: string } = {}): Promise<Called> =>
    page.evaluate(([p, init]) => (window as unknown as { svc(p: string, i: object): Promise<Called> }).svc(p, init), [p, init] as const);
  /** Logs the admin in from the page; resolves with the call's result and the Set-Cookie of `cookieName` the browser received. */
  async function loginFromPage(page: Page, cookieName: string): Promise<{ login: Called; setCookie: string }> {
    const response = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/auth/login');
    const login = await call(page, '/auth/login', { method: 'POST', body: JSON.stringify(admin) });
    const lines = ((await (await response).headerValue('set-cookie')) ?? '').split('\n');
    return { login, setCookie: lines.find((l) => l.startsWith(`${cookieName}=`)) ?? `(no ${cookieName} in: ${lines.join(' | ')})` };
  }

  /**
   * From the app page: password login, a passkey added with docs/account.md's snippet (its RP id
   * `rpId`, as configured), logout, and a login with the passkey alone.
   */
  async function passkeyJourney(appHost: string, apiHost: string, cookieName: string, rpId: string) {
    const api = origin(apiHost);
    const { context, page } = await appPage(origin(appHost), api);
    try {
      const authenticator = await virtualAuthenticator(context, page);
      expect((await loginFromPage(page, cookieName)).login).toMatchObject({ status: 200 });
      await addPasskeySnippet(page);
      expect(await addPasskey(page, `a passkey for ${appHost}`)).toMatchObject({ name: `a passkey for ${appHost}` });
      const { credentials } = await authenticator.cdp.send('WebAuthn.getCredentials', { authenticatorId: authenticator.id });
      expect(credentials.map((c) => [c.rpId, c.isResidentCredential])).toEqual([[rpId, true]]);

      expect(await call(page, '/auth/logout', { method: 'POST' })).toMatchObject({ status: 204 });
      expect(await call(page, '/auth/session')).toMatchObject({ status: 401 });
      expect(await loginWithPasskey(page)).toMatchObject({ user: { email: admin.email } });
      expect(await call(page, '/auth/session')).toMatchObject({ status: 200, body: { provider: 'passkey' } });
      // The login's challenge cookie (svc_passkey) came back to svc with the response, which cleared it.
      expect((await context.cookies(api)).map((c) => c.name).sort()).toEqual([cookieName, 'svc_device']);
    } finally {
      await context.close();
    }
  }

  /** From the app page: password login, a socket.io connection on the session cookie (upgraded to a WebSocket), ended by the logout. */
  async function socketJourney(appHost: string, apiHost: string, cookieName: string) {
    const { context, page } = await appPage(origin(appHost), origin(apiHost));
    try {
      expect((await loginFromPage(page, cookieName)).login).toMatchObject({ status: 200 });
      await connectSocket(page);
      await expect.poll(() => realtime(page), { timeout: 15_000 }).toEqual({ events: ['connect'], transport: 'websocket' });
      expect(await call(page, '/auth/logout', { method: 'POST' })).toMatchObject({ status: 204 });
      await expect.poll(async () => (await realtime(page)).events, { timeout: 15_000 }).toEqual(['connect', 'sessionEnded:unauthenticated']);
    } finally {
      await context.close();
    }
  }

  const hosts = {
    app: 'app.example.test', // topology 2: the app
    api: 'api.example.test', // topology 2: svc
    evil: 'evil.other.test', // an unlisted origin on another site
    shop: 'shop.other.test', // topology 3: the app
    auth: 'auth.example.test', // topology 3: svc
    lax: 'auth-lax.example.test', // topology 3 with sameSite "lax": the wrong config
  };

  beforeAll(async () => {
    const dir = tempDir('svc-topologies-');
    const pki = throwAwayPki(dir, ['*.example.test', '*.other.test']);
    caPem = pki.caPem;
    const www = path.join(dir, 'www');
    mkdirSync(www);
    writeFileSync(path.join(www, 'index.html'), INDEX_HTML);
    writeFileSync(path.join(www, 'client.js'), CLIENT_JS);

    const [tlsPort, readyPort, siblingPort, crossPort, laxPort] = await Promise.all([pickPort(), pickPort(), pickPort(), pickPort(), pickPort()]);
    port = tlsPort;
    // One OpenID provider for both topologies: svc's redirect URI is its public base URL's (`/api` kept).
    const callback = (host: string) => `${origin(host)}/api/auth/oauth/${oauth.id}/callback`;
    idp = await startIdp({ clients: [{ clientId: 'svc-topologies', clientSecret: oauth.secret, redirectUris: [callback(hosts.api), callback(hosts.auth)], pkce: true }] });
    idp.setAccount(oauth.login, { email: oauth.email, email_verified: true, name: 'Olga Auth' });
    const start = (svcPort: number, config: object, api: string, frontend: string) => {
      const root = tempDir('svc-topology-app-');
      writeFileSync(path.join(root, 'svc.config.json'), JSON.stringify(config, null, 2));
      return startReadySvc({
        port: svcPort,
        appRoot: root,
        env: { SVC_FRONTEND_URLS: frontend, SVC_SERVER_BASE_URL: api, SVC_ADMIN_EMAIL: admin.email, SVC_ADMIN_PASSWORD: admin.password },
        startTimeoutMs: 90_000,
      });
    };
    // docs/deployment-topologies.md's config blocks (cookie names apart: one per process, for clearer failures).
    await Promise.all([
      start(
        siblingPort,
        { app: { url: origin(hosts.app) }, server: { trustProxy: 1 }, auth: { cookie: { name: 'sid_sibling', domain: 'example.test', sameSite: 'lax' }, passkeys: { rpId: 'example.test' } } },
        origin(hosts.api),
        origin(hosts.app),
      ),
      start(
        crossPort,
        { app: { url: origin(hosts.shop) }, server: { trustProxy: 1 }, auth: { cookie: { name: 'sid_cross', sameSite: 'none', secure: true, partitioned: true }, passkeys: { rpId: hosts.shop } } },
        origin(hosts.auth),
        origin(hosts.shop),
      ),
      start(laxPort, { server: { trustProxy: 1 }, auth: { cookie: { name: 'sid_lax', sameSite: 'lax' } } }, origin(hosts.lax), origin(hosts.shop)),
    ]);

    // WebSocket upgrades pass (socket.io), other requests keep the upstream connection alive.
    const proxy = (svcPort: number) => `
        location / {
            proxy_pass http://127.0.0.1:${svcPort};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $svc_connection;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
        }`;
    const tls = (names: string, body: string) => `
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name ${names};
        ${body}
    }`;
    const site = [
      "map $http_upgrade $svc_connection { default upgrade; '' ''; }",
      `ssl_certificate ${pki.cert};`,
      `ssl_certificate_key ${pki.key};`,
      tls(`${hosts.app} ${hosts.shop} ${hosts.evil}`, `root ${www};\n        location / { try_files $uri /index.html; }`),
      tls(hosts.api, proxy(siblingPort)),
      tls(hosts.auth, proxy(crossPort)),
      tls(hosts.lax, proxy(laxPort)),
      // Plain http on another port, only for startNginx's readiness probe (Node's fetch knows no throw-away CA).
      `server { listen 127.0.0.1:${readyPort}; location = /ready { return 200 "ready"; } }`,
      '',
    ].join('\n');
    nginx = await startNginx(site, [`http://127.0.0.1:${readyPort}/ready`]);
    // The provider in each topology, as an admin adds it (through nginx, from Node: a non-browser client).
    for (const api of [origin(hosts.api), origin(hosts.auth)]) {
      const body = { providerId: oauth.id, type: 'oidc', label: oauth.label, clientId: 'svc-topologies', clientSecret: oauth.secret, enabled: true, config: { issuer: idp.issuer } };
      const created = await tlsFetch(`${api}/auth/providers`, { method: 'POST', headers: { cookie: await adminCookie(api) }, body });
      if (created.status !== 201) throw new Error(`creating the OpenID provider at ${api} answered ${created.status}: ${created.text}`);
    }

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      timeout: 60_000,
      // Any other name fails at once (the IdP's development pages ask Google Fonts for a stylesheet).
      args: [
        ...CHROMIUM_ARGS,
        '--host-resolver-rules=MAP *.example.test 127.0.0.1, MAP *.other.test 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
        `--ignore-certificate-errors-spki-list=${pki.spki}`,
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await nginx?.stop();
    await idp?.close();
    await stopAll();
  });

  describe('2. sibling subdomains: app.example.test and api.example.test, Domain=example.test, SameSite=Lax', () => {
    it('login, session, the self-check without findings and logout from the app page', async () => {
      const api = origin(hosts.api);
      const { context, page } = await appPage(origin(hosts.app), api);
      try {
        const { login, setCookie } = await loginFromPage(page, 'sid_sibling');
        expect(login, nginx.errors()).toMatchObject({ status: 200, body: { user: { email: admin.email } } });
        expect(setCookie).toMatch(/;\s*Domain=example\.test/i);
        expect(setCookie).toMatch(/;\s*SameSite=Lax/i);
        expect(setCookie).toMatch(/;\s*Secure/i);
        // The session cookie for the parent domain; svc's device cookie (CONTRACT 14) for svc's host only.
        const stored = (await context.cookies(api)).map((c) => [c.name, c.domain]).sort();
        expect(stored).toEqual([['sid_sibling', '.example.test'], ['svc_device', hosts.api]]);

        expect(await call(page, '/auth/session')).toMatchObject({ status: 200, body: { isAdmin: true, provider: 'password' } });
        const diag = await call(page, '/auth/diagnostics');
        expect(diag).toMatchObject({ status: 200 });
        const d = (diag as { body: Diagnostics }).body;
        expect(d.findings).toEqual([]);
        expect(d.seen).toEqual({ scheme: 'https', host: `${hosts.api}:${port}`, clientIp: '127.0.0.1', forwarded: true });
        expect(d.cookie).toEqual({ name: 'sid_sibling', secure: true, sameSite: 'lax', domain: 'example.test', partitioned: false });
        expect(d.frontendOrigins).toEqual([origin(hosts.app)]);

        expect(await call(page, '/auth/logout', { method: 'POST' })).toMatchObject({ status: 204 });
        expect(await call(page, '/auth/session')).toMatchObject({ status: 401, body: { error: { code: 'unauthenticated' } } });
      } finally {
        await context.close();
      }
    });

    it('an unlisted origin (evil.other.test) gets no CORS answer: its credentialed fetches fail in the browser', async () => {
      const api = origin(hosts.api);
      const { context, page } = await appPage(origin(hosts.evil), api);
      try {
        const session = await call(page, '/auth/session');
        expect(session).toMatchObject({ error: expect.stringMatching(/Failed to fetch/) });
        const login = await call(page, '/auth/login', { method: 'POST', body: JSON.stringify(admin) });
        expect(login).toMatchObject({ error: expect.stringMatching(/Failed to fetch/) });
        expect(await context.cookies(api)).toEqual([]);
      } finally {
        await context.close();
      }
      // What the browser got (checked from Node): no Access-Control-Allow-Origin for the unlisted origin,
      // neither on the preflight nor on a GET; the listed app gets its own, with credentials.
      const preflight = (from: string) =>
        tlsFetch(`${api}/auth/login`, { method: 'OPTIONS', headers: { origin: from, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
      const evilPreflight = await preflight(origin(hosts.evil));
      expect(evilPreflight.headers['access-control-allow-origin']).toBeUndefined();
      const appPreflight = await preflight(origin(hosts.app));
      expect(appPreflight.headers['access-control-allow-origin']).toBe(origin(hosts.app));
      expect(appPreflight.headers['access-control-allow-credentials']).toBe('true');
      const evilGet = await tlsFetch(`${api}/auth/session`, { headers: { origin: origin(hosts.evil) } });
      expect(evilGet.headers['access-control-allow-origin']).toBeUndefined();
    });

    it('an OAuth round trip through the real OpenID provider lands on the app page (app.url) at the return path, signed in', async () => {
      const api = origin(hosts.api);
      const { context, page } = await appPage(origin(hosts.app), api, '/login');
      try {
        const landed = await oauthLogin(page, { api, idpOrigin: new URL(idp.issuer).origin, provider: oauth, returnTo: '/reports' });
        expect(landed.href, nginx.errors()).toBe(`${origin(hosts.app)}/reports`);
        await clientReady(page);
        expect(await call(page, '/auth/session?expand=user')).toMatchObject({ status: 200, body: { provider: oauth.id, user: { email: oauth.email } } });
        expect((await context.cookies(api)).find((c) => c.name === 'sid_sibling')).toMatchObject({ domain: '.example.test', sameSite: 'Lax', secure: true });
        expect(await call(page, '/auth/logout', { method: 'POST' })).toMatchObject({ status: 204 });
      } finally {
        await context.close();
      }
      // A failed login comes back to the app as well, whose login page shows the code.
      const failed = await tlsFetch(`${api}/auth/oauth/unknown-provider`);
      expect([failed.status, failed.headers.location]).toEqual([302, `${origin(hosts.app)}/?auth_error=provider_not_found`]);
    });

    it('a passkey with RP id example.test, added and used from the app page', () => passkeyJourney(hosts.app, hosts.api, 'sid_sibling', 'example.test'));

    it('a socket.io connection from the app page on the session cookie, ended by the logout', () => socketJourney(hosts.app, hosts.api, 'sid_sibling'));

    it('a state-changing request from the unlisted origin with a valid session cookie is 403 csrf_failed, and changes nothing', async () => {
      const api = origin(hosts.api);
      const cookie = await adminCookie(api);
      const refused = await tlsFetch(`${api}/auth/logout`, { method: 'POST', headers: { cookie, origin: origin(hosts.evil) } });
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.text)).toMatchObject({ error: { code: 'csrf_failed' } });
      expect(refused.headers['access-control-allow-origin']).toBeUndefined();
      // The session survived the refused logout; the listed app's logout with the same cookie works.
      expect((await tlsFetch(`${api}/auth/session`, { headers: { cookie } })).status).toBe(200);
      expect((await tlsFetch(`${api}/auth/logout`, { method: 'POST', headers: { cookie, origin: origin(hosts.app) } })).status).toBe(204);
      expect((await tlsFetch(`${api}/auth/session`, { headers: { cookie } })).status).toBe(401);
    });
  });

  describe('3. cross-site: shop.other.test and auth.example.test, SameSite=None; Secure; Partitioned', () => {
    it('login (a Partitioned cookie), session, the self-check without findings and logout from the shop page', async () => {
      const api = origin(hosts.auth);
      const { context, page } = await appPage(origin(hosts.shop), api);
      try {
        const { login, setCookie } = await loginFromPage(page, 'sid_cross');
        expect(login, nginx.errors()).toMatchObject({ status: 200, body: { user: { email: admin.email } } });
        expect(setCookie).toMatch(/;\s*Partitioned/i);
        expect(setCookie).toMatch(/;\s*SameSite=None/i);
        expect(setCookie).toMatch(/;\s*Secure/i);
        expect(setCookie).not.toMatch(/;\s*Domain=/i);
        // The browser keeps it partitioned under the shop's site (the device cookie too, CONTRACT 14).
        const stored = (await context.cookies(api)).map((c) => [c.name, c.partitionKey]).sort();
        expect(stored).toEqual([['sid_cross', 'https://other.test'], ['svc_device', 'https://other.test']]);

        expect(await call(page, '/auth/session')).toMatchObject({ status: 200, body: { isAdmin: true, provider: 'password' } });
        const diag = await call(page, '/auth/diagnostics');
        expect(diag).toMatchObject({ status: 200 });
        const d = (diag as { body: Diagnostics }).body;
        expect(d.findings).toEqual([]);
        expect(d.seen).toMatchObject({ scheme: 'https', host: `${hosts.auth}:${port}`, forwarded: true });
        expect(d.cookie).toEqual({ name: 'sid_cross', secure: true, sameSite: 'none', domain: null, partitioned: true });
        expect(d.frontendOrigins).toEqual([origin(hosts.shop)]);

        expect(await call(page, '/auth/logout', { method: 'POST' })).toMatchObject({ status: 204 });
        expect(await call(page, '/auth/session')).toMatchObject({ status: 401, body: { error: { code: 'unauthenticated' } } });
      } finally {
        await context.close();
      }
    });

    it('OAuth: the round trip completes, but its session cookie is kept under svc\'s own site, so the shop stays signed out (documented)', async () => {
      const api = origin(hosts.auth);
      const { context, page } = await appPage(origin(hosts.shop), api, '/login');
      try {
        const landed = await oauthLogin(page, { api, idpOrigin: new URL(idp.issuer).origin, provider: oauth, returnTo: '/reports' });
        // The return path's cookie was set by the shop's fetch, so it is kept under the shop's site: svc's
        // start and callback (top-level pages of svc's own site) never saw it, and the way back is `/`.
        expect(landed.href, nginx.errors()).toBe(`${origin(hosts.shop)}/`);
        await clientReady(page);
        expect(await call(page, '/auth/session')).toMatchObject({ status: 401, body: { error: { code: 'unauthenticated' } } });
        // The session exists, in the partition of svc's own site, where the shop's fetches never look.
        const sessions = (await context.cookies(api)).filter((c) => c.name === 'sid_cross').map((c) => c.partitionKey);
        expect(sessions).toEqual(['https://example.test']);
      } finally {
        await context.close();
      }
    });

    it('a passkey with RP id shop.other.test (the app\'s host), added and used from the shop page', () => passkeyJourney(hosts.shop, hosts.auth, 'sid_cross', hosts.shop));

    it('a socket.io connection from the shop page on the partitioned session cookie, ended by the logout', () => socketJourney(hosts.shop, hosts.auth, 'sid_cross'));

    it('the wrong config (sameSite "lax" for a cross-site app) names cross_site_without_none, and the browser indeed sends no cookie', async () => {
      const api = origin(hosts.lax);
      // The self-check as the admin from Node: the shop's page cannot ask (that is the failure).
      const cookie = await adminCookie(api);
      const diag = await tlsFetch(`${api}/auth/diagnostics`, { headers: { cookie } });
      expect(diag.status, diag.text).toBe(200);
      const d = JSON.parse(diag.text) as Diagnostics;
      expect(d.findings.map((f) => f.code)).toEqual(['cross_site_without_none']);
      expect(d.findings[0]!.message).toContain(origin(hosts.shop));

      // In Chromium: the login "works" (200, CORS allows the shop), and the next call is 401.
      const { context, page } = await appPage(origin(hosts.shop), api);
      try {
        const { login, setCookie } = await loginFromPage(page, 'sid_lax');
        expect(login).toMatchObject({ status: 200, body: { user: { email: admin.email } } });
        expect(setCookie).toMatch(/;\s*SameSite=Lax/i);
        expect(await context.cookies(api)).toEqual([]); // refused: SameSite=Lax cookies set by a cross-site request
        expect(await call(page, '/auth/session')).toMatchObject({ status: 401, body: { error: { code: 'unauthenticated' } } });
      } finally {
        await context.close();
      }
    });
  });
});
