// Built-in providers end to end against local servers that serve only the real providers' paths
// (test/support/fake-provider.ts), and the provider document field `trustEmailVerified` (CONTRACT 5;
// OAuth issue item 2): a provider whose "verified" flag cannot be relied on (authentik before 2025.10
// marks every email verified; Synology) must not log anyone into an existing account by claiming its
// address, and must not create users that look verified.

import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PROVIDER_COLLECTION } from '../../src/auth/oauth/providers.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { startFakeProvider, type FakeProvider } from '../support/fake-provider.ts';
import { LeakScanner } from '../support/leak-scanner.ts';
import { Browser } from '../support/oidc.ts';
import { routeHosts } from '../support/route-hosts.ts';

const SVC_BASE = 'http://localhost:3000';
const COOKIE = 'sid_app';
const CLIENT_SECRET = `builtin-secret-${randomUUID()}`;
const uniq = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

/** The real paths of each provider (arctic's classes and the catalog's user-info URLs). */
const PATHS = {
  authentik: { token: '/application/o/token/', userInfo: '/application/o/userinfo/' },
  synology: { token: '/webman/sso/SSOAccessToken.cgi', userInfo: '/webman/sso/SSOUserInfo.cgi' },
  gitea: { token: '/login/oauth/access_token', userInfo: '/login/oauth/userinfo' },
  // Mastodon serves /oauth/authorize and /oauth/token (not arctic 3.7's /api/v1/oauth/...).
  mastodon: { token: '/oauth/token', userInfo: '/api/v1/accounts/verify_credentials' },
};
type Id = keyof typeof PATHS;

interface User {
  id: string;
  email: string;
  email_verified: boolean;
  oauthAccounts: { provider: string; providerAccountId: string }[];
}

let t: TestApp;
let scan: LeakScanner;
let admin: Browser;
const servers = {} as Record<Id, FakeProvider>;
const browser = () => new Browser(scan.wrap(t.fetch), { svcBase: SVC_BASE, cookieName: COOKIE });

beforeAll(async () => {
  for (const id of Object.keys(PATHS) as Id[]) servers[id] = await startFakeProvider(PATHS[id]);
  scan = new LeakScanner(COOKIE, { tokenSets: Object.values(servers).map((s) => s.issued) });
  scan.addSecret(CLIENT_SECRET, 'client secret');
  t = await createTestApp({
    config: {
      auth: {
        providers: {
          custom: [{ id: 'acme', displayName: 'Acme', authorizationEndpoint: 'https://a.example/auth', tokenEndpoint: 'https://a.example/token', userInfoEndpoint: 'https://a.example/me' }],
        },
      },
    },
  });
  admin = browser();
  const adminUser = await t.createUser({ admin: true });
  expect((await admin.passwordLogin(adminUser.email, adminUser.password)).status).toBe(200);
});
afterEach(() => scan.verify());
afterAll(async () => {
  await t?.close();
  await Promise.all(Object.values(servers).map((s) => s.close()));
});

