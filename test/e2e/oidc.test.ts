// Any OpenID Provider by its issuer URL (CONTRACT 5, `type: "oidc"`; OAuth issue item 3).
//
// - Against a REAL OpenID provider (oidc-provider v8, test/support/oidc.ts): the admin saves only an
//   issuer URL, svc reads its discovery document, and a browser logs in through the IdP's real login
//   and consent pages with PKCE S256 and a nonce; the id_token is verified against the IdP's key set.
// - Against a small IdP that misbehaves on purpose (test/support/fake-oidc.ts, built with jose): an
//   id_token signed with a key it does not publish, with a wrong nonce, for another audience, expired,
//   from another issuer, unsigned; each ends in token_exchange_failed with no session and no user.
// - Saving: an issuer that cannot be reached, whose discovery document is not JSON, or that names
//   another issuer is 400 validation_failed naming config.issuer, and nothing is saved.
// Every svc response goes through the leak scanner (client secrets, tokens, id_tokens, session ids).

import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { startFakeOidc, type FakeOidc, type IdTokenAttack } from '../support/fake-oidc.ts';
import { LeakScanner } from '../support/leak-scanner.ts';
import { loginFailures } from '../support/login-failures.ts';
import { Browser, startIdp, type Idp } from '../support/oidc.ts';

const SVC_BASE = 'http://localhost:3000';
const COOKIE = 'sid_app';
const SECRETS = {
  okta: `oidc-okta-secret-${randomUUID()}`,
  second: `oidc-second-secret-${randomUUID()}`,
  fake: `oidc-fake-secret-${randomUUID()}`,
};
const PROVIDER_IDS = ['oidc', 'okta-corp', 'corp-b', 'zitadel', 'broken-later'];
const callbackUrl = (id: string) => `${SVC_BASE}/api/auth/oauth/${id}/callback`;
const uniq = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

let idp: Idp;
let fake: FakeOidc;
let t: TestApp;
let scan: LeakScanner;
let admin: Browser;
/** The `reason` of every `OAuth login failed` warning svc logged (which check refused a login). */
let failures: string[];
const browser = () => new Browser(scan.wrap(t.fetch), { svcBase: SVC_BASE, cookieName: COOKIE });

beforeAll(async () => {
  const redirectUris = PROVIDER_IDS.map(callbackUrl);
  idp = await startIdp({
    clients: [
      { clientId: 'svc-okta', clientSecret: SECRETS.okta, redirectUris, pkce: true },
      { clientId: 'svc-second', clientSecret: SECRETS.second, redirectUris, pkce: true },
    ],
  });
  fake = await startFakeOidc({ clientId: 'svc-fake', clientSecret: SECRETS.fake });
  scan = new LeakScanner(COOKIE, { tokenSets: [idp.issued.access, idp.issued.refresh, idp.issued.id, fake.issued] });
  for (const [kind, secret] of Object.entries(SECRETS)) scan.addSecret(secret, `client secret (${kind})`);
  t = await createTestApp();
  failures = loginFailures(t.instance);
  scan.watchLogins(t.instance, PROVIDER_IDS);
  admin = browser();
  const adminUser = await t.createUser({ admin: true });
  expect((await admin.passwordLogin(adminUser.email, adminUser.password)).status).toBe(200);
});
afterEach(() => scan.verify());
afterAll(async () => {
  await t?.close();
  await Promise.all([idp?.close(), fake?.close()]);
});

