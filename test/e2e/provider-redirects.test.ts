// Issue 39, finding 8: SSRF through redirects. svc's server calls a provider's token and user-info
// endpoints; the provider URL rule (CONTRACT 5) vets the URLs an admin saves, and a provider must not
// get around it by answering with a redirect. A hostile provider here answers its token endpoint with
// a 307 (which a following client re-sends WITH the code and client secret) or its user-info endpoint
// with a 302, both to an "internal" service on http://127.0.0.2: plain http: to a host the rule
// refuses (only 127.0.0.1, localhost and [::1] count as loopback), yet reachable on Linux, so the
// test can see whether svc ever called it. The login must fail with the callback's code, name the
// refused host in its log line, and the internal service must never hear from svc.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { LeakScanner } from '../support/leak-scanner.ts';
import { loginFailures } from '../support/login-failures.ts';
import { Browser } from '../support/oidc.ts';
import { MAX_PROVIDER_ANSWER_BYTES, PROVIDER_CALL_TIMEOUT_MS } from '../../src/auth/oauth/outbound.ts';

const SVC_BASE = 'http://localhost:3000';
const COOKIE = 'sid_app';
const CLIENT_SECRET = `redirect-secret-${randomUUID()}`;
/** gitea's real paths (arctic's Gitea class and the catalog's user-info URL). */
const TOKEN_PATH = '/login/oauth/access_token';
const USERINFO_PATH = '/login/oauth/userinfo';

interface Server {
  origin: string;
  requests: { method: string; path: string; body: string }[];
  close(): Promise<void>;
}