async function createProvider(body: Record<string, unknown>) {
  const res = await admin.fetch('/auth/providers', { method: 'POST', json: { clientId: 'svc-client', clientSecret: CLIENT_SECRET, ...body } });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 201) throw new Error(`POST /auth/providers answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/**
 * A login through svc: start (svc's authorize URL), then the provider's redirect back with a code,
 * delivered by the test; svc exchanges the code and reads the user info at the local server.
 */
async function login(providerId: string, userInfo: Record<string, unknown>, server: FakeProvider) {
  server.setUserInfo(userInfo);
  const b = browser();
  const { authorizeUrl } = await b.start(providerId);
  expect(authorizeUrl, providerId).not.toBeNull();
  const callback = new URL(`${SVC_BASE}/api/auth/oauth/${providerId}/callback`);
  callback.searchParams.set('code', uniq('code'));
  callback.searchParams.set('state', authorizeUrl!.searchParams.get('state')!);
  const res = await b.callback(callback);
  return { b, res, authorizeUrl: authorizeUrl!, location: res.headers.get('location') };
}

async function sessionUser(b: Browser): Promise<{ userId: string; user: User }> {
  const res = await b.fetch('/auth/session?expand=user');
  expect(res.status).toBe(200);
  return (await res.json()) as { userId: string; user: User };
}

const userById = async (id: string) => (await (await admin.fetch(`/auth/users/${id}`)).json()) as User;

describe('trustEmailVerified on the admin API', () => {
  it('GET /auth/available-providers: false for authentik and synology, true for every other entry and the custom templates', async () => {
    const all = (await (await admin.fetch('/auth/available-providers')).json()) as { providerId: string; type: string; trustEmailVerified: unknown }[];
    expect(all.length).toBeGreaterThan(60);
    for (const p of all) expect(typeof p.trustEmailVerified, p.providerId).toBe('boolean');
    expect(all.filter((p) => p.trustEmailVerified === false).map((p) => p.providerId)).toEqual(['authentik', 'synology']);
    expect(all.find((p) => p.type === 'custom')).toMatchObject({ providerId: 'acme', trustEmailVerified: true });
  });

  it('POST takes the default of the providerId unless given; PATCH changes it; GET returns it', async () => {
    const cases: [Record<string, unknown>, boolean][] = [
      [{ providerId: 'authentik', type: 'arctic', config: { baseURL: 'https://auth.example.com' } }, false],
      [{ providerId: 'synology', type: 'arctic', config: { baseURL: 'https://nas.example.com' } }, false],
      [{ providerId: 'gitea', type: 'arctic', config: { baseURL: 'https://git.example.com' } }, true],
      [{ providerId: 'acme', type: 'custom' }, true],
      [{ providerId: 'google', type: 'arctic', trustEmailVerified: false }, false],
    ];
    try {
      for (const [body, expected] of cases) expect((await createProvider(body)).trustEmailVerified, String(body.providerId)).toBe(expected);
      const list = (await (await admin.fetch('/auth/providers')).json()) as { id: string; trustEmailVerified: boolean }[];
      expect(Object.fromEntries(list.map((p) => [p.id, p.trustEmailVerified]))).toEqual({ authentik: false, synology: false, gitea: true, acme: true, google: false });

      const on = await admin.fetch('/auth/providers/authentik', { method: 'PATCH', json: { trustEmailVerified: true } });
      expect(on.status).toBe(200);
      expect(await on.json()).toMatchObject({ id: 'authentik', trustEmailVerified: true, config: { baseURL: 'https://auth.example.com' } });
      const unrelated = await admin.fetch('/auth/providers/authentik', { method: 'PATCH', json: { label: 'Company SSO' } });
      expect(await unrelated.json()).toMatchObject({ label: 'Company SSO', trustEmailVerified: true });

      for (const [method, path, json] of [
        ['POST', '/auth/providers', { providerId: 'gitlab', type: 'arctic', clientId: 'c', config: { baseURL: 'https://gitlab.com' }, trustEmailVerified: 'yes' }],
        ['PATCH', '/auth/providers/gitea', { trustEmailVerified: 1 }],
      ] as const) {
        const res = await admin.fetch(path, { method, json });
        expect(res.status, method).toBe(400);
        const body = (await res.json()) as { error: { code: string; details: { path: string }[] } };
        expect(body.error.code).toBe('validation_failed');
        expect(body.error.details.map((d) => d.path)).toContain('trustEmailVerified');
      }
      expect(((await (await admin.fetch('/auth/providers')).json()) as { id: string }[]).map((p) => p.id)).not.toContain('gitlab');
    } finally {
      for (const [body] of cases) await admin.fetch(`/auth/providers/${String(body.providerId)}`, { method: 'DELETE' });
    }
  });

  it('documents saved before the field existed read with the default of their providerId', async () => {
    const docs = await t.instance.db.collection<Record<string, unknown> & { _id: string }>(PROVIDER_COLLECTION);
    const now = new Date().toISOString();
    const legacy = (providerId: string, config: Record<string, unknown>) => ({
      _id: randomUUID(),
      providerId,
      type: 'arctic',
      label: providerId,
      clientId: 'c',
      redirectUri: `${SVC_BASE}/api/auth/oauth/${providerId}/callback`,
      scopes: [],
      enabled: false,
      config,
      createdAt: now,
      updatedAt: now,
    });
    await docs.insertOne(legacy('authentik', { baseURL: 'https://auth.example.com' }));
    await docs.insertOne(legacy('keycloak', { realmURL: 'https://sso.example.com/realms/x' }));
    try {
      const list = (await (await admin.fetch('/auth/providers')).json()) as { id: string; trustEmailVerified: boolean }[];
      expect(list.find((p) => p.id === 'authentik')?.trustEmailVerified).toBe(false);
      expect(list.find((p) => p.id === 'keycloak')?.trustEmailVerified).toBe(true);
      const patched = await admin.fetch('/auth/providers/authentik', { method: 'PATCH', json: { enabled: true } });
      expect(await patched.json()).toMatchObject({ enabled: true, trustEmailVerified: false });
    } finally {
      for (const id of ['authentik', 'keycloak']) await admin.fetch(`/auth/providers/${id}`, { method: 'DELETE' });
    }
  });
});

describe('logins: an untrusted verified flag counts as unverified', () => {
  beforeAll(async () => {
    for (const id of ['authentik', 'synology', 'gitea'] as const) await createProvider({ providerId: id, type: 'arctic', config: { baseURL: servers[id].baseURL } });
  });
  afterAll(async () => {
    for (const id of ['authentik', 'synology', 'gitea']) await admin.fetch(`/auth/providers/${id}`, { method: 'DELETE' });
  });

  for (const id of ['authentik', 'synology'] as const) {
    it(`${id}: an account claiming an existing user's address ("email_verified": true) does not get into that account`, async () => {
      const owner = await t.createUser({ email: `${uniq('owner')}@example.com` });
      const before = servers[id].requests.length;
      const { b, location } = await login(id, { sub: uniq('intruder'), email: owner.email, email_verified: true, name: 'Not The Owner' }, servers[id]);
      expect(location).toBe('/?auth_error=account_exists');
      expect(b.sessionId).toBeUndefined();
      expect((await userById(owner.id)).oauthAccounts).toEqual([]);
      // The refusal came after a real code exchange and user-info call at the provider's own paths.
      expect(servers[id].requests.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual([`POST ${PATHS[id].token}`, `GET ${PATHS[id].userInfo}`]);
    });

    it(`${id}: a new user made from its "verified" email has email_verified false`, async () => {
      const sub = uniq('newcomer');
      const email = `${sub}@example.com`;
      const { b, location } = await login(id, { sub, email, email_verified: true, username: sub }, servers[id]);
      expect(location).toBe('/');
      const { user } = await sessionUser(b);
      expect(user).toMatchObject({ email, email_verified: false, oauthAccounts: [{ provider: id, providerAccountId: sub }] });
    });
  }

  it('authentik 2025.10 or later: with trustEmailVerified turned on, its verified email links the existing user', async () => {
    expect((await admin.fetch('/auth/providers/authentik', { method: 'PATCH', json: { trustEmailVerified: true } })).status).toBe(200);
    try {
      const owner = await t.createUser({ email: `${uniq('owner')}@example.com` });
      const sub = uniq('owner-at-authentik');
      const { b, location } = await login('authentik', { sub, email: owner.email, email_verified: true }, servers.authentik);
      expect(location).toBe('/');
      const session = await sessionUser(b);
      expect(session.userId).toBe(owner.id);
      expect(session.user.oauthAccounts).toEqual([{ provider: 'authentik', providerAccountId: sub }]);
      // And an address authentik itself marks unverified still is.
      const other = await t.createUser({ email: `${uniq('owner')}@example.com` });
      expect((await login('authentik', { sub: uniq('x'), email: other.email, email_verified: false }, servers.authentik)).location).toBe('/?auth_error=account_exists');
    } finally {
      await admin.fetch('/auth/providers/authentik', { method: 'PATCH', json: { trustEmailVerified: false } });
    }
  });

  it('an untrusted provider wins over config.trustEmailVerified', async () => {
    expect((await admin.fetch('/auth/providers/authentik', { method: 'PATCH', json: { config: { trustEmailVerified: true } } })).status).toBe(200);
    try {
      const owner = await t.createUser({ email: `${uniq('owner')}@example.com` });
      expect((await login('authentik', { sub: uniq('i'), email: owner.email, email_verified: true }, servers.authentik)).location).toBe('/?auth_error=account_exists');
      const sub = uniq('n');
      const fresh = await login('authentik', { sub, email: `${sub}@example.com` }, servers.authentik);
      expect((await sessionUser(fresh.b)).user.email_verified).toBe(false);
    } finally {
      await admin.fetch('/auth/providers/authentik', { method: 'PATCH', json: { config: { trustEmailVerified: false } } });
    }
  });

  it('gitea: its user info has no email_verified at all, so its emails are unverified (trusted provider)', async () => {
    const list = (await (await admin.fetch('/auth/providers')).json()) as { id: string; trustEmailVerified: boolean }[];
    expect(list.find((p) => p.id === 'gitea')?.trustEmailVerified).toBe(true);
    // Gitea's /login/oauth/userinfo: sub, name, preferred_username, email, picture, groups.
    const owner = await t.createUser({ email: `${uniq('owner')}@example.com` });
    const claims = (login: string, email: string) => ({ sub: String(Math.floor(Math.random() * 1e6)), name: login, preferred_username: login, email, picture: 'https://git.example.com/avatar/1', groups: null });
    const squat = await login('gitea', claims('squatter', owner.email), servers.gitea);
    expect(squat.location).toBe('/?auth_error=account_exists');
    expect((await userById(owner.id)).oauthAccounts).toEqual([]);

    const name = uniq('dev');
    const fresh = await login('gitea', claims(name, `${name}@example.com`), servers.gitea);
    expect(fresh.location).toBe('/');
    expect((await sessionUser(fresh.b)).user).toMatchObject({ email: `${name}@example.com`, email_verified: false });
  });
});