async function createProvider(body: Record<string, unknown>) {
  const res = await admin.fetch('/auth/providers', { method: 'POST', json: body });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 201) throw new Error(`POST /auth/providers ${String(body.providerId)} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

const providerIds = async () => ((await (await admin.fetch('/auth/providers')).json()) as { id: string }[]).map((p) => p.id);

function setsSession(res: Response): boolean {
  return res.headers.getSetCookie().some((line) => line.startsWith(`${COOKIE}=`) && !line.startsWith(`${COOKIE}=;`) && !/max-age=0/i.test(line));
}

async function expectAuthError(b: Browser, res: Response, code: string): Promise<void> {
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe(`/?auth_error=${code}`);
  expect(setsSession(res)).toBe(false);
  expect(b.sessionId).toBeUndefined();
  expect((await b.fetch('/auth/session')).status).toBe(401);
}

interface SessionUser {
  userId: string;
  provider: string;
  user: { email: string; firstname: string; lastname: string; email_verified: boolean; oauthAccounts: { provider: string; providerAccountId: string }[] };
}

async function expectLoggedIn(b: Browser, res: Response): Promise<SessionUser> {
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe('/');
  expect(setsSession(res)).toBe(true);
  const session = await b.fetch('/auth/session?expand=user');
  expect(session.status).toBe(200);
  return (await session.json()) as SessionUser;
}

/** No user holds this email (a refused login created nobody). */
async function expectNoUser(email: string) {
  expect(await t.instance.auth.users.findByEmail(email)).toBeNull();
}

/** 400 validation_failed naming `config.issuer`. */
async function expectIssuerRefused(res: Response, message?: RegExp) {
  expect(res.status).toBe(400);
  const body = (await res.json()) as { error: { code: string; details: { path: string; message: string }[] } };
  expect(body.error.code).toBe('validation_failed');
  const detail = body.error.details.find((d) => d.path === 'config.issuer');
  expect(detail, JSON.stringify(body)).toBeDefined();
  if (message) expect(detail!.message).toMatch(message);
}

/** A loopback port on which nothing listens. */
async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('the admin API', () => {
  it('GET /auth/available-providers lists the oidc template', async () => {
    const all = (await (await admin.fetch('/auth/available-providers')).json()) as Record<string, unknown>[];
    const oidc = all.filter((p) => p.type === 'oidc');
    expect(oidc).toEqual([
      {
        providerId: 'oidc',
        type: 'oidc',
        label: expect.any(String),
        pkce: true,
        configKeys: ['issuer'],
        defaultScopes: ['openid', 'email', 'profile'],
        trustEmailVerified: true,
        redirectUri: callbackUrl('oidc'),
      },
    ]);
  });

  it('POST reads the discovery document and saves the provider with the issuer alone', async () => {
    const before = idp.requests.length;
    const created = await createProvider({ providerId: 'okta-corp', type: 'oidc', label: 'Okta (corp)', clientId: 'svc-okta', clientSecret: SECRETS.okta, config: { issuer: idp.issuer } });
    expect(created).toEqual({
      id: 'okta-corp',
      providerId: 'okta-corp',
      type: 'oidc',
      label: 'Okta (corp)',
      clientId: 'svc-okta',
      hasClientSecret: true,
      redirectUri: callbackUrl('okta-corp'),
      scopes: ['openid', 'email', 'profile'],
      enabled: true,
      trustEmailVerified: true,
      config: { issuer: idp.issuer },
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(idp.requests.slice(before)).toEqual([{ method: 'GET', path: '/.well-known/openid-configuration', scheme: '' }]);
    const list = (await (await browser().fetch('/auth/oauth/providers')).json()) as unknown[];
    expect(list).toContainEqual({ providerId: 'okta-corp', label: 'Okta (corp)', type: 'oidc' });
  });

  describe('an issuer that cannot be used: 400 validation_failed naming config.issuer, nothing saved', () => {
    const post = (issuer: string | undefined, providerId = 'bad-issuer') =>
      admin.fetch('/auth/providers', { method: 'POST', json: { providerId, type: 'oidc', clientId: 'c', clientSecret: SECRETS.fake, config: issuer === undefined ? {} : { issuer } } });
    afterEach(() => {
      fake.discovery = 'ok';
    });

    it('unreachable (nothing listens there)', async () => {
      const started = Date.now();
      await expectIssuerRefused(await post(`http://127.0.0.1:${await deadPort()}/realms/x`), /cannot be reached/);
      expect(Date.now() - started).toBeLessThan(6_000);
      expect(await providerIds()).not.toContain('bad-issuer');
    });

    it('the discovery document is not JSON (an HTML page)', async () => {
      fake.discovery = 'not-json';
      await expectIssuerRefused(await post(fake.issuer), /not a JSON discovery document/);
      expect(await providerIds()).not.toContain('bad-issuer');
    });

    it('the discovery document names another issuer (even one that differs only by a trailing slash)', async () => {
      fake.discovery = 'other-issuer';
      await expectIssuerRefused(await post(fake.issuer), new RegExp(`issuer "${fake.issuer}/" is not exactly "${fake.issuer}"$`));
      expect(await providerIds()).not.toContain('bad-issuer');
    });

    it('the issuer answers an error status', async () => {
      fake.discovery = 'http-500';
      await expectIssuerRefused(await post(fake.issuer), /HTTP 500/);
      expect(await providerIds()).not.toContain('bad-issuer');
    });

    it('the issuer is missing, or breaks the provider URL rule (nothing is fetched)', async () => {
      await expectIssuerRefused(await post(undefined), /required/);
      const before = fake.requests.length;
      await expectIssuerRefused(await post('http://10.0.0.5/realms/x'), /https/);
      await expectIssuerRefused(await post('file:///etc/passwd'));
      expect(fake.requests.length).toBe(before);
      expect(await providerIds()).not.toContain('bad-issuer');
    });

    it('PATCH to an unusable issuer changes nothing; a PATCH without the issuer does not read it', async () => {
      await createProvider({ providerId: 'broken-later', type: 'oidc', clientId: 'svc-fake', clientSecret: SECRETS.fake, config: { issuer: fake.issuer } });
      try {
        fake.discovery = 'other-issuer';
        await expectIssuerRefused(await admin.fetch('/auth/providers/broken-later', { method: 'PATCH', json: { label: 'Renamed', config: { issuer: fake.issuer } } }));
        await expectIssuerRefused(await admin.fetch('/auth/providers/broken-later', { method: 'PATCH', json: { config: { issuer: `http://127.0.0.1:${await deadPort()}/x` } } }));
        const list = (await (await admin.fetch('/auth/providers')).json()) as Record<string, unknown>[];
        expect(list.find((p) => p.id === 'broken-later')).toMatchObject({ label: 'broken-later', config: { issuer: fake.issuer } });
        // Disabling a provider whose IdP is down must still work.
        const off = await admin.fetch('/auth/providers/broken-later', { method: 'PATCH', json: { enabled: false } });
        expect(off.status).toBe(200);
      } finally {
        await admin.fetch('/auth/providers/broken-later', { method: 'DELETE' });
      }
    });
  });
});

