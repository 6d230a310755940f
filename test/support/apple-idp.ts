// Sign in with Apple, played by a REAL OpenID provider (oidc-provider v8) on 127.0.0.1, behind a small
// front server that does what Apple does and oidc-provider does not:
//
//   issuer `https://appleid.apple.com`, routes /auth/authorize, /auth/token, /auth/keys (Apple's paths;
//   tests send svc's calls for appleid.apple.com here with routeHosts), ES256 id_tokens carrying the
//   nonce, and `response_mode=form_post`: the authorization response is an HTML form that posts
//   `code`, `state` (and `iss`) to svc's callback;
//   the client secret is a JWT the relying party signs with its .p8 key (ES256, `kid` = key id,
//   `iss` = team id, `sub` = client id, `aud` = https://appleid.apple.com): the front server verifies
//   it with the public key, then hands oidc-provider the client's registered secret;
//   the scope `name email` yields an id_token (Apple needs no `openid` scope): the front adds `openid`.
//
// `tamper` makes the next token responses carry a forged id_token (re-signed by a key the front
// publishes beside oidc-provider's, or by one it does not publish), for the checks svc must make.

import { exportJWK, exportPKCS8, generateKeyPair, jwtVerify, decodeJwt, SignJWT, type CryptoKey, type JWK } from 'jose';
import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { closeServer, listen } from './oidc.ts';

export const APPLE_ISSUER = 'https://appleid.apple.com';

/** How the next id_token is forged (none: oidc-provider's own token passes through; resign: the same claims, signed by the front's published key). */
export type AppleTamper = 'none' | 'resign' | 'wrong-nonce' | 'other-audience' | 'other-issuer' | 'unpublished-key';

interface OidcProvider {
  proxy: boolean;
  callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;
  on(event: 'server_error', listener: (ctx: unknown, err: Error) => void): void;
}
type OidcProviderClass = new (issuer: string, configuration: Record<string, unknown>) => OidcProvider;
const OIDC_PROVIDER_MODULE = 'oidc-provider';

export interface AppleIdp {
  /** `http://127.0.0.1:<port>`: where tests send Apple's host (the front server). */
  url: string;
  /** With `tls`: the port of the HTTPS listener (same front). */
  tlsPort?: number;
  clientId: string;
  teamId: string;
  keyId: string;
  /** The .p8 private key (PEM) an admin saves as the provider's clientSecret. */
  p8: string;
  /** Sets what the account with this login name releases (`sub` is the login name). */
  setAccount(login: string, claims: { email?: string; email_verified?: boolean | string }): void;
  tamper: AppleTamper;
  /** Apple's `user` field (the person's name), added to the next form_post page only, as on a first login. */
  nextUser: Record<string, unknown> | null;
  /** Client secrets seen at the token endpoint, and whether each verified. */
  clientSecrets: { jwt: string; valid: boolean }[];
  /** Every id_token handed to svc (for the leak scanner). */
  issued: Set<string>;
  close(): Promise<void>;
}

const readBody = async (req: IncomingMessage): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

/**
 * `tls` (a certificate for appleid.apple.com) adds an HTTPS listener for a real browser, whose host
 * resolver maps appleid.apple.com to `tlsPort`; svc's own calls keep using the plain `url`.
 */