describe('Mastodon: the OAuth endpoints Mastodon really serves', () => {
  afterAll(() => admin.fetch('/auth/providers/mastodon', { method: 'DELETE' }));

  it('authorizes at /oauth/authorize, exchanges the code at /oauth/token, reads /api/v1/accounts/verify_credentials', async () => {
    const server = servers.mastodon;
    // A trailing slash on the instance URL must not double the slash of the paths.
    await createProvider({ providerId: 'mastodon', type: 'arctic', config: { baseURL: `${server.baseURL}/` } });
    const before = server.requests.length;
    // Mastodon's Account entity (GET /api/v1/accounts/verify_credentials); it has no email.
    const account = { id: '14715', username: 'trwnh', acct: 'trwnh', display_name: 'infinite love', avatar: 'https://files.example/avatars/14715.png', source: { privacy: 'public' } };
    const { authorizeUrl, location, b } = await login('mastodon', account, server);

    expect(`${authorizeUrl.origin}${authorizeUrl.pathname}`).toBe(`${server.baseURL}/oauth/authorize`);
    const q = authorizeUrl.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe('svc-client');
    expect(q.get('redirect_uri')).toBe(`${SVC_BASE}/api/auth/oauth/mastodon/callback`);
    expect(q.get('scope')).toBe('read:accounts');
    expect(q.get('code_challenge_method')).toBe('S256');

    // Mastodon gives no email: the login ends no_email, after a successful exchange and profile call.
    expect(location).toBe('/?auth_error=no_email');
    expect(b.sessionId).toBeUndefined();
    const calls = server.requests.slice(before);
    expect(calls.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /oauth/token', 'GET /api/v1/accounts/verify_credentials']);
    const [token, profile] = calls;
    expect(token!.authorization).toBe(`Basic ${Buffer.from(`svc-client:${CLIENT_SECRET}`).toString('base64')}`);
    expect(token!.form).toMatchObject({ grant_type: 'authorization_code', redirect_uri: `${SVC_BASE}/api/auth/oauth/mastodon/callback` });
    expect(createHash('sha256').update(token!.form!.code_verifier!).digest('base64url')).toBe(q.get('code_challenge'));
    expect(server.issued.has(profile!.authorization.replace(/^Bearer /, ''))).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Catalog fixes (OAuth issue item 1), each against a local server that serves only the provider's
// real paths; its fixed https hosts are routed there (test/support/route-hosts.ts).

/** `METHOD host path` of each request, the host being the one svc called. */
const calls = (server: FakeProvider, from: number) => server.requests.slice(from).map((r) => `${r.method} ${String(r.headers['x-routed-from-host'])}${r.path}`);
const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

describe('Etsy: every API request sends x-api-key "<keystring>:<shared secret>"', () => {
  const KEYSTRING = 'etsykeystring123';
  const USER = '12345678';
  let etsy: FakeProvider;
  let restore: () => void;
  beforeAll(async () => {
    // Etsy refuses an Open API v3 request whose x-api-key lacks the shared secret (Request Standards).
    etsy = await startFakeProvider(
      { token: '/v3/public/oauth/token', userInfo: ['/v3/application/users/me', `/v3/application/users/${USER}`] },
      { requireHeaders: { 'x-api-key': `${KEYSTRING}:${CLIENT_SECRET}` }, accessTokenPrefix: `${USER}.` },
    );
    scan.addTokenSet(etsy.issued);
    restore = routeHosts({ 'api.etsy.com': etsy.baseURL, 'openapi.etsy.com': etsy.baseURL });
  });
  afterAll(async () => {
    restore?.();
    await admin.fetch('/auth/providers/etsy', { method: 'DELETE' });
    await etsy?.close();
  });

  it('the profile calls send keystring and shared secret; the code exchange stays a public client with PKCE', async () => {
    await createProvider({ providerId: 'etsy', type: 'arctic', clientId: KEYSTRING });
    // Etsy's getUser (GET /v3/application/users/{user_id}) with email_r.
    etsy.setUserInfo({ user_id: Number(USER), primary_email: 'maker@example.com', first_name: 'Mae', last_name: 'Maker', image_url_75x75: 'https://i.etsystatic.com/u.jpg' }, `/v3/application/users/${USER}`);
    const before = etsy.requests.length;
    // Etsy's getMe (GET /v3/application/users/me).
    const { b, location, authorizeUrl } = await login('etsy', { user_id: Number(USER), shop_id: 4242 }, etsy);
    expect(location).toBe('/');
    expect((await sessionUser(b)).user).toMatchObject({ email: 'maker@example.com', email_verified: false, oauthAccounts: [{ provider: 'etsy', providerAccountId: USER }] });

    expect(calls(etsy, before)).toEqual(['POST api.etsy.com/v3/public/oauth/token', 'GET openapi.etsy.com/v3/application/users/me', `GET openapi.etsy.com/v3/application/users/${USER}`]);
    const [token, ...api] = etsy.requests.slice(before);
    // The exchange: a public client (no Authorization, no secret) proving PKCE.
    expect(token!.authorization).toBe('');
    expect(token!.form).toMatchObject({ grant_type: 'authorization_code', client_id: KEYSTRING, redirect_uri: `${SVC_BASE}/api/auth/oauth/etsy/callback` });
    expect(token!.form).not.toHaveProperty('client_secret');
    expect(s256(token!.form!.code_verifier!)).toBe(authorizeUrl.searchParams.get('code_challenge'));
    for (const r of api) expect(r.headers['x-api-key']).toBe(`${KEYSTRING}:${CLIENT_SECRET}`);

    // What the catalog sent before: the keystring alone, refused by Etsy (here, the stand-in).
    const alone = await fetch(`https://openapi.etsy.com/v3/application/users/me`, { headers: { 'x-api-key': KEYSTRING, authorization: api[0]!.authorization } });
    expect(alone.status).toBe(403);
  });

  it('the shared secret is required: POST without it and PATCH removing it are 400 naming clientSecret, nothing changes', async () => {
    await admin.fetch('/auth/providers/etsy', { method: 'DELETE' });
    for (const [method, path, json] of [
      ['POST', '/auth/providers', { providerId: 'etsy', type: 'arctic', clientId: KEYSTRING }],
      ['POST', '/auth/providers', { providerId: 'etsy', type: 'arctic', clientId: KEYSTRING, clientSecret: '' }],
    ] as const) {
      const res = await admin.fetch(path, { method, json });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: string; details: { path: string; message: string }[] } };
      expect(body.error.code).toBe('validation_failed');
      expect(body.error.details).toEqual([{ path: 'clientSecret', message: expect.stringContaining('shared secret') }]);
    }
    expect(((await (await admin.fetch('/auth/providers')).json()) as { id: string }[]).map((p) => p.id)).not.toContain('etsy');

    await createProvider({ providerId: 'etsy', type: 'arctic', clientId: KEYSTRING });
    const removal = await admin.fetch('/auth/providers/etsy', { method: 'PATCH', json: { clientSecret: '' } });
    expect(removal.status).toBe(400);
    expect(((await removal.json()) as { error: { details: { path: string }[] } }).error.details.map((d) => d.path)).toEqual(['clientSecret']);
    const list = (await (await admin.fetch('/auth/providers')).json()) as { id: string; hasClientSecret: boolean }[];
    expect(list.find((p) => p.id === 'etsy')?.hasClientSecret).toBe(true);
  });
});

describe('Intuit: config.environment picks the userinfo host of the sandbox or production', () => {
  let intuit: FakeProvider;
  let restore: () => void;
  beforeAll(async () => {
    intuit = await startFakeProvider({ token: '/oauth2/v1/tokens/bearer', userInfo: '/v1/openid_connect/userinfo' });
    scan.addTokenSet(intuit.issued);
    restore = routeHosts({
      'oauth.platform.intuit.com': intuit.baseURL,
      'accounts.platform.intuit.com': intuit.baseURL,
      'sandbox-accounts.platform.intuit.com': intuit.baseURL,
    });
  });
  afterAll(async () => {
    restore?.();
    await admin.fetch('/auth/providers/intuit', { method: 'DELETE' });
    await intuit?.close();
  });

  // Intuit's userinfo answer (camelCase claims).
  const claims = (sub: string) => ({ sub, email: `${sub}@example.com`, emailVerified: true, givenName: 'Quinn', familyName: 'Books' });

  it('sandbox: userinfo at sandbox-accounts.platform.intuit.com; production (the default): accounts.platform.intuit.com', async () => {
    const created = await createProvider({ providerId: 'intuit', type: 'arctic', config: { environment: 'sandbox' } });
    expect(created.config).toEqual({ environment: 'sandbox' });
    let before = intuit.requests.length;
    const sandbox = uniq('sandbox');
    const first = await login('intuit', claims(sandbox), intuit);
    expect(first.location).toBe('/');
    expect((await sessionUser(first.b)).user).toMatchObject({ email: `${sandbox}@example.com`, email_verified: true });
    expect(calls(intuit, before)).toEqual(['POST oauth.platform.intuit.com/oauth2/v1/tokens/bearer', 'GET sandbox-accounts.platform.intuit.com/v1/openid_connect/userinfo']);
    expect(intuit.requests[before]!.authorization).toBe(`Basic ${Buffer.from(`svc-client:${CLIENT_SECRET}`).toString('base64')}`);

    expect((await admin.fetch('/auth/providers/intuit', { method: 'PATCH', json: { config: { environment: 'production' } } })).status).toBe(200);
    before = intuit.requests.length;
    expect((await login('intuit', claims(uniq('prod')), intuit)).location).toBe('/');
    expect(calls(intuit, before)[1]).toBe('GET accounts.platform.intuit.com/v1/openid_connect/userinfo');

    await admin.fetch('/auth/providers/intuit', { method: 'DELETE' });
    await createProvider({ providerId: 'intuit', type: 'arctic' });
    before = intuit.requests.length;
    expect((await login('intuit', claims(uniq('default')), intuit)).location).toBe('/');
    expect(calls(intuit, before)[1]).toBe('GET accounts.platform.intuit.com/v1/openid_connect/userinfo');
  });

  it('config given as an array is 400 validation_failed naming config, not stored as {} (valibot lets an array pass an object check)', async () => {
    for (const [method, path, json] of [
      ['PATCH', '/auth/providers/intuit', { config: [] }],
      ['PATCH', '/auth/providers/intuit', { config: [{ environment: 'sandbox' }] }],
      ['POST', '/auth/providers', { providerId: 'github', type: 'arctic', clientId: 'x', clientSecret: 'y', config: [] }],
    ] as const) {
      const res = await admin.fetch(path, { method, json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      const body = (await res.json()) as { error: { code: string; details: { path: string; message: string }[] } };
      expect(body.error).toMatchObject({ code: 'validation_failed', details: [{ path: 'config', message: 'Invalid type: Expected Object but received Array' }] });
    }
  });

  it('another environment is 400 validation_failed naming config.environment', async () => {
    const res = await admin.fetch('/auth/providers/intuit', { method: 'PATCH', json: { config: { environment: 'staging' } } });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; details: { path: string }[] } };
    expect(body.error.code).toBe('validation_failed');
    expect(body.error.details.map((d) => d.path)).toContain('config.environment');
  });
});

describe("Coinbase: login.coinbase.com's OAuth2 endpoints with PKCE, not the previous www.coinbase.com/oauth ones", () => {
  let coinbase: FakeProvider;
  let restore: () => void;
  beforeAll(async () => {
    coinbase = await startFakeProvider({ token: '/oauth2/token', userInfo: '/v2/user' });
    scan.addTokenSet(coinbase.issued);
    restore = routeHosts({ 'login.coinbase.com': coinbase.baseURL, 'api.coinbase.com': coinbase.baseURL, 'www.coinbase.com': coinbase.baseURL });
  });
  afterAll(async () => {
    restore?.();
    await admin.fetch('/auth/providers/coinbase', { method: 'DELETE' });
    await coinbase?.close();
  });

  it('authorizes at /oauth2/auth with S256, exchanges at /oauth2/token with the secret in the body, reads /v2/user', async () => {
    await createProvider({ providerId: 'coinbase', type: 'arctic' });
    const before = coinbase.requests.length;
    // Coinbase's "Show current user" with wallet:user:read and wallet:user:email.
    const user = { id: '9da7a204-544e-5fd1-9a12-61176c5d4cd8', name: 'User One', username: 'user1', avatar_url: 'https://images.coinbase.com/avatar', email: 'user1@example.com', resource: 'user', resource_path: '/v2/user' };
    const { b, location, authorizeUrl } = await login('coinbase', { data: user }, coinbase);

    expect(`${authorizeUrl.origin}${authorizeUrl.pathname}`).toBe('https://login.coinbase.com/oauth2/auth');
    const q = authorizeUrl.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe('svc-client');
    expect(q.get('scope')).toBe('wallet:user:read wallet:user:email');
    expect(q.get('code_challenge_method')).toBe('S256');

    expect(location).toBe('/');
    expect((await sessionUser(b)).user).toMatchObject({ email: 'user1@example.com', oauthAccounts: [{ provider: 'coinbase', providerAccountId: user.id }] });
    expect(calls(coinbase, before)).toEqual(['POST login.coinbase.com/oauth2/token', 'GET api.coinbase.com/v2/user']);
    const token = coinbase.requests[before]!;
    expect(token.authorization).toBe('');
    expect(token.form).toMatchObject({ grant_type: 'authorization_code', client_id: 'svc-client', client_secret: CLIENT_SECRET, redirect_uri: `${SVC_BASE}/api/auth/oauth/coinbase/callback` });
    expect(s256(token.form!.code_verifier!)).toBe(q.get('code_challenge'));
  });
});

describe("Autodesk: the userinfo endpoint APS documents (api.aps.autodesk.com/userinfo)", () => {
  let aps: FakeProvider;
  let restore: () => void;
  beforeAll(async () => {
    aps = await startFakeProvider({ token: '/authentication/v2/token', userInfo: '/userinfo' });
    scan.addTokenSet(aps.issued);
    restore = routeHosts({ 'developer.api.autodesk.com': aps.baseURL, 'api.aps.autodesk.com': aps.baseURL, 'api.userprofile.autodesk.com': aps.baseURL });
  });
  afterAll(async () => {
    restore?.();
    await admin.fetch('/auth/providers/autodesk', { method: 'DELETE' });
    await aps?.close();
  });

  it('exchanges at developer.api.autodesk.com/authentication/v2/token, reads api.aps.autodesk.com/userinfo', async () => {
    await createProvider({ providerId: 'autodesk', type: 'arctic' });
    const before = aps.requests.length;
    // APS's OIDC userinfo example (standard claims).
    const claims = { sub: 'ABCDEFGH', name: 'John Doe', given_name: 'John', family_name: 'Doe', email: `${uniq('aps')}@example.com`, email_verified: true, picture: 'https://images.profile.autodesk.com/x120.jpg' };
    const { b, location } = await login('autodesk', claims, aps);
    expect(location).toBe('/');
    expect((await sessionUser(b)).user).toMatchObject({ email: claims.email, email_verified: true, oauthAccounts: [{ provider: 'autodesk', providerAccountId: 'ABCDEFGH' }] });
    expect(calls(aps, before)).toEqual(['POST developer.api.autodesk.com/authentication/v2/token', 'GET api.aps.autodesk.com/userinfo']);
  });
});

describe('VK ID: OAuth 2.1 at id.vk.ru with PKCE, the callback\'s device_id in the token request, POST /oauth2/user_info', () => {
  // A stand-in serving only VK ID's paths; it refuses a token request without device_id or a verifier
  // that matches the challenge, and a profile request without client_id and the access token.
  const requests: { path: string; form: Record<string, string> }[] = [];
  const challenges = new Map<string, string>();
  let vk: http.Server;
  let restore: () => void;
  const ACCESS = `vk-access-${randomUUID()}`;
  beforeAll(async () => {
    vk = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const form = Object.fromEntries(new URLSearchParams(body));
        requests.push({ path: req.url ?? '', form });
        const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
        if (req.method === 'POST' && req.url === '/oauth2/auth') {
          const challenge = challenges.get(form.code ?? '');
          if (!form.device_id || !challenge || s256(form.code_verifier ?? '') !== challenge || form.grant_type !== 'authorization_code' || form.client_id !== 'vk-app') {
            return json(400, { error: 'invalid_request' });
          }
          return json(200, { access_token: ACCESS, refresh_token: 'r', id_token: 'i', token_type: 'Bearer', expires_in: 3600, user_id: 1234567, state: form.state });
        }
        if (req.method === 'POST' && req.url === '/oauth2/user_info') {
          if (form.client_id !== 'vk-app' || form.access_token !== ACCESS) return json(401, { error: 'invalid_token' });
          return json(200, { user: { user_id: '1234567', first_name: 'Ivan', last_name: 'Petrov', avatar: 'https://sun.userapi.com/a.jpg', email: 'ivan@example.ru', verified: true } });
        }
        json(404, { error: 'not_found' });
      });
    });
    await new Promise<void>((r) => vk.listen(0, '127.0.0.1', () => r()));
    restore = routeHosts({ 'id.vk.ru': `http://127.0.0.1:${(vk.address() as AddressInfo).port}` });
    scan.addTokenSet(new Set([ACCESS]));
  });
  afterAll(async () => {
    restore?.();
    await admin.fetch('/auth/providers/vk', { method: 'DELETE' });
    await new Promise<void>((r) => vk.close(() => r()));
  });

  it('logs in: authorize at id.vk.ru with S256, the exchange sends device_id and the verifier, the profile comes from user_info', async () => {
    const created = await createProvider({ providerId: 'vk', type: 'arctic', clientId: 'vk-app' });
    expect(created).toMatchObject({ label: 'VK ID', scopes: ['vkid.personal_info', 'email'] });
    const b = browser();
    const { authorizeUrl } = await b.start('vk');
    expect(`${authorizeUrl!.origin}${authorizeUrl!.pathname}`).toBe('https://id.vk.ru/authorize');
    expect(authorizeUrl!.searchParams.get('code_challenge_method')).toBe('S256');
    const code = uniq('vk-code');
    challenges.set(code, authorizeUrl!.searchParams.get('code_challenge')!);
    const callback = new URL(`${SVC_BASE}/api/auth/oauth/vk/callback`);
    callback.search = new URLSearchParams({ code, state: authorizeUrl!.searchParams.get('state')!, device_id: 'device-42', type: 'code_v2' }).toString();
    const res = await b.callback(callback);
    expect(res.headers.get('location')).toBe('/');
    // VK's `verified` is about the account, not the email: unverified.
    expect((await sessionUser(b)).user).toMatchObject({ email: 'ivan@example.ru', email_verified: false, firstname: 'Ivan', lastname: 'Petrov', oauthAccounts: [{ provider: 'vk', providerAccountId: '1234567' }] });
    const token = requests.find((r) => r.path === '/oauth2/auth' && r.form.code === code)!;
    expect(token.form).toMatchObject({ device_id: 'device-42', client_id: 'vk-app', redirect_uri: `${SVC_BASE}/api/auth/oauth/vk/callback` });
  });

  it('a callback without device_id fails the exchange (token_exchange_failed), and no user is created', async () => {
    const b = browser();
    const { authorizeUrl } = await b.start('vk');
    const code = uniq('vk-code');
    challenges.set(code, authorizeUrl!.searchParams.get('code_challenge')!);
    const callback = new URL(`${SVC_BASE}/api/auth/oauth/vk/callback`);
    callback.search = new URLSearchParams({ code, state: authorizeUrl!.searchParams.get('state')! }).toString();
    expect((await b.callback(callback)).headers.get('location')).toBe('/?auth_error=token_exchange_failed');
    expect(b.sessionId).toBeUndefined();
  });
});

