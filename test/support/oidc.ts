// A real OpenID provider (oidc-provider v8) in-process on a loopback port, plus a browser-like helper
// that drives svc's OAuth login through the IdP's real login and consent pages.
//
// Layout of the IdP (one provider instance for every test of a file):
//   http://127.0.0.1:<port>/realms/test                          issuer, and KeyCloak's `realmURL`
//   .../realms/test/protocol/openid-connect/auth|token|userinfo  renamed routes, so arctic's
//                                                                `KeyCloak` class reaches them
//   .../realms/test/interaction/:uid                             default dev login/consent pages
//   .../realms/test/.well-known/openid-configuration             discovery document (`type: "oidc"`
//                                                                providers read it), keys at .../certs
// and a second loopback server in front of the userinfo endpoint:
//   http://127.0.0.1:<port2>/jwt-userinfo    accepts only `Authorization: JWT <token>`, then asks the
//                                            IdP's real userinfo with Bearer and returns its JSON
//   http://127.0.0.1:<port2>/userinfo-500    always 500 (a broken userinfo endpoint)

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type https from 'node:https';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { fetchWithCookies, type JsonInit } from './cookie-jar.ts';

// oidc-provider v8 ships no TypeScript types: the few parts used here, loaded without type lookup.
interface OidcClientModel {
  clientId: string;
  grantTypeAllowed(type: string): boolean;
}
interface OidcProvider {
  callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;
  on(event: 'server_error', listener: (ctx: unknown, err: Error) => void): void;
}
type OidcProviderClass = new (issuer: string, configuration: Record<string, unknown>) => OidcProvider;
const OIDC_PROVIDER_MODULE = 'oidc-provider';

const REALM = '/realms/test';
const ROUTES = {
  authorization: '/protocol/openid-connect/auth',
  token: '/protocol/openid-connect/token',
  userinfo: '/protocol/openid-connect/userinfo',
  jwks: '/protocol/openid-connect/certs',
  end_session: '/protocol/openid-connect/logout',
  revocation: '/protocol/openid-connect/revoke',
  introspection: '/protocol/openid-connect/token/introspect',
};

/** Claims an IdP account releases (`sub` is the login name typed on the login page). */
export interface IdpClaims {
  email?: string;
  email_verified?: boolean;
  name?: string;
  picture?: string;
}

export interface IdpClient {
  clientId: string;
  clientSecret: string;
  /** svc callback URLs registered for this client (exact match at the IdP). */
  redirectUris: string[];
  /** The IdP requires PKCE (S256) from this client. */
  pkce: boolean;
}

export interface IdpRequest {
  method: string;
  path: string;
  /** Scheme of the Authorization header (`Bearer`, `Basic`, `JWT`) or ''. */
  scheme: string;
}

export interface Idp {
  /** `http://127.0.0.1:<port>/realms/test` (the KeyCloak realm URL). */
  issuer: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  userInfoEndpoint: string;
  /** The front proxy that only accepts `JWT <token>`. */
  jwtUserInfoEndpoint: string;
  /** Always answers 500. */
  brokenUserInfoEndpoint: string;
  /** A loopback URL where nothing listens. */
  deadUserInfoEndpoint: string;
  clients: IdpClient[];
  /** Sets what the account with this login name releases. Unknown logins release only `sub`. */
  setAccount(login: string, claims: IdpClaims): void;
  /** Every token the IdP's token endpoint handed out (read from its responses). */
  issued: { access: Set<string>; refresh: Set<string>; id: Set<string> };
  /** Requests the IdP received (not the pages the browser loads). */
  requests: IdpRequest[];
  /** Calls the JWT front proxy received: the exact Authorization header and whether it passed. */
  jwtProxyCalls: { authorization: string; accepted: boolean }[];
  close(): Promise<void>;
}

/** Listens on a free loopback port; resolves with it. */
export const listen = (server: net.Server) =>
  new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });

/** Closes the server and every connection it still holds. */
export const closeServer = (server: http.Server | https.Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

/** A port that was free a moment ago and on which nothing listens now. */
async function deadPort(): Promise<number> {
  const s = http.createServer();
  const port = await listen(s);
  await closeServer(s);
  return port;
}

/** Keeps a copy of what the handler writes to `res` and hands it to `done` at the end. */
function captureBody(res: ServerResponse, done: (text: string) => void) {
  const chunks: Buffer[] = [];
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  const keep = (chunk: unknown) => {
    if (typeof chunk === 'string') chunks.push(Buffer.from(chunk));
    else if (chunk instanceof Uint8Array) chunks.push(Buffer.from(chunk));
  };
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    keep(chunk);
    return write(chunk, ...rest);
  }) as typeof res.write;
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    if (chunk !== undefined && typeof chunk !== 'function') keep(chunk);
    done(Buffer.concat(chunks).toString('utf8'));
    return end(chunk, ...rest);
  }) as typeof res.end;
}

/** Starts the IdP and its userinfo front proxy on 127.0.0.1 (random ports). */
export async function startIdp(opts: { clients: IdpClient[] }): Promise<Idp> {
  const accounts = new Map<string, IdpClaims>();
  const issued = { access: new Set<string>(), refresh: new Set<string>(), id: new Set<string>() };
  const requests: IdpRequest[] = [];
  const jwtProxyCalls: Idp['jwtProxyCalls'] = [];

  const server = http.createServer();
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}${REALM}`;
  const pkceClients = new Set(opts.clients.filter((c) => c.pkce).map((c) => c.clientId));
  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

  const { default: Provider } = (await import(OIDC_PROVIDER_MODULE)) as { default: OidcProviderClass };
  const provider = new Provider(issuer, {
    clients: opts.clients.map((c) => ({
      client_id: c.clientId,
      client_secret: c.clientSecret,
      redirect_uris: c.redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    jwks: { keys: [{ ...signingKey, kid: 'test-key', use: 'sig', alg: 'RS256' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    routes: ROUTES,
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'picture'] },
    // Scope claims go into the id_token too, so a provider that decodes it sees the same identity.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true }, userinfo: { enabled: true }, revocation: { enabled: true } },
    pkce: { methods: ['S256'], required: (_ctx: unknown, client: OidcClientModel) => pkceClients.has(client.clientId) },
    ttl: { AccessToken: 3600, AuthorizationCode: 60, IdToken: 3600, RefreshToken: 86400, Interaction: 600, Session: 3600, Grant: 3600 },
    issueRefreshToken: async (_ctx: unknown, client: OidcClientModel) => client.grantTypeAllowed('refresh_token'),
    async findAccount(_ctx: unknown, sub: string) {
      return {
        accountId: sub,
        async claims() {
          return { sub, ...accounts.get(sub) };
        },
      };
    },
  });
  provider.on('server_error', (_ctx, err) => process.stderr.write(`oidc-provider server_error: ${err.stack}\n`));
  const callback = provider.callback();

  server.on('request', (req: IncomingMessage & { originalUrl?: string }, res: ServerResponse) => {
    const url = req.url ?? '/';
    if (!url.startsWith(`${REALM}/`)) {
      res.writeHead(404).end();
      return;
    }
    // Mounted under /realms/test: oidc-provider reads the mount path from originalUrl.
    req.originalUrl = url;
    req.url = url.slice(REALM.length);
    const path = req.url.split('?')[0]!;
    if (!path.startsWith('/interaction/')) {
      requests.push({ method: req.method ?? 'GET', path, scheme: (req.headers.authorization ?? '').split(' ')[0] ?? '' });
    }
    if (req.method === 'POST' && path === ROUTES.token) {
      captureBody(res, (text) => {
        try {
          const json = JSON.parse(text) as Record<string, unknown>;
          if (typeof json.access_token === 'string') issued.access.add(json.access_token);
          if (typeof json.refresh_token === 'string') issued.refresh.add(json.refresh_token);
          if (typeof json.id_token === 'string') issued.id.add(json.id_token);
        } catch {
          // an error page: nothing issued
        }
      });
    }
    void callback(req, res);
  });

  const proxy = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (path === '/userinfo-500') return json(500, { error: 'server_error' });
    if (path !== '/jwt-userinfo') return json(404, { error: 'not_found' });
    const authorization = req.headers.authorization ?? '';
    const match = /^JWT ([^\s]+)$/.exec(authorization);
    jwtProxyCalls.push({ authorization, accepted: Boolean(match) });
    if (!match) return json(401, { error: 'invalid_request', error_description: 'expected "Authorization: JWT <token>"' });
    fetch(`${issuer}${ROUTES.userinfo}`, { headers: { authorization: `Bearer ${match[1]}`, accept: 'application/json' } })
      .then(async (upstream) => json(upstream.status, await upstream.json()))
      .catch((err: Error) => json(502, { error: err.message }));
  });
  const proxyPort = await listen(proxy);

  return {
    issuer,
    authorizationEndpoint: `${issuer}${ROUTES.authorization}`,
    tokenEndpoint: `${issuer}${ROUTES.token}`,
    userInfoEndpoint: `${issuer}${ROUTES.userinfo}`,
    jwtUserInfoEndpoint: `http://127.0.0.1:${proxyPort}/jwt-userinfo`,
    brokenUserInfoEndpoint: `http://127.0.0.1:${proxyPort}/userinfo-500`,
    deadUserInfoEndpoint: `http://127.0.0.1:${await deadPort()}/userinfo`,
    clients: opts.clients,
    setAccount: (login, claims) => void accounts.set(login, claims),
    issued,
    requests,
    jwtProxyCalls,
    async close() {
      await Promise.all([closeServer(server), closeServer(proxy)]);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The browser: one cookie jar for svc (in-process) and one for the IdP (real HTTP).

/** A minimal RFC 6265 jar for the IdP: name+path, path matching, expiry by Max-Age/Expires. */
class CookieJar {
  private readonly cookies = new Map<string, { name: string; value: string; path: string }>();

  store(res: Response, requestPath: string): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';').map((s) => s.trim());
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      let path = requestPath.slice(0, requestPath.lastIndexOf('/')) || '/';
      let expired = value === '';
      for (const attr of attrs) {
        const [k, v = ''] = attr.split('=');
        const key = k!.toLowerCase();
        if (key === 'path') path = v || '/';
        if (key === 'max-age' && Number(v) <= 0) expired = true;
        if (key === 'expires' && Date.parse(v) <= Date.now()) expired = true;
      }
      const id = `${name}\n${path}`;
      if (expired) this.cookies.delete(id);
      else this.cookies.set(id, { name, value, path });
    }
  }

  header(requestPath: string): string {
    return [...this.cookies.values()]
      .filter((c) => c.path === '/' || requestPath === c.path || requestPath.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
      .sort((a, b) => b.path.length - a.path.length)
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }
}

