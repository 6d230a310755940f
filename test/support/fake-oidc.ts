// A small OpenID Provider on 127.0.0.1 that can misbehave on purpose, for the id_token attacks that
// a real IdP (test/support/oidc.ts) never commits: tokens signed with a key it does not publish, a
// wrong nonce, another audience, an expired token, another issuer, `alg: none`. Built with jose.
//
// It serves a discovery document, its key set, a token endpoint (PKCE S256 and client_secret_basic
// checked) and a userinfo endpoint. There is no login page: `approve(authorizeUrl, account)` plays the
// user who signs in and returns svc's callback URL with a code, as the IdP's redirect would.

import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type CryptoKey, type JWK } from 'jose';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the next id_token for an approval is wrong (none: a correct token). */
export type IdTokenAttack = 'unpublished-key' | 'unknown-kid' | 'wrong-nonce' | 'other-audience' | 'expired' | 'other-issuer' | 'alg-none';

/** What `/.well-known/openid-configuration` answers. */
export type DiscoveryMode = 'ok' | 'not-json' | 'other-issuer' | 'http-500' | 'plain-http-token-endpoint';

export interface FakeAccount {
  sub: string;
  email?: string;
  email_verified?: boolean;
  name?: string;
}

export interface FakeOidcRequest {
  method: string;
  /** Path with the query string. */
  path: string;
  authorization: string;
  form?: Record<string, string>;
  /** The status the fake answered. */
  status?: number;
}