describe("Slack: openid.connect.userInfo is a Web API method: POST, and an error is HTTP 200 with ok: false", () => {
  let slack: FakeProvider;
  let restore: () => void;
  beforeAll(async () => {
    // Like docs.slack.dev ("Method Access: POST https://slack.com/api/openid.connect.userInfo"), the
    // stand-in answers the method on POST only.
    slack = await startFakeProvider({ token: '/api/openid.connect.token', userInfo: '/api/openid.connect.userInfo' }, { userInfoMethod: 'POST' });
    scan.addTokenSet(slack.issued);
    restore = routeHosts({ 'slack.com': slack.baseURL });
  });
  afterAll(async () => {
    restore?.();
    await admin.fetch('/auth/providers/slack', { method: 'DELETE' });
    await slack?.close();
  });

  it('POSTs the method with the Bearer token and maps its claims', async () => {
    await createProvider({ providerId: 'slack', type: 'arctic' });
    const before = slack.requests.length;
    const sub = uniq('U0R7JM');
    // Slack's documented answer (abridged).
    const info = { ok: true, sub, 'https://slack.com/user_id': sub, 'https://slack.com/team_id': 'T0R7GR', email: `${sub.toLowerCase()}@example.com`, email_verified: true, name: 'krane', given_name: 'Bront', family_name: 'Labradoodle', picture: 'https://secure.gravatar.com/x.png' };
    const { b, location } = await login('slack', info, slack);
    expect(location).toBe('/');
    expect((await sessionUser(b)).user).toMatchObject({ email: info.email, email_verified: true, oauthAccounts: [{ provider: 'slack', providerAccountId: sub }] });
    expect(calls(slack, before)).toEqual(['POST slack.com/api/openid.connect.token', 'POST slack.com/api/openid.connect.userInfo']);
    expect(slack.requests[before + 1]!.authorization).toMatch(/^Bearer \S+$/);
  });

  it('{"ok": false} (HTTP 200) is a failed user-info call, not a profile without an id', async () => {
    await admin.fetch('/auth/providers/slack', { method: 'DELETE' });
    await createProvider({ providerId: 'slack', type: 'arctic' });
    const { b, location } = await login('slack', { ok: false, error: 'invalid_auth' }, slack);
    expect(location).toBe('/?auth_error=userinfo_failed');
    expect(b.sessionId).toBeUndefined();
  });
});