export type SvcFetch = (path: string, init?: RequestInit) => Promise<Response>;

export interface BrowserOptions {
  /** svc's public base, the origin of every `redirectUri` (default `http://localhost:3000`). */
  svcBase?: string;
  /** svc's session cookie name (default `sid_app`). */
  cookieName?: string;
}

export interface AuthorizeOptions {
  /** What to type in the IdP's login form (the account's `sub`). */
  login: string;
  password?: string;
  /** Press "abort" on the IdP's page instead of signing in (the IdP answers `error=access_denied`). */
  abort?: boolean;
}

/**
 * A browser: its own svc cookie jar and IdP cookie jar. `login()` is the whole journey
 * (svc start -> IdP login page -> consent -> svc callback); `start`, `authorize` and `callback` are its
 * steps, for tests that tamper with one of them.
 */
export class Browser {
  readonly svcCookies = new Map<string, string>();
  private readonly idpJar = new CookieJar();
  readonly svcOrigin: string;
  readonly cookieName: string;

  constructor(
    private readonly svc: SvcFetch,
    opts: BrowserOptions = {},
  ) {
    this.svcOrigin = new URL(opts.svcBase ?? 'http://localhost:3000').origin;
    this.cookieName = opts.cookieName ?? 'sid_app';
  }

  /** The session cookie's value, if the browser holds one. */
  get sessionId(): string | undefined {
    return this.svcCookies.get(this.cookieName);
  }

  /** A request to svc with this browser's cookies; `json` sends a JSON body. */
  fetch(path: string, init: JsonInit = {}): Promise<Response> {
    return fetchWithCookies(this.svc, this.svcCookies, path, init);
  }

  /** Password login (`POST /auth/login`). */
  passwordLogin(email: string, password: string): Promise<Response> {
    return this.fetch('/auth/login', { method: 'POST', json: { email, password } });
  }