export interface FakeOidc {
  /** `http://127.0.0.1:<port>/tenant-a` (a path, as most hosted IdPs have). */
  issuer: string;
  requests: FakeOidcRequest[];
  /** Access and id tokens the token endpoint handed out (for the leak scanner). */
  issued: Set<string>;
  discovery: DiscoveryMode;
  /** Extra claims of the userinfo answer (e.g. another `sub`), merged over the account. */
  userInfoOverride: Record<string, unknown>;
  /** The user signs in: returns svc's callback URL with `code`, `state` and `iss`. */
  approve(authorizeUrl: URL, account: FakeAccount, attack?: IdTokenAttack): URL;
  /** Publishes a new signing key (new `kid`) and withdraws the old one. */
  rotateKey(): Promise<void>;
  /** A token signed with the key published now (for tests of the key set cache). */
  sign(claims: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

interface Approval {
  clientId: string;
  redirectUri: string;
  challenge: string;
  nonce: string;
  account: FakeAccount;
  attack?: IdTokenAttack;
}

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function newKey(): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = `k-${randomBytes(6).toString('hex')}`;
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

async function readForm(req: http.IncomingMessage): Promise<Record<string, string>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

export async function startFakeOidc(client: { clientId: string; clientSecret: string }): Promise<FakeOidc> {
  const requests: FakeOidcRequest[] = [];
  const issued = new Set<string>();
  const approvals = new Map<string, Approval>();
  const accessTokens = new Map<string, FakeAccount>();
  let published = await newKey();
  /** Never in the key set: what an attacker who does not hold the IdP's key signs with. */
  const unpublished = await newKey();

  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const issuer = `${origin}/tenant-a`;

  const self: FakeOidc = {
    issuer,
    requests,
    issued,
    discovery: 'ok',
    userInfoOverride: {},
    approve(authorizeUrl, account, attack) {
      const q = authorizeUrl.searchParams;
      const code = randomBytes(16).toString('base64url');
      approvals.set(code, { clientId: q.get('client_id') ?? '', redirectUri: q.get('redirect_uri') ?? '', challenge: q.get('code_challenge') ?? '', nonce: q.get('nonce') ?? '', account, attack });
      const callback = new URL(q.get('redirect_uri')!);
      callback.searchParams.set('code', code);
      callback.searchParams.set('state', q.get('state') ?? '');
      callback.searchParams.set('iss', issuer);
      return callback;
    },
    async rotateKey() {
      published = await newKey();
    },
    sign: (claims) => new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: published.kid }).sign(published.privateKey),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  /** client_secret_basic: both parts form-urlencoded (RFC 6749 section 2.3.1), then base64. */
  function clientAuthenticated(header: string): boolean {
    const [scheme, value = ''] = header.split(' ');
    if (scheme !== 'Basic') return false;
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const part = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    return colon > 0 && part(decoded.slice(0, colon)) === client.clientId && part(decoded.slice(colon + 1)) === client.clientSecret;
  }

  async function idToken(approval: Approval): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const { attack, account } = approval;
    const claims = {
      ...account,
      nonce: attack === 'wrong-nonce' ? 'a-nonce-of-another-login' : approval.nonce,
    };
    if (attack === 'alg-none') {
      return new UnsecuredJWT(claims).setIssuer(issuer).setSubject(account.sub).setAudience(approval.clientId).setIssuedAt(now).setExpirationTime(now + 300).encode();
    }
    const key = attack === 'unpublished-key' || attack === 'unknown-kid' ? unpublished : published;
    // `unpublished-key` claims the published key's kid: only the signature check can catch it.
    const kid = attack === 'unpublished-key' ? published.kid : key.kid;
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid })
      .setIssuer(attack === 'other-issuer' ? `${origin}/tenant-b` : issuer)
      .setSubject(account.sub)
      .setAudience(attack === 'other-audience' ? 'another-client-of-this-idp' : approval.clientId)
      .setIssuedAt(attack === 'expired' ? now - 7200 : now)
      .setExpirationTime(attack === 'expired' ? now - 3600 : now + 300)
      .sign(key.privateKey);
  }

  server.on('request', (req, res) => {
    const path = req.url ?? '/';
    const record: FakeOidcRequest = { method: req.method ?? 'GET', path, authorization: req.headers.authorization ?? '' };
    const json = (status: number, body: unknown) => {
      record.status = status;
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
    };
    requests.push(record);

    if (req.method === 'GET' && path === '/tenant-a/.well-known/openid-configuration') {
      if (self.discovery === 'http-500') return json(500, { error: 'server_error' });
      if (self.discovery === 'not-json') return res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Sign in</title><p>Welcome');
      return json(200, {
        // The trailing slash: a URL that normalizes to the same but is not exactly the issuer.
        issuer: self.discovery === 'other-issuer' ? `${issuer}/` : issuer,
        authorization_endpoint: `${issuer}/authorize`,
        // A remote plain-http endpoint breaks the provider URL rule (never called: refused on sight).
        token_endpoint: self.discovery === 'plain-http-token-endpoint' ? 'http://idp.example.com/token' : `${issuer}/token`,
        userinfo_endpoint: `${issuer}/userinfo`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        token_endpoint_auth_methods_supported: ['client_secret_basic'],
        code_challenge_methods_supported: ['S256'],
        authorization_response_iss_parameter_supported: true,
      });
    }
    if (req.method === 'GET' && path === '/tenant-a/jwks') return json(200, { keys: [published.publicJwk] });
    if (req.method === 'POST' && path === '/tenant-a/token') {
      void readForm(req).then(async (form) => {
        record.form = form;
        const approval = approvals.get(form.code ?? '');
        approvals.delete(form.code ?? '');
        if (!clientAuthenticated(record.authorization)) return json(401, { error: 'invalid_client' });
        if (form.grant_type !== 'authorization_code' || !approval || approval.redirectUri !== form.redirect_uri) return json(400, { error: 'invalid_grant' });
        if (createHash('sha256').update(form.code_verifier ?? '').digest('base64url') !== approval.challenge) return json(400, { error: 'invalid_grant', error_description: 'PKCE' });
        const accessToken = randomBytes(24).toString('base64url');
        const id = await idToken(approval);
        issued.add(accessToken);
        issued.add(id);
        accessTokens.set(accessToken, approval.account);
        json(200, { access_token: accessToken, token_type: 'Bearer', expires_in: 300, id_token: id });
      });
      return;
    }
    if (req.method === 'GET' && path === '/tenant-a/userinfo') {
      const account = accessTokens.get(/^Bearer (\S+)$/.exec(record.authorization)?.[1] ?? '');
      return account ? json(200, { ...account, ...self.userInfoOverride }) : json(401, { error: 'invalid_token' });
    }
    json(404, { error: 'not_found' });
  });

  return self;
}