export async function startAppleIdp(opts: { clientId: string; redirectUris: string[]; tls?: { key: string; cert: string } }): Promise<AppleIdp> {
  const teamId = 'TEAM123456';
  const keyId = 'KEY1234567';
  const registeredSecret = randomBytes(24).toString('hex');
  const accounts = new Map<string, Record<string, unknown>>();
  const clientSecrets: AppleIdp['clientSecrets'] = [];
  const issued = new Set<string>();

  // The developer's .p8 key (Apple keeps the public half): ES256, PKCS#8 PEM.
  const developerKey = await generateKeyPair('ES256', { extractable: true });
  const p8 = await exportPKCS8(developerKey.privateKey);
  // oidc-provider's signing key, and the front's own: one it publishes, one it does not.
  const signing = await generateKeyPair('ES256', { extractable: true });
  const published = await generateKeyPair('ES256', { extractable: true });
  const unpublished = await generateKeyPair('ES256', { extractable: true });
  const jwk = async (key: CryptoKey, kid: string): Promise<JWK> => ({ ...(await exportJWK(key)), kid, use: 'sig', alg: 'ES256' });

  const inner = http.createServer();
  const innerPort = await listen(inner);
  const { default: Provider } = (await import(OIDC_PROVIDER_MODULE)) as { default: OidcProviderClass };
  const provider = new Provider(APPLE_ISSUER, {
    clients: [
      {
        client_id: opts.clientId,
        client_secret: registeredSecret,
        redirect_uris: opts.redirectUris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks: { keys: [await jwk(signing.privateKey, 'apple-signing')] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    routes: { authorization: '/auth/authorize', token: '/auth/token', jwks: '/auth/keys' },
    scopes: ['openid', 'name', 'email'],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], name: [] },
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => false },
    ttl: { AccessToken: 3600, AuthorizationCode: 60, IdToken: 3600, Interaction: 600, Session: 3600, Grant: 3600 },
    async findAccount(_ctx: unknown, sub: string) {
      return { accountId: sub, claims: async () => ({ sub, ...accounts.get(sub) }) };
    },
  });
  // Behind the front: `X-Forwarded-Proto: https` from its TLS listener makes the pages' URLs https.
  provider.proxy = true;
  provider.on('server_error', (_ctx, err) => process.stderr.write(`apple oidc-provider server_error: ${err.stack}\n`));
  inner.on('request', provider.callback());

  /** Forwards a request to oidc-provider with its Host kept (so its URLs name the front). */
  const forward = (req: IncomingMessage, body: Buffer, path: string) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const proto = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
      const headers = { ...req.headers, 'content-length': String(body.length), 'x-forwarded-proto': proto };
      const out = http.request({ host: '127.0.0.1', port: innerPort, method: req.method, path, headers }, async (res) => {
        resolve({ status: res.statusCode ?? 502, headers: res.headers, body: await readBody(res) });
      });
      out.on('error', reject);
      out.end(body);
    });

  const idp: AppleIdp = {
    url: '',
    clientId: opts.clientId,
    teamId,
    keyId,
    p8,
    setAccount: (login, claims) => void accounts.set(login, claims),
    tamper: 'none',
    nextUser: null,
    clientSecrets,
    issued,
    close: async () => {
      await Promise.all([closeServer(front), closeServer(inner)]);
    },
  };

  async function forge(idToken: string): Promise<string> {
    const claims = decodeJwt(idToken);
    const change: Record<AppleTamper, Record<string, unknown>> = {
      none: {},
      resign: {},
      'wrong-nonce': { nonce: randomBytes(16).toString('base64url') },
      'other-audience': { aud: 'com.example.someone-else' },
      'other-issuer': { iss: 'https://appleid.apple.com.evil.example' },
      'unpublished-key': {},
    };
    const key = idp.tamper === 'unpublished-key' ? unpublished.privateKey : published.privateKey;
    const kid = idp.tamper === 'unpublished-key' ? 'front-unpublished' : 'front-published';
    return new SignJWT({ ...claims, ...change[idp.tamper] }).setProtectedHeader({ alg: 'ES256', kid }).sign(key);
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://front');
    let body = await readBody(req);
    if (url.pathname === '/auth/authorize') {
      // Apple answers an id_token for `name email`; oidc-provider wants `openid` for that.
      const scopes = new Set((url.searchParams.get('scope') ?? '').split(' ').filter(Boolean));
      scopes.add('openid');
      url.searchParams.set('scope', [...scopes].join(' '));
    }
    if (url.pathname === '/auth/token' && req.method === 'POST') {
      const form = new URLSearchParams(body.toString('utf8'));
      const secret = form.get('client_secret') ?? '';
      let valid: boolean;
      try {
        const { protectedHeader } = await jwtVerify(secret, developerKey.publicKey, {
          algorithms: ['ES256'],
          issuer: teamId,
          subject: opts.clientId,
          audience: APPLE_ISSUER,
        });
        valid = protectedHeader.kid === keyId;
      } catch {
        valid = false;
      }
      clientSecrets.push({ jwt: secret, valid });
      if (!valid) {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_client' }));
        return;
      }
      form.set('client_secret', registeredSecret);
      body = Buffer.from(form.toString());
    }
    const answer = await forward(req, body, `${url.pathname}${url.search}`);
    let out = answer.body;
    if (url.pathname === '/auth/keys' && answer.status === 200) {
      const set = JSON.parse(out.toString('utf8')) as { keys: JWK[] };
      set.keys.push(await jwk(published.publicKey, 'front-published'));
      out = Buffer.from(JSON.stringify(set));
    }
    if (url.pathname === '/auth/token' && answer.status === 200) {
      const json = JSON.parse(out.toString('utf8')) as Record<string, unknown>;
      if (typeof json.id_token === 'string') {
        if (idp.tamper !== 'none') json.id_token = await forge(json.id_token);
        issued.add(json.id_token as string);
      }
      if (typeof json.access_token === 'string') issued.add(json.access_token);
      out = Buffer.from(JSON.stringify(json));
    }
    const html = String(answer.headers['content-type'] ?? '').startsWith('text/html') ? out.toString('utf8') : '';
    if (idp.nextUser && /<form method="post"/.test(html) && html.includes('name="code"')) {
      // Apple's form_post page of a first authorization also posts `user` (JSON with the name).
      const value = JSON.stringify(idp.nextUser).replace(/&/g, '&amp;').replace(/"/g, '&quot;');
      out = Buffer.from(html.replace('</form>', `<input type="hidden" name="user" value="${value}"/></form>`));
      idp.nextUser = null;
    }
    const headers = { ...answer.headers, 'content-length': String(out.length) };
    delete headers['transfer-encoding'];
    res.writeHead(answer.status, headers).end(out);
  }

  const serveFront = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(err.message);
    });
  };
  const front = http.createServer(serveFront);
  idp.url = `http://127.0.0.1:${await listen(front)}`;
  if (opts.tls) {
    const secure = https.createServer(opts.tls, serveFront);
    idp.tlsPort = await listen(secure);
    const closePlain = idp.close;
    idp.close = async () => {
      await Promise.all([closePlain(), closeServer(secure)]);
    };
  }
  return idp;
}