  /**
   * What the login page does before sending the browser off: `GET /auth/oauth/return-to/csrf`, then
   * `POST /auth/oauth/return-to` from `<frontend>/login` with the CSRF header. Returns the POST's response.
   */
  async setReturnTo(returnTo: string, frontend: string): Promise<Response> {
    const csrf = await this.fetch('/api/auth/oauth/return-to/csrf', { headers: { referer: `${frontend}/login` } });
    if (csrf.status !== 200) throw new Error(`return-to csrf answered ${csrf.status}`);
    const { csrfToken } = (await csrf.json()) as { csrfToken: string };
    return this.fetch('/api/auth/oauth/return-to', {
      method: 'POST',
      headers: { origin: frontend, referer: `${frontend}/login`, 'x-svc-oauth-return-to-csrf': csrfToken },
      json: { returnTo },
    });
  }

  /** `GET /auth/oauth/:provider`; the authorize URL when svc redirects to the IdP. */
  async start(providerId: string): Promise<{ res: Response; authorizeUrl: URL | null }> {
    const res = await this.fetch(`/auth/oauth/${providerId}`);
    const location = res.headers.get('location');
    const url = res.status === 302 && location ? new URL(location, this.svcOrigin) : null;
    return { res, authorizeUrl: url && url.origin !== this.svcOrigin ? url : null };
  }

  /**
   * Walks the IdP from the authorize URL (following its redirects, filling its login form, confirming
   * consent) until it redirects back to svc; returns that callback URL (not followed).
   */
  async authorize(authorizeUrl: URL, opts: AuthorizeOptions): Promise<URL> {
    const back = await this.walk(authorizeUrl, opts);
    if (!(back instanceof URL)) throw new Error('the IdP answered with a form_post page, not a redirect');
    return back;
  }

  /**
   * The same walk for `response_mode=form_post`: returns the form the IdP's last page would post to
   * svc (its action and fields), not submitted.
   */
  async authorizeFormPost(authorizeUrl: URL, opts: AuthorizeOptions): Promise<{ action: URL; fields: URLSearchParams }> {
    const back = await this.walk(authorizeUrl, opts);
    if (back instanceof URL) throw new Error(`the IdP redirected to ${back.pathname} instead of answering a form_post page`);
    return back;
  }

  private async walk(authorizeUrl: URL, opts: AuthorizeOptions): Promise<URL | { action: URL; fields: URLSearchParams }> {
    let url = authorizeUrl;
    let init: { method: string; body?: URLSearchParams } = { method: 'GET' };
    for (let hop = 0; hop < 20; hop++) {
      if (url.origin === this.svcOrigin) return url;
      const headers: Record<string, string> = {};
      const cookie = this.idpJar.header(url.pathname);
      if (cookie) headers.cookie = cookie;
      const res = await fetch(url, { ...init, headers, redirect: 'manual' });
      this.idpJar.store(res, url.pathname);
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        await res.body?.cancel();
        url = new URL(location, url);
        init = { method: 'GET' };
        continue;
      }
      const html = await res.text();
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
      const target = action ? new URL(action.replace(/&amp;/g, '&'), url) : null;
      if (res.status === 200 && target?.origin === this.svcOrigin) {
        // A form_post answer: hidden inputs, posted to svc by the page's script.
        const fields = new URLSearchParams();
        const unescape = (v: string) => v.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
        for (const input of html.matchAll(/<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) fields.append(input[1]!, unescape(input[2]!));
        return { action: target, fields };
      }
      const prompt = /name="prompt" value="([a-z]+)"/.exec(html)?.[1];
      if (res.status !== 200 || !target || !prompt) throw new Error(`the IdP answered ${res.status} at ${url.pathname}: ${html.slice(0, 600)}`);
      if (opts.abort) {
        url = new URL(`${target.pathname}/abort`, target);
        init = { method: 'GET' };
        continue;
      }
      url = target;
      init = {
        method: 'POST',
        body: new URLSearchParams(prompt === 'login' ? { prompt, login: opts.login, password: opts.password ?? 'any password' } : { prompt }),
      };
    }
    throw new Error('the IdP kept redirecting');
  }

  /** Delivers the IdP's redirect to svc (`GET /api/auth/oauth/:provider/callback?...`). */
  callback(callbackUrl: URL, init: RequestInit = {}): Promise<Response> {
    return this.fetch(`${callbackUrl.pathname}${callbackUrl.search}`, init);
  }

  /** The whole journey; returns svc's final callback response (302 to the return path or `/?auth_error=`). */
  async login(providerId: string, opts: AuthorizeOptions): Promise<Response> {
    const { res, authorizeUrl } = await this.start(providerId);
    if (!authorizeUrl) return res;
    return this.callback(await this.authorize(authorizeUrl, opts));
  }
}