describe('login against a real OpenID provider (oidc-provider)', () => {
  it('PKCE S256 and a nonce kept in the state record; the verified id_token and userinfo make the user', async () => {
    const login = uniq('ada');
    const email = `${login}@example.com`;
    idp.setAccount(login, { email, email_verified: true, name: 'Ada King Lovelace', picture: 'https://img.example/ada.png' });
    const b = browser();
    const { authorizeUrl } = await b.start('okta-corp');
    expect(authorizeUrl).not.toBeNull();
    const q = authorizeUrl!.searchParams;
    expect(`${authorizeUrl!.origin}${authorizeUrl!.pathname}`).toBe(idp.authorizationEndpoint);
    expect(Object.fromEntries(q)).toEqual({
      response_type: 'code',
      client_id: 'svc-okta',
      redirect_uri: callbackUrl('okta-corp'),
      scope: 'openid email profile',
      state: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      nonce: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      code_challenge_method: 'S256',
    });

    // The nonce is kept next to the PKCE verifier in the state record (store key: the state's hash).
    const record = JSON.parse((await t.instance.stores.forRole('oauthState').get(`${t.keyPrefix}oauth-state:${sha256(q.get('state')!)}`))!) as Record<string, unknown>;
    expect(record).toMatchObject({ providerId: 'okta-corp', nonce: q.get('nonce') });
    expect(s256(record.codeVerifier as string)).toBe(q.get('code_challenge'));

    const before = idp.requests.length;
    const cb = await b.authorize(authorizeUrl!, { login });
    expect(cb.searchParams.get('iss')).toBe(idp.issuer);
    const session = await expectLoggedIn(b, await b.callback(cb));
    expect(session.provider).toBe('okta-corp');
    expect(session.user).toMatchObject({ email, email_verified: true, firstname: 'Ada', lastname: 'King Lovelace', oauthAccounts: [{ provider: 'okta-corp', providerAccountId: login }] });

    // Server side: the code exchange (client authenticated), the key set, the userinfo; the
    // discovery document came from the cache (read when the provider was saved).
    const calls = idp.requests.slice(before).map((r) => `${r.method} ${r.path} ${r.scheme}`.trim());
    expect(calls.filter((c) => !c.startsWith('GET /protocol/openid-connect/auth'))).toEqual([
      'POST /protocol/openid-connect/token Basic',
      'GET /protocol/openid-connect/certs',
      'GET /protocol/openid-connect/userinfo Bearer',
    ]);
    const ctx = scan.loginContexts.at(-1)!;
    expect(ctx).toMatchObject({ providerId: 'okta-corp', userId: session.userId, profile: { id: login, email, emailVerified: true, avatarUrl: 'https://img.example/ada.png' } });
    expect(ctx.userInfo).toMatchObject({ sub: login, email, iss: idp.issuer, aud: 'svc-okta', nonce: q.get('nonce') });
    expect(idp.issued.access.has(ctx.accessToken)).toBe(true);

    // The state (and its nonce) was single use.
    expect(await t.instance.stores.forRole('oauthState').get(`${t.keyPrefix}oauth-state:${sha256(q.get('state')!)}`)).toBeNull();
    const replay = browser();
    await expectAuthError(replay, await replay.callback(cb, { headers: { cookie: `svc_oauth_state=${q.get('state')}` } }), 'invalid_state');
  });

  it('a second login reuses the cached discovery document and key set', async () => {
    const login = uniq('grace');
    idp.setAccount(login, { email: `${login}@example.com`, email_verified: false, name: 'Grace Hopper' });
    const before = idp.requests.length;
    const b = browser();
    const session = await expectLoggedIn(b, await b.login('okta-corp', { login }));
    expect(session.user).toMatchObject({ email_verified: false, firstname: 'Grace' });
    const paths = idp.requests.slice(before).map((r) => r.path);
    expect(paths).not.toContain('/.well-known/openid-configuration');
    expect(paths).not.toContain('/protocol/openid-connect/certs');
  });

  it('several oidc providers coexist under their own providerIds, each with its own client', async () => {
    await createProvider({ providerId: 'corp-b', type: 'oidc', clientId: 'svc-second', clientSecret: SECRETS.second, scopes: ['openid', 'email'], config: { issuer: idp.issuer } });
    await createProvider({ providerId: 'zitadel', type: 'oidc', label: 'Zitadel', clientId: 'svc-fake', clientSecret: SECRETS.fake, config: { issuer: fake.issuer } });
    const list = (await (await browser().fetch('/auth/oauth/providers')).json()) as { providerId: string; type: string }[];
    expect(list.filter((p) => p.type === 'oidc').map((p) => p.providerId).sort()).toEqual(['corp-b', 'okta-corp', 'zitadel']);

    const login = uniq('lin');
    idp.setAccount(login, { email: `${login}@example.com`, email_verified: true, name: 'Lin Two' });
    const b = browser();
    const { authorizeUrl } = await b.start('corp-b');
    expect(authorizeUrl!.searchParams.get('client_id')).toBe('svc-second');
    expect(authorizeUrl!.searchParams.get('scope')).toBe('openid email');
    const session = await expectLoggedIn(b, await b.callback(await b.authorize(authorizeUrl!, { login })));
    expect(session.provider).toBe('corp-b');
    // Without the profile scope the IdP releases no name.
    expect(session.user).toMatchObject({ firstname: '', oauthAccounts: [{ provider: 'corp-b', providerAccountId: login }] });
  });
});