describe('Yandex: the user-info call sends "Authorization: OAuth <token>", as Yandex ID documents', () => {
  let yandex: FakeProvider;
  let restore: () => void;
  beforeAll(async () => {
    // Like Yandex ID, the stand-in accepts only `Authorization: OAuth <token>` on /info.
    yandex = await startFakeProvider({ token: '/token', userInfo: '/info?format=json' }, { authScheme: 'OAuth' });
    scan.addTokenSet(yandex.issued);
    restore = routeHosts({ 'oauth.yandex.com': yandex.baseURL, 'login.yandex.ru': yandex.baseURL });
  });
  afterAll(async () => {
    restore?.();
    await admin.fetch('/auth/providers/yandex', { method: 'DELETE' });
    await yandex?.close();
  });

  it('reads login.yandex.ru/info with the OAuth scheme; default_email counts as unverified', async () => {
    await createProvider({ providerId: 'yandex', type: 'arctic' });
    const before = yandex.requests.length;
    // Yandex ID's documented answer (login:info, login:email, login:avatar).
    const info = { id: '1000034426', login: 'ivan', client_id: 'svc-client', display_name: 'Ivan', real_name: 'Ivan Ivanov', default_email: `${uniq('ya')}@yandex.ru`, default_avatar_id: '131652443', is_avatar_empty: false };
    const { b, location } = await login('yandex', info, yandex);
    expect(location).toBe('/');
    expect((await sessionUser(b)).user).toMatchObject({ email: info.default_email, email_verified: false, oauthAccounts: [{ provider: 'yandex', providerAccountId: '1000034426' }] });
    expect(calls(yandex, before)).toEqual(['POST oauth.yandex.com/token', 'GET login.yandex.ru/info?format=json']);
    expect(yandex.requests[before + 1]!.authorization).toMatch(/^OAuth \S+$/);
  });
});