async function serve(host: string, handle: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void): Promise<Server> {
  const requests: Server['requests'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method ?? 'GET', path: req.url ?? '/', body });
      handle(req, body, res);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return {
    origin: `http://${host}:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const json = (res: http.ServerResponse, body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));

/** What the provider redirects, if anything, and with which status. */
let redirect: 'none' | 'token' | 'userinfo' = 'none';
/** An answer svc must not read (hostile or broken provider), and where. */
let hostile: { at: 'token' | 'userinfo'; answer: (res: http.ServerResponse) => void } | null = null;
/** 50 MB of spaces in ~50 KB of gzip: what a reader that trusts Content-Encoding unpacks in full. */
const GZIP_BOMB = gzipSync(Buffer.alloc(50 * 1024 * 1024, 0x20));
let status = 302;
let internal: Server;
let provider: Server;
let t: TestApp;
let scan: LeakScanner;
let admin: Browser;
/** The `reason` of every `OAuth login failed` warning. */
let failures: string[];
const browser = () => new Browser(scan.wrap(t.fetch), { svcBase: SVC_BASE, cookieName: COOKIE });

beforeAll(async () => {
  // The internal service answers whatever a following client asks with tokens AND a profile.
  internal = await serve('127.0.0.2', (_req, _body, res) =>
    json(res, { access_token: `internal-${randomUUID()}`, token_type: 'Bearer', id: 1, sub: 'internal', login: 'root', email: 'root@internal.example', email_verified: true }),
  );
  provider = await serve('127.0.0.1', (req, _body, res) => {
    const to = `${internal.origin}/internal${req.url ?? ''}`;
    if (hostile && req.url === (hostile.at === 'token' ? TOKEN_PATH : USERINFO_PATH)) return hostile.answer(res);
    if (req.method === 'POST' && req.url === TOKEN_PATH) {
      if (redirect === 'token') return res.writeHead(status, { location: to }).end();
      return json(res, { access_token: `provider-${randomUUID()}`, token_type: 'Bearer', expires_in: 3600 });
    }
    if (req.method === 'GET' && req.url === USERINFO_PATH) {
      if (redirect === 'userinfo') return res.writeHead(status, { location: to }).end();
      return json(res, { id: 7, sub: 'alice-7', login: 'alice', email: `alice-${randomUUID().slice(0, 8)}@example.com`, email_verified: true });
    }
    res.writeHead(404).end();
  });
  scan = new LeakScanner(COOKIE);
  scan.addSecret(CLIENT_SECRET, 'client secret');
  t = await createTestApp();
  failures = loginFailures(t.instance);
  admin = browser();
  const adminUser = await t.createUser({ admin: true });
  expect((await admin.passwordLogin(adminUser.email, adminUser.password)).status).toBe(200);

  for (const body of [
    { providerId: 'acme', type: 'custom', config: { authorizationEndpoint: `${provider.origin}/authorize`, tokenEndpoint: `${provider.origin}${TOKEN_PATH}`, userInfoEndpoint: `${provider.origin}${USERINFO_PATH}` } },
    { providerId: 'gitea', type: 'arctic', config: { baseURL: provider.origin } },
  ]) {
    const res = await admin.fetch('/auth/providers', { method: 'POST', json: { clientId: 'svc-client', clientSecret: CLIENT_SECRET, ...body } });
    expect(res.status, body.providerId).toBe(201);
  }
});
beforeEach(() => {
  redirect = 'none';
  hostile = null;
  failures.length = 0;
  internal.requests.length = 0;
});
afterEach(() => scan.verify());
afterAll(async () => {
  await t?.close();
  await Promise.all([provider?.close(), internal?.close()]);
});

/** svc's authorize URL, then the provider's redirect back with a code (delivered by the test). */
async function login(providerId: string) {
  const b = browser();
  const { authorizeUrl } = await b.start(providerId);
  expect(authorizeUrl, providerId).not.toBeNull();
  const callback = new URL(`${SVC_BASE}/api/auth/oauth/${providerId}/callback`);
  callback.searchParams.set('code', `code-${randomUUID()}`);
  callback.searchParams.set('state', authorizeUrl!.searchParams.get('state')!);
  const res = await b.callback(callback);
  return { b, location: res.headers.get('location') };
}

// acme: a custom provider (arctic's OAuth2Client, svc's own user-info call); gitea: an arctic class.
describe.each(['acme', 'gitea'])('provider %s', (providerId) => {
  it('logs in when the provider answers without redirects (the setup works)', async () => {
    const { b, location } = await login(providerId);
    expect(location).toBe('/');
    expect(b.sessionId).toBeDefined();
    expect(internal.requests).toEqual([]);
  });

  // 302: a following client asks the internal host with GET; 307: it re-posts the code and the client secret there.
  it.each([302, 307])('a token endpoint that answers %i to a refused host: token_exchange_failed, the host never called, the log names it', async (code) => {
    redirect = 'token';
    status = code;
    const { b, location } = await login(providerId);
    expect(location).toBe('/?auth_error=token_exchange_failed');
    expect(b.sessionId).toBeUndefined();
    expect(internal.requests).toEqual([]);
    expect(failures.some((reason) => reason.includes(new URL(internal.origin).host))).toBe(true);
  });

  it('a user-info endpoint that answers 302 to a refused host: userinfo_failed, the host never called, the log names it', async () => {
    redirect = 'userinfo';
    status = 302;
    const { b, location } = await login(providerId);
    expect(location).toBe('/?auth_error=userinfo_failed');
    expect(b.sessionId).toBeUndefined();
    expect(internal.requests).toEqual([]);
    expect(failures.some((reason) => reason.includes(new URL(internal.origin).host))).toBe(true);
    // No user was made from the internal service's answer.
    const users = (await (await admin.fetch('/auth/users?limit=100')).json()) as { items?: { email: string }[] };
    expect(JSON.stringify(users)).not.toContain('root@internal.example');
  });

  // What a provider answers is read within bounds: no more than a megabyte after decompression, JSON
  // no deeper than 64 levels. A gzip bomb once cost 1.5 GB of memory per login.
  it.each([
    ['token', 'a gzip bomb', (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(GZIP_BOMB), `more than ${MAX_PROVIDER_ANSWER_BYTES} bytes`],
    ['userinfo', 'a 2 MB profile', (res: http.ServerResponse) => json(res, { id: 1, email: 'big@example.com', email_verified: true, bio: 'x'.repeat(2 * 1024 * 1024) }), `more than ${MAX_PROVIDER_ANSWER_BYTES} bytes`],
    ['token', 'JSON nested 100,000 deep', (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'application/json' }).end(`${'['.repeat(100_000)}${']'.repeat(100_000)}`), 'nested deeper than 64 levels'],
  ] as const)('a %s endpoint answering %s: refused unread, the log says why', async (at, _what, answer, reason) => {
    hostile = { at, answer };
    const { b, location } = await login(providerId);
    expect(location).toBe(at === 'token' ? '/?auth_error=token_exchange_failed' : '/?auth_error=userinfo_failed');
    expect(b.sessionId).toBeUndefined();
    expect(failures.some((r) => r.includes(reason) && r.includes(new URL(provider.origin).host)), JSON.stringify(failures)).toBe(true);
  });
});

// What a provider says is input like any other: an address with a line break is no address, names are
// one line of at most 100 characters, an account id of 300 characters is not an id.
it('a provider profile is held to svc\'s own input rules', async () => {
  const userinfo = (body: Record<string, unknown>) => ({ at: 'userinfo' as const, answer: (res: http.ServerResponse) => json(res, { email_verified: true, ...body }) });
  hostile = userinfo({ id: 'crlf-1', email: 'evil@example.com\r\nbcc: victim@example.org' });
  expect((await login('acme')).location).toBe('/?auth_error=no_email');
  hostile = userinfo({ id: 'x'.repeat(300), email: 'long-id@example.com' });
  expect((await login('acme')).location).toBe('/?auth_error=userinfo_failed');
  const email = `names-${randomUUID().slice(0, 8)}@example.com`;
  hostile = userinfo({ id: `names-${randomUUID()}`, email: `  ${email.toUpperCase()} `, given_name: `Eve\r\nX-Injected: 1\u0000\u202e`, family_name: 'L'.repeat(500) });
  expect((await login('acme')).location).toBe('/');
  const users = (await (await admin.fetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { items: { email: string; firstname: string; lastname: string }[] };
  expect(users.items).toEqual([expect.objectContaining({ email, firstname: 'Eve X-Injected: 1', lastname: 'L'.repeat(100) })]);
});

it('a token answer without access_token is token_exchange_failed; a 100 KB error from the provider is cut in the log line', async () => {
  hostile = { at: 'token', answer: (res) => json(res, { token_type: 'Bearer', foo: 1 }) };
  expect((await login('acme')).location).toBe('/?auth_error=token_exchange_failed');
  hostile = { at: 'token', answer: (res) => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'x'.repeat(100_000) })) };
  expect((await login('acme')).location).toBe('/?auth_error=token_exchange_failed');
  expect(failures.at(-1)!.length).toBeLessThan(600);
  expect(failures.at(-1)).toMatch(/… \(\d+ characters\)$/);
});

// arctic sets no timeout of its own: a token endpoint that sends its headers and then a byte now and then
// held a login for good. The call's bound (10 s) ends it, as the log line says.
it('a token endpoint that trickles its answer: token_exchange_failed once the call bound passes', async () => {
  hostile = {
    at: 'token',
    answer: (res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).write('{');
      const drip = setInterval(() => (res.writableEnded ? clearInterval(drip) : res.write(' ')), 500);
      res.on('close', () => clearInterval(drip));
    },
  };
  const { b, location } = await login('gitea');
  expect(location).toBe('/?auth_error=token_exchange_failed');
  expect(b.sessionId).toBeUndefined();
  expect(failures.some((r) => r.includes(`did not answer within ${PROVIDER_CALL_TIMEOUT_MS / 1000} s`)), JSON.stringify(failures)).toBe(true);
}, PROVIDER_CALL_TIMEOUT_MS * 3);