describe('login against an IdP that misbehaves (id_token attacks)', () => {
  /** svc's start, then the IdP's redirect back with a code; the token endpoint answers per `attack`. */
  async function loginAtFake(attack?: IdTokenAttack, account?: { email_verified?: boolean }) {
    const sub = uniq('sub');
    const email = `${sub}@example.com`;
    const b = browser();
    const { authorizeUrl } = await b.start('zitadel');
    expect(authorizeUrl).not.toBeNull();
    expect(authorizeUrl!.searchParams.get('nonce')).toBeTruthy();
    const before = fake.requests.length;
    const res = await b.callback(fake.approve(authorizeUrl!, { sub, email, email_verified: true, ...account }, attack));
    return { b, res, sub, email, calls: fake.requests.slice(before).map((r) => `${r.method} ${r.path} ${r.status}`) };
  }

  afterEach(() => {
    fake.userInfoOverride = {};
  });

  it('control: a correct id_token logs in; claims come from the id_token, completed by userinfo', async () => {
    fake.userInfoOverride = { name: 'Uma From Userinfo', email: 'someone-else@example.com' };
    const { b, res, sub, email, calls } = await loginAtFake();
    const session = await expectLoggedIn(b, res);
    // The signed id_token wins (email); userinfo fills in what it lacks (name).
    expect(session.user).toMatchObject({ email, email_verified: true, firstname: 'Uma', lastname: 'From Userinfo', oauthAccounts: [{ provider: 'zitadel', providerAccountId: sub }] });
    expect(calls.filter((c) => c !== 'GET /tenant-a/jwks 200')).toEqual(['POST /tenant-a/token 200', 'GET /tenant-a/userinfo 200']);
  });

  it("names: without `name`, userinfo's given_name / family_name are the user's first and last name, as the provider splits them", async () => {
    fake.userInfoOverride = { given_name: 'Mary Ann', family_name: 'Evans' };
    const { b, res } = await loginAtFake();
    const session = await expectLoggedIn(b, res);
    expect(session.user).toMatchObject({ firstname: 'Mary Ann', lastname: 'Evans' });
  });

  /** Each attack, and the check that must be the one refusing it (from the logged reason). */
  const attacks: [IdTokenAttack, string, RegExp][] = [
    ['unpublished-key', 'signed with a key the IdP does not publish (claiming the published kid)', /signature verification failed/],
    ['unknown-kid', 'signed with an unpublished key under a kid the key set does not have', /no applicable key found/],
    ['wrong-nonce', 'carrying the nonce of another login', /"nonce" claim/],
    ['other-audience', 'issued to another client (aud)', /"aud" \(audience\)/],
    ['expired', 'expired (exp)', /"exp" \(expiration time\)/],
    ['other-issuer', 'from another issuer (iss)', /"iss" \(issuer\) claim/],
    ['alg-none', 'unsigned (alg: none)', /"alg" header/],
  ];
  for (const [attack, what, check] of attacks) {
    it(`an id_token ${what}: token_exchange_failed, no session, no user`, async () => {
      const logged = failures.length;
      const { b, res, email, calls } = await loginAtFake(attack);
      await expectAuthError(b, res, 'token_exchange_failed');
      expect(failures.slice(logged)).toEqual([expect.stringMatching(check)]);
      await expectNoUser(email);
      // The IdP handed out the tokens (client and PKCE were fine); svc refused the id_token before
      // using any claim: userinfo was never asked.
      expect(calls).toContain('POST /tenant-a/token 200');
      expect(calls.filter((c) => c.startsWith('GET /tenant-a/userinfo'))).toEqual([]);
    });
  }

  it('an authorization response from another issuer (iss parameter, mix-up): token_exchange_failed, code never sent', async () => {
    const b = browser();
    const { authorizeUrl } = await b.start('zitadel');
    const sub = uniq('mixup');
    const cb = fake.approve(authorizeUrl!, { sub, email: `${sub}@example.com`, email_verified: true });
    cb.searchParams.set('iss', idp.issuer);
    const before = fake.requests.length;
    const logged = failures.length;
    await expectAuthError(b, await b.callback(cb), 'token_exchange_failed');
    expect(failures.slice(logged)).toEqual([expect.stringMatching(/"iss" \(issuer\) response parameter/)]);
    expect(fake.requests.slice(before)).toEqual([]);
    await expectNoUser(`${sub}@example.com`);
  });

  it("userinfo about someone else (another sub than the id_token's): userinfo_failed, no user", async () => {
    fake.userInfoOverride = { sub: 'someone-else' };
    const { b, res, email } = await loginAtFake();
    await expectAuthError(b, res, 'userinfo_failed');
    await expectNoUser(email);
  });

  it('logins keep working from the cached discovery document while the IdP cannot serve it', async () => {
    fake.discovery = 'http-500';
    try {
      const { b, res } = await loginAtFake();
      await expectLoggedIn(b, res);
    } finally {
      fake.discovery = 'ok';
    }
  });
});
