// Issue 3 end to end: svc's server-side OAuth login against a REAL OpenID provider (oidc-provider v8
// on 127.0.0.1), driven through its real login and consent pages. svc runs in-process; its code
// exchange and userinfo calls go to the IdP over real HTTP. Every svc response of the file goes
// through the leak scanner (client secrets, IdP tokens, session ids).

import * as arctic from 'arctic';
import { Secret, TOTP } from 'otpauth';
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { RedisStore } from '../../src/store/redis.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { LeakScanner } from '../support/leak-scanner.ts';
import { Browser, startIdp, type Idp } from '../support/oidc.ts';
import { SoftAuthenticator, type CreationOptions, type RequestOptions } from '../support/webauthn.ts';

const redisUrl = inject('redisUrl');

const SVC_BASE = 'http://localhost:3000';
const FRONTEND = 'http://localhost:5173';
const COOKIE = 'sid_app';
const ENV = { SVC_FRONTEND_URLS: `${FRONTEND},http://localhost:5174` };
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const SECRETS = {
  pkce: `pkce-secret-${randomUUID()}`,
  plain: `plain-secret-${randomUUID()}`,
  keycloak: `kc-secret-${randomUUID()}`,
};
/** Every providerId a test logs in with; each IdP client accepts all of their callback URLs. */
const PROVIDER_IDS = ['acme', 'keycloak', 'legacy-sso', 'jwt-wrong', 'acme-tokens', 'acme-broken', 'acme-dead', 'acme-off', 'acme-late', 'acme-gone', 'acme-b'];
const callbackUrl = (id: string) => `${SVC_BASE}/api/auth/oauth/${id}/callback`;

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const uniq = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let idp: Idp;

beforeAll(async () => {
  const redirectUris = PROVIDER_IDS.map(callbackUrl);
  idp = await startIdp({
    clients: [
      { clientId: 'svc-pkce', clientSecret: SECRETS.pkce, redirectUris, pkce: true },
      { clientId: 'svc-plain', clientSecret: SECRETS.plain, redirectUris, pkce: false },
      { clientId: 'svc-keycloak', clientSecret: SECRETS.keycloak, redirectUris, pkce: true },
    ],
  });
});
afterAll(() => idp?.close());

function acmeTemplate(overrides: Record<string, unknown> = {}) {
  return {
    id: 'acme',
    displayName: 'Acme SSO',
    authorizationEndpoint: idp.authorizationEndpoint,
    tokenEndpoint: idp.tokenEndpoint,
    userInfoEndpoint: idp.userInfoEndpoint,
    scopes: ['openid', 'email', 'profile'],
    pkce: true,
    ...overrides,
  };
}

const appConfig = (templates: Record<string, unknown>[] = [acmeTemplate()]) => ({ auth: { providers: { custom: templates } } });

/** Endpoints of a custom provider created without a template. */
const customConfig = (extra: Record<string, unknown> = {}) => ({
  authorizationEndpoint: idp.authorizationEndpoint,
  tokenEndpoint: idp.tokenEndpoint,
  userInfoEndpoint: idp.userInfoEndpoint,
  ...extra,
});

function newScanner(): LeakScanner {
  const scan = new LeakScanner(COOKIE, { tokenSets: [idp.issued.access, idp.issued.refresh, idp.issued.id] });
  for (const [kind, secret] of Object.entries(SECRETS)) scan.addSecret(secret, `client secret (${kind})`);
  return scan;
}

/** True when the response sets the session cookie to a value (not when it clears it). */
function setsSession(res: Response): boolean {
  return res.headers.getSetCookie().some((line) => line.startsWith(`${COOKIE}=`) && !line.startsWith(`${COOKIE}=;`) && !/max-age=0/i.test(line));
}

/** The exact failure redirect, and no session for the browser. */
async function expectAuthError(b: Browser, res: Response, code: string): Promise<void> {
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe(`/?auth_error=${code}`);
  expect(setsSession(res)).toBe(false);
  expect(b.sessionId).toBeUndefined();
  expect((await b.fetch('/auth/session')).status).toBe(401);
}

async function expectLoggedIn(b: Browser, res: Response, location = '/') {
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe(location);
  expect(setsSession(res)).toBe(true);
  const session = await b.fetch('/auth/session?expand=user');
  expect(session.status).toBe(200);
  return (await session.json()) as {
    userId: string;
    provider: string;
    isAdmin: boolean;
    user: { id: string; email: string; firstname: string; lastname: string; email_verified: boolean; oauthAccounts: { provider: string; providerAccountId: string }[]; lastLoginAt: string | null };
  };
}

/** Store keys `*:oauth_tokens:<sid>` in any store instance of the app. */
async function tokenBlobKeys(t: TestApp, sid: string): Promise<string[]> {
  const keys: string[] = [];
  for (const store of t.instance.stores.all()) {
    if (store instanceof RedisStore) {
      let cursor = '0';
      do {
        const [next, batch] = await store.client.scan(cursor, 'MATCH', `*:oauth_tokens:${sid}`, 'COUNT', 1000);
        cursor = next;
        keys.push(...batch);
      } while (cursor !== '0');
    } else {
      // The embedded store keeps its entries in a Map (private; read here only to list keys).
      const data = (store as unknown as { data: Map<string, unknown> }).data;
      keys.push(...[...data.keys()].filter((k) => k.includes(':oauth_tokens:') && k.endsWith(sid)));
    }
  }
  return keys;
}

interface Harness {
  t: TestApp;
  scan: LeakScanner;
  admin: Browser;
  browser(): Browser;
}

/** An app on the given store with a leak-scanned fetch and a logged-in admin browser. */
async function harness(opts: { redisUrl?: string; config?: Record<string, unknown>; env?: Record<string, string>; db?: EmbeddedDatabase }, scan = newScanner()): Promise<Harness> {
  const t = await createTestApp({ config: appConfig(), ...opts, env: { ...ENV, ...opts.env } });
  scan.watchLogins(t.instance, PROVIDER_IDS);
  const svc = scan.wrap(t.fetch);
  const browser = () => new Browser(svc, { svcBase: SVC_BASE, cookieName: COOKIE });
  const adminUser = await t.createUser({ admin: true });
  const admin = browser();
  expect((await admin.passwordLogin(adminUser.email, adminUser.password)).status).toBe(200);
  return { t, scan, admin, browser };
}

async function createProvider(admin: Browser, body: Record<string, unknown>) {
  const res = await admin.fetch('/auth/providers', { method: 'POST', json: body });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 201) throw new Error(`POST /auth/providers ${String(body.providerId)} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/** The state record key (CONTRACT section 5 keeps it in the store; svc names it by the state's hash). */
const stateKey = (t: TestApp, state: string) => `${t.keyPrefix}oauth-state:${sha256(state)}`;

// =============================================================================================
// The flow, on the embedded store and on real Redis.

for (const [storeName, url] of [
  ['embedded store', undefined],
  ['Redis', redisUrl || null],
] as const) {
  describe.skipIf(url === null)(`OAuth login against oidc-provider (${storeName})`, () => {
    let h: Harness;
    let acmeCreated: Record<string, unknown>;

    beforeAll(async () => {
      // Token blobs are sealed with the encryption key and capped by the session's hard lifetime (finding 7).
      const config = appConfig();
      h = await harness({
        redisUrl: url ?? undefined,
        config: { auth: { ...config.auth, session: { maxLifetime: 3600 } } },
        env: { SVC_SECRET_ENCRYPTION_KEY: `blob-key-${randomUUID()}` },
      });
      acmeCreated = await createProvider(h.admin, { providerId: 'acme', type: 'custom', clientId: 'svc-pkce', clientSecret: SECRETS.pkce });
      await createProvider(h.admin, {
        providerId: 'legacy-sso',
        type: 'custom',
        label: 'Legacy SSO',
        clientId: 'svc-plain',
        clientSecret: SECRETS.plain,
        scopes: ['openid', 'email', 'profile'],
        config: customConfig({ userInfoEndpoint: idp.jwtUserInfoEndpoint, pkce: false, userInfoAuthorizationScheme: 'JWT' }),
      });
      const pkceClient = { type: 'custom', clientId: 'svc-pkce', clientSecret: SECRETS.pkce, scopes: ['openid', 'email', 'profile'] };
      await createProvider(h.admin, {
        ...pkceClient,
        providerId: 'acme-tokens',
        config: customConfig({ persistProviderTokens: true, providerTokenNamespace: 'svc__todo' }),
      });
      await createProvider(h.admin, { ...pkceClient, providerId: 'acme-broken', config: customConfig({ userInfoEndpoint: idp.brokenUserInfoEndpoint }) });
      await createProvider(h.admin, { ...pkceClient, providerId: 'acme-dead', config: customConfig({ userInfoEndpoint: idp.deadUserInfoEndpoint }) });
      await createProvider(h.admin, { ...pkceClient, providerId: 'acme-off', enabled: false, config: customConfig() });
      await createProvider(h.admin, { ...pkceClient, providerId: 'acme-late', config: customConfig() });
      // A second provider for the same people: one identity per provider (account-linking attacks).
      await createProvider(h.admin, { ...pkceClient, providerId: 'acme-b', config: customConfig({ persistProviderTokens: true, providerTokenNamespace: 'svc__todo' }) });
      // Bearer (the default) sent to an endpoint that only accepts JWT: proves the proxy checks.
      await createProvider(h.admin, {
        providerId: 'jwt-wrong',
        type: 'custom',
        clientId: 'svc-plain',
        clientSecret: SECRETS.plain,
        scopes: ['openid', 'email'],
        config: customConfig({ userInfoEndpoint: idp.jwtUserInfoEndpoint, pkce: false }),
      });
    });
    afterEach(() => h?.scan.verify());
    afterAll(() => h?.t.close());

    // ---- (a) custom provider with PKCE ------------------------------------------------------

    describe('custom provider with PKCE (from a config template)', () => {
      it('was created from the template: defaults copied, secret write-only', () => {
        expect(acmeCreated).toMatchObject({
          id: 'acme',
          providerId: 'acme',
          type: 'custom',
          label: 'Acme SSO',
          clientId: 'svc-pkce',
          hasClientSecret: true,
          redirectUri: callbackUrl('acme'),
          scopes: ['openid', 'email', 'profile'],
          enabled: true,
          config: { authorizationEndpoint: idp.authorizationEndpoint, tokenEndpoint: idp.tokenEndpoint, userInfoEndpoint: idp.userInfoEndpoint, pkce: true },
        });
        expect(acmeCreated).not.toHaveProperty('clientSecret');
      });

      it('full login creates the user, starts a session and returns to the stored path', async () => {
        const login = uniq('ada');
        const email = `${login}@example.com`;
        idp.setAccount(login, { email, email_verified: true, name: 'Ada King Lovelace', picture: 'https://img.example/ada.png' });
        const b = h.browser();
        expect((await b.setReturnTo('/dashboard/reports?tab=2', FRONTEND)).status).toBe(204);
        expect(b.svcCookies.has('svc_oauth_return_to')).toBe(true);

        const { res: start, authorizeUrl } = await b.start('acme');
        expect(start.status).toBe(302);
        expect(authorizeUrl).not.toBeNull();
        const q = authorizeUrl!.searchParams;
        expect(`${authorizeUrl!.origin}${authorizeUrl!.pathname}`).toBe(idp.authorizationEndpoint);
        expect(q.get('response_type')).toBe('code');
        expect(q.get('client_id')).toBe('svc-pkce');
        expect(q.get('redirect_uri')).toBe(callbackUrl('acme'));
        expect(q.get('scope')).toBe('openid email profile');
        expect(q.get('state')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
        expect(q.get('code_challenge_method')).toBe('S256');
        expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
        const stateCookie = start.headers.getSetCookie().find((l) => l.startsWith('svc_oauth_state='));
        expect(stateCookie).toMatch(/HttpOnly/i);
        expect(start.headers.get('cache-control')).toBe('no-store');

        const before = idp.requests.length;
        const cb = await b.authorize(authorizeUrl!, { login });
        expect(cb.searchParams.get('code')).toBeTruthy();
        expect(cb.searchParams.get('state')).toBe(q.get('state'));
        const loginStarted = Date.now();
        const res = await b.callback(cb);
        const session = await expectLoggedIn(b, res, '/dashboard/reports?tab=2');
        const cookieLine = res.headers.getSetCookie().find((l) => l.startsWith(`${COOKIE}=`))!;
        expect(cookieLine).toMatch(/HttpOnly/i);
        expect(b.svcCookies.has('svc_oauth_state')).toBe(false);
        expect(b.svcCookies.has('svc_oauth_return_to')).toBe(false);

        expect(session).toMatchObject({ provider: 'acme', isAdmin: false });
        expect(session.user).toMatchObject({
          id: session.userId,
          email,
          firstname: 'Ada',
          lastname: 'King Lovelace',
          email_verified: true,
          oauthAccounts: [{ provider: 'acme', providerAccountId: login }],
        });
        expect(session.user.lastLoginAt).toMatch(ISO);
        expect(Date.parse(session.user.lastLoginAt!)).toBeGreaterThanOrEqual(loginStarted - 1000);

        // Server side, over real HTTP: one code exchange (client authenticated), one userinfo call.
        const calls = idp.requests.slice(before).filter((r) => r.method !== 'GET' || r.path !== '/protocol/openid-connect/auth');
        expect(calls.filter((r) => r.path === '/protocol/openid-connect/token')).toEqual([{ method: 'POST', path: '/protocol/openid-connect/token', scheme: 'Basic' }]);
        expect(calls.filter((r) => r.path === '/protocol/openid-connect/userinfo')).toEqual([{ method: 'GET', path: '/protocol/openid-connect/userinfo', scheme: 'Bearer' }]);
      });

      it('email_verified of a new user mirrors the IdP; the next login finds the same user', async () => {
        const login = uniq('grace');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: false, name: 'Grace Hopper' });
        const b = h.browser();
        const first = await expectLoggedIn(b, await b.login('acme', { login }));
        expect(first.user).toMatchObject({ email_verified: false, firstname: 'Grace', lastname: 'Hopper', oauthAccounts: [{ provider: 'acme', providerAccountId: login }] });

        const again = h.browser();
        const second = await expectLoggedIn(again, await again.login('acme', { login }));
        expect(second.userId).toBe(first.userId);
        expect(second.user.oauthAccounts).toHaveLength(1);
        expect(Date.parse(second.user.lastLoginAt!)).toBeGreaterThanOrEqual(Date.parse(first.user.lastLoginAt!));
        expect(again.sessionId).not.toBe(b.sessionId);
      });

      it('without a stored return path the login ends at /', async () => {
        const login = uniq('plain');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectLoggedIn(b, await b.login('acme', { login }), '/');
      });

      it('an OAuth login replaces the session the browser already had', async () => {
        const other = await h.t.createUser();
        const b = h.browser();
        expect((await b.passwordLogin(other.email, other.password)).status).toBe(200);
        const before = b.sessionId!;
        const login = uniq('switch');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const session = await expectLoggedIn(b, await b.login('acme', { login }));
        expect(session.userId).not.toBe(other.id);
        expect(b.sessionId).not.toBe(before);
        const stale = h.browser();
        stale.svcCookies.set(COOKIE, before);
        expect((await stale.fetch('/auth/session')).status).toBe(401);
      });

      it('template defaults apply at creation only: saved values win after the template changes', async () => {
        const db = EmbeddedDatabase.inMemory();
        const first = await harness({ redisUrl: url ?? undefined, db }, h.scan);
        let second: Harness | undefined;
        try {
          const created = await createProvider(first.admin, { providerId: 'acme', type: 'custom', clientId: 'svc-pkce', clientSecret: SECRETS.pkce });
          expect(created).toMatchObject({ label: 'Acme SSO', scopes: ['openid', 'email', 'profile'], config: { pkce: true } });
          const patched = await first.admin.fetch('/auth/providers/acme', { method: 'PATCH', json: { scopes: ['openid', 'email'] } });
          expect(patched.status).toBe(200);
          expect(await patched.json()).toMatchObject({ scopes: ['openid', 'email'], label: 'Acme SSO' });

          // The app restarts with a changed template (same database): other endpoints, scopes, label, no PKCE.
          second = await harness(
            {
              redisUrl: url ?? undefined,
              db,
              config: appConfig([
                acmeTemplate({ displayName: 'Renamed', scopes: ['openid', 'profile'], pkce: false, authorizationEndpoint: 'http://127.0.0.1:9/auth', tokenEndpoint: 'http://127.0.0.1:9/token', userInfoEndpoint: 'http://127.0.0.1:9/me' }),
              ]),
            },
            h.scan,
          );
          const list = (await (await second.admin.fetch('/auth/providers')).json()) as Record<string, unknown>[];
          expect(list.find((p) => p.id === 'acme')).toMatchObject({
            label: 'Acme SSO',
            scopes: ['openid', 'email'],
            config: { authorizationEndpoint: idp.authorizationEndpoint, tokenEndpoint: idp.tokenEndpoint, userInfoEndpoint: idp.userInfoEndpoint, pkce: true },
          });

          const login = uniq('tmpl');
          idp.setAccount(login, { email: `${login}@example.com`, email_verified: true, name: 'Tem Plate' });
          const b = second.browser();
          const { authorizeUrl } = await b.start('acme');
          expect(`${authorizeUrl!.origin}${authorizeUrl!.pathname}`).toBe(idp.authorizationEndpoint);
          expect(authorizeUrl!.searchParams.get('scope')).toBe('openid email');
          expect(authorizeUrl!.searchParams.get('code_challenge_method')).toBe('S256');
          const session = await expectLoggedIn(b, await b.callback(await b.authorize(authorizeUrl!, { login })));
          expect(session.provider).toBe('acme');
          // Without the profile scope the IdP releases no name.
          expect(session.user).toMatchObject({ firstname: '', lastname: '' });
        } finally {
          await second?.t.close();
          await first.t.close();
        }
      });
    });

    // ---- (b) a built-in provider: arctic's KeyCloak class against the same IdP ---------------

    it("built-in provider: arctic's KeyCloak class logs in against the IdP's realm", async () => {
      const created = await createProvider(h.admin, {
        providerId: 'keycloak',
        type: 'arctic',
        clientId: 'svc-keycloak',
        clientSecret: SECRETS.keycloak,
        config: { realmURL: idp.issuer },
      });
      expect(created).toMatchObject({ id: 'keycloak', type: 'arctic', hasClientSecret: true, redirectUri: callbackUrl('keycloak'), config: { realmURL: idp.issuer } });
      expect(created).not.toHaveProperty('clientSecret');
      expect(typeof created.label).toBe('string');

      const login = uniq('kc');
      idp.setAccount(login, { email: `${login}@example.com`, email_verified: true, name: 'Key Cloak User', picture: 'https://img.example/kc.png' });
      const b = h.browser();
      const { authorizeUrl } = await b.start('keycloak');
      expect(authorizeUrl).not.toBeNull();
      expect(`${authorizeUrl!.origin}${authorizeUrl!.pathname}`).toBe(`${idp.issuer}/protocol/openid-connect/auth`);
      expect(authorizeUrl!.searchParams.get('client_id')).toBe('svc-keycloak');
      expect(authorizeUrl!.searchParams.get('redirect_uri')).toBe(callbackUrl('keycloak'));
      expect(authorizeUrl!.searchParams.get('code_challenge_method')).toBe('S256');
      expect(authorizeUrl!.searchParams.get('scope')?.split(' ')).toContain('openid');

      const before = idp.requests.length;
      const session = await expectLoggedIn(b, await b.callback(await b.authorize(authorizeUrl!, { login })));
      expect(session.provider).toBe('keycloak');
      expect(session.user).toMatchObject({
        email: `${login}@example.com`,
        email_verified: true,
        firstname: 'Key',
        lastname: 'Cloak User',
        oauthAccounts: [{ provider: 'keycloak', providerAccountId: login }],
      });
      expect(idp.requests.slice(before).filter((r) => r.path === '/protocol/openid-connect/token')).toEqual([
        { method: 'POST', path: '/protocol/openid-connect/token', scheme: 'Basic' },
      ]);
      const ctx = h.scan.loginContexts.at(-1)!;
      expect(ctx).toMatchObject({ providerId: 'keycloak', userId: session.userId });
      expect(idp.issued.access.has(ctx.accessToken)).toBe(true);

      // A PATCH names only the config keys that change; a realmURL with a trailing slash still works.
      const merged = await h.admin.fetch('/auth/providers/keycloak', { method: 'PATCH', json: { config: { trustEmailVerified: true } } });
      expect(merged.status).toBe(200);
      expect((await merged.json()).config).toEqual({ realmURL: idp.issuer, trustEmailVerified: true });
      const slashed = await h.admin.fetch('/auth/providers/keycloak', { method: 'PATCH', json: { config: { realmURL: `${idp.issuer}/` } } });
      expect((await slashed.json()).config).toEqual({ realmURL: `${idp.issuer}/`, trustEmailVerified: true });
      const again = h.browser();
      const second = await again.start('keycloak');
      expect(`${second.authorizeUrl!.origin}${second.authorizeUrl!.pathname}`).toBe(`${idp.issuer}/protocol/openid-connect/auth`);
      const relogged = await expectLoggedIn(again, await again.callback(await again.authorize(second.authorizeUrl!, { login })));
      expect(relogged.userId).toBe(session.userId);
    });

    // ---- (c) custom provider without PKCE, JWT userinfo scheme ------------------------------

    describe('custom provider without PKCE, userinfo with the JWT scheme', () => {
      it('sends no code_challenge and calls userinfo with "Authorization: JWT <token>"', async () => {
        const login = uniq('jwt');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true, name: 'Jay Doubleyou Tee' });
        const b = h.browser();
        const { authorizeUrl } = await b.start('legacy-sso');
        expect(authorizeUrl!.searchParams.get('client_id')).toBe('svc-plain');
        expect(authorizeUrl!.searchParams.has('code_challenge')).toBe(false);
        expect(authorizeUrl!.searchParams.has('code_challenge_method')).toBe(false);
        expect(authorizeUrl!.searchParams.get('scope')).toBe('openid email profile');

        const proxyBefore = idp.jwtProxyCalls.length;
        const session = await expectLoggedIn(b, await b.callback(await b.authorize(authorizeUrl!, { login })));
        expect(session.provider).toBe('legacy-sso');
        expect(session.user).toMatchObject({ firstname: 'Jay', lastname: 'Doubleyou Tee', oauthAccounts: [{ provider: 'legacy-sso', providerAccountId: login }] });

        const calls = idp.jwtProxyCalls.slice(proxyBefore);
        expect(calls).toHaveLength(1);
        expect(calls[0]!.accepted).toBe(true);
        const token = calls[0]!.authorization.slice('JWT '.length);
        expect(idp.issued.access.has(token)).toBe(true);
      });

      it('the JWT-only endpoint refuses the Bearer scheme: userinfo_failed', async () => {
        const login = uniq('bearer');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const proxyBefore = idp.jwtProxyCalls.length;
        const b = h.browser();
        await expectAuthError(b, await b.login('jwt-wrong', { login }), 'userinfo_failed');
        expect(idp.jwtProxyCalls.slice(proxyBefore)).toEqual([{ authorization: expect.stringMatching(/^Bearer \S+$/), accepted: false }]);
      });
    });

    // ---- (d) attacks and failures -------------------------------------------------------------

    describe('attacks and failures', () => {
      /** A browser that has been to the IdP and holds a fresh callback URL (not yet delivered). */
      async function pendingCallback(providerId = 'acme', claims?: Record<string, unknown>) {
        const login = uniq('victim');
        idp.setAccount(login, claims ?? { email: `${login}@example.com`, email_verified: true, name: 'Vic Tim' });
        const b = h.browser();
        const { authorizeUrl } = await b.start(providerId);
        const state = authorizeUrl!.searchParams.get('state')!;
        return { b, login, state, authorizeUrl: authorizeUrl!, cb: await b.authorize(authorizeUrl!, { login }) };
      }

      it('a replayed callback (same state and code, same cookies) is refused: invalid_state', async () => {
        const { b, cb, state } = await pendingCallback();
        const cookies = `svc_oauth_state=${state}`;
        const tokenCalls = () => idp.requests.filter((r) => r.path === '/protocol/openid-connect/token').length;
        await expectLoggedIn(b, await b.callback(cb, { headers: { cookie: cookies } }));
        const exchanged = tokenCalls();
        const replayer = h.browser();
        await expectAuthError(replayer, await replayer.callback(cb, { headers: { cookie: cookies } }), 'invalid_state');
        expect(tokenCalls()).toBe(exchanged); // the code never reached the IdP again
      });

      it('an expired state is refused: invalid_state', async () => {
        const { b, cb, state } = await pendingCallback();
        const store = h.t.instance.stores.forRole('oauthState');
        const key = stateKey(h.t, state);
        const ttl = await store.ttl(key);
        expect(ttl).toBeGreaterThan(590);
        expect(ttl).toBeLessThanOrEqual(600);
        // The store's own expiry, shortened from 600 s to 1 s instead of waiting ten minutes.
        expect(await store.expire(key, 1)).toBe(true);
        await sleep(1100);
        expect(await store.get(key)).toBeNull();
        await expectAuthError(b, await b.callback(cb), 'invalid_state');
      });

      it('a callback without the state cookie (another browser) is refused: invalid_state', async () => {
        const { cb } = await pendingCallback();
        const attacker = h.browser();
        await expectAuthError(attacker, await attacker.callback(cb), 'invalid_state');
      });

      it("a callback carrying another browser's state cookie is refused: invalid_state", async () => {
        const victim = await pendingCallback();
        const attacker = h.browser();
        const own = await attacker.start('acme');
        expect(own.authorizeUrl).not.toBeNull();
        expect(attacker.svcCookies.get('svc_oauth_state')).toBeTruthy();
        expect(attacker.svcCookies.get('svc_oauth_state')).not.toBe(victim.state);
        await expectAuthError(attacker, await attacker.callback(victim.cb), 'invalid_state');
      });

      it("a state delivered to another provider's callback is refused: invalid_state", async () => {
        const { b, cb } = await pendingCallback('acme');
        const elsewhere = new URL(cb);
        elsewhere.pathname = elsewhere.pathname.replace('/acme/', '/acme-late/');
        await expectAuthError(b, await b.callback(elsewhere), 'invalid_state');
      });

      it('two concurrent callbacks with one state: exactly one session', async () => {
        const { b, cb, login } = await pendingCallback();
        const [r1, r2] = await Promise.all([b.callback(cb), b.callback(cb)]);
        const results = [r1, r2].map((r) => ({ location: r.headers.get('location'), session: setsSession(r) }));
        expect(results.filter((r) => r.session)).toHaveLength(1);
        expect(results.map((r) => r.location).sort()).toEqual(['/', '/?auth_error=invalid_state']);
        const session = (await (await b.fetch('/auth/session?expand=user')).json()) as { userId: string; user: { oauthAccounts: unknown[] } };
        expect(session.user.oauthAccounts).toEqual([{ provider: 'acme', providerAccountId: login }]);
        const sessions = await h.t.instance.stores.forRole('sessions').sMembers(`${h.t.keyPrefix}user-sessions:${session.userId}`);
        expect(sessions).toHaveLength(1);
      });

      it('a wrong PKCE code verifier makes the IdP refuse the code: token_exchange_failed', async () => {
        const login = uniq('pkce');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        const { authorizeUrl } = await b.start('acme');
        const store = h.t.instance.stores.forRole('oauthState');
        const key = stateKey(h.t, authorizeUrl!.searchParams.get('state')!);
        const record = JSON.parse((await store.get(key))!) as { codeVerifier: string };
        expect(record.codeVerifier).toMatch(/^[A-Za-z0-9_-]{43,128}$/);
        await store.set(key, JSON.stringify({ ...record, codeVerifier: arctic.generateCodeVerifier() }), { ttl: 600 });
        await expectAuthError(b, await b.callback(await b.authorize(authorizeUrl!, { login })), 'token_exchange_failed');
      });

      it('the user aborts at the IdP (error=access_denied): access_denied', async () => {
        const login = uniq('abort');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        const { authorizeUrl } = await b.start('acme');
        const cb = await b.authorize(authorizeUrl!, { login, abort: true });
        expect(cb.searchParams.get('error')).toBe('access_denied');
        expect(cb.searchParams.has('code')).toBe(false);
        await expectAuthError(b, await b.callback(cb), 'access_denied');
      });

      it('userinfo answering 500: userinfo_failed', async () => {
        const login = uniq('ui500');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme-broken', { login }), 'userinfo_failed');
      });

      it('userinfo endpoint down (connection refused): userinfo_failed', async () => {
        const login = uniq('uidown');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme-dead', { login }), 'userinfo_failed');
      });

      it('an account without an email claim: no_email', async () => {
        const login = uniq('noemail');
        idp.setAccount(login, { name: 'No Mail', email_verified: true });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme', { login }), 'no_email');
      });

      it('unverified email of an existing user: account_exists, pending link, confirmed by the owner', async () => {
        const owner = await h.t.createUser({ email: `${uniq('owner')}@example.com` });
        const login = uniq('squat');
        idp.setAccount(login, { email: owner.email, email_verified: false, name: 'Not The Owner' });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme', { login }), 'account_exists');
        const ownerDoc = (await (await h.admin.fetch(`/auth/users/${owner.id}`)).json()) as { oauthAccounts: unknown[] };
        expect(ownerDoc.oauthAccounts).toEqual([]);

        // The pending link is bound to this browser (cookie) and keyed by that binding, not by the user.
        const binding = b.svcCookies.get('svc_pending_link')!;
        expect(binding).toMatch(/^[A-Za-z0-9_-]{43}$/);
        const pendingTtl = await h.t.instance.stores.forRole('sessions').ttl(`${h.t.keyPrefix}pending-link:${sha256(binding)}`);
        expect(pendingTtl).toBeGreaterThan(890);
        expect(pendingTtl).toBeLessThanOrEqual(900);

        // The owner logs in in the browser that ran the flow.
        const ob = b;
        expect((await ob.passwordLogin(owner.email, owner.password)).status).toBe(200);
        const pending = await ob.fetch('/auth/link/confirm');
        expect(pending.status).toBe(200);
        const body = (await pending.json()) as { provider: string; email: string; expiresAt: string };
        expect(body).toEqual({ provider: 'acme', email: owner.email, expiresAt: expect.stringMatching(ISO), providerAccountId: login, name: 'Not The Owner' });
        const left = Date.parse(body.expiresAt) - Date.now();
        expect(left).toBeGreaterThan(850_000);
        expect(left).toBeLessThanOrEqual(900_000);

        const confirmed = await ob.fetch('/auth/link/confirm', { method: 'POST', headers: { origin: FRONTEND } });
        expect(confirmed.status).toBe(200);
        expect(await confirmed.json()).toEqual({ linked: { provider: 'acme', providerAccountId: login } });
        const gone = await ob.fetch('/auth/link/confirm');
        expect(gone.status).toBe(404);
        expect(await gone.json()).toMatchObject({ error: { code: 'no_pending_link' } });

        const next = h.browser();
        const session = await expectLoggedIn(next, await next.login('acme', { login }));
        expect(session).toMatchObject({ userId: owner.id, provider: 'acme' });
        expect(session.user.oauthAccounts).toEqual([{ provider: 'acme', providerAccountId: login }]);
      });

      it('unverified email of an existing user: the owner declines the pending link', async () => {
        const owner = await h.t.createUser({ email: `${uniq('owner')}@example.com` });
        const login = uniq('squat');
        idp.setAccount(login, { email: owner.email, email_verified: false });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme', { login }), 'account_exists');

        const ob = b;
        expect((await ob.passwordLogin(owner.email, owner.password)).status).toBe(200);
        expect((await ob.fetch('/auth/link/confirm')).status).toBe(200);
        const declined = await ob.fetch('/auth/link/confirm', { method: 'DELETE', headers: { origin: FRONTEND } });
        expect(declined.status).toBe(204);
        expect((await ob.fetch('/auth/link/confirm')).status).toBe(404);
        expect((await ob.fetch('/auth/link/confirm', { method: 'POST' })).status).toBe(404);

        const again = h.browser();
        await expectAuthError(again, await again.login('acme', { login }), 'account_exists');
        const ownerDoc = (await (await h.admin.fetch(`/auth/users/${owner.id}`)).json()) as { oauthAccounts: unknown[] };
        expect(ownerDoc.oauthAccounts).toEqual([]);
      });

      it('verified email of an existing user links the account automatically', async () => {
        const owner = await h.t.createUser({ email: `${uniq('owner')}@example.com` });
        const login = uniq('verified');
        idp.setAccount(login, { email: owner.email, email_verified: true, name: 'Real Owner' });
        const b = h.browser();
        const session = await expectLoggedIn(b, await b.login('acme', { login }));
        expect(session).toMatchObject({ userId: owner.id, provider: 'acme' });
        expect(session.user.oauthAccounts).toEqual([{ provider: 'acme', providerAccountId: login }]);
        const ob = h.browser();
        expect((await ob.passwordLogin(owner.email, owner.password)).status).toBe(200);
        expect((await ob.fetch('/auth/link/confirm')).status).toBe(404);
      });

      it('open-redirect return paths end at /', async () => {
        const hostile = ['//x', '/\\x', 'https://evil.example', 'javascript:alert(1)', '/%2F%2Fevil', '/%5Cevil', '/%252F%252Fevil', '/\tevil', '/foo\nbar', '/\u0000x', '/%09/evil.example', '/\u007f//evil'];
        for (const returnTo of hostile) {
          const login = uniq('redir');
          idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
          const b = h.browser();
          expect((await b.setReturnTo(returnTo, FRONTEND)).status, JSON.stringify(returnTo)).toBe(204);
          const res = await b.login('acme', { login });
          expect(res.headers.get('location'), JSON.stringify(returnTo)).toBe('/');
          expect(setsSession(res)).toBe(true);
        }
      });

      it('the return-to POST needs the CSRF header, a listed Origin and a Referer of /login: else 403 csrf_failed', async () => {
        const b = h.browser();
        const csrf = await b.fetch('/auth/oauth/return-to/csrf');
        expect(csrf.status).toBe(200);
        const { csrfToken } = (await csrf.json()) as { csrfToken: string };
        expect(b.svcCookies.get('svc_oauth_rt_csrf')).toBe(csrfToken);
        const good = { origin: FRONTEND, referer: `${FRONTEND}/login`, 'x-svc-oauth-return-to-csrf': csrfToken };
        const post = (headers: Record<string, string>, browser = b) => browser.fetch('/auth/oauth/return-to', { method: 'POST', headers, json: { returnTo: '/x' } });
        const expect403 = async (res: Response, what: string) => {
          expect(res.status, what).toBe(403);
          expect(await res.json(), what).toMatchObject({ error: { code: 'csrf_failed' } });
          expect(res.headers.getSetCookie().some((l) => l.startsWith('svc_oauth_return_to=')), what).toBe(false);
        };
        const { 'x-svc-oauth-return-to-csrf': _h, ...noHeader } = good;
        await expect403(await post(noHeader), 'no CSRF header');
        await expect403(await post({ ...good, 'x-svc-oauth-return-to-csrf': `${csrfToken}x` }), 'wrong CSRF header');
        await expect403(await post({ ...good, origin: 'https://evil.example' }), 'wrong Origin');
        await expect403(await post({ ...good, referer: `${FRONTEND}/settings` }), 'wrong Referer path');
        await expect403(await post({ ...good, referer: 'https://evil.example/login' }), 'Referer of another origin');
        await expect403(await post(good, h.browser()), 'token without its cookie (another browser)');
        await expect403(await post({ ...good, referer: `${FRONTEND}/admin/x` }), 'a path under the console is no login page');
        expect((await post(good)).status).toBe(204);
        // The admin console is a login page too (docs/console.md), at /admin or /api/admin.
        for (const page of ['/admin', '/api/admin']) expect((await post({ ...good, referer: `${FRONTEND}${page}` })).status, page).toBe(204);
      });

      it('unknown or disabled provider: provider_not_found, at the start and at the callback (with or without a state)', async () => {
        for (const id of ['nope', 'acme-off', 'NOT_AN_ID']) {
          const b = h.browser();
          const { res, authorizeUrl } = await b.start(id);
          expect(authorizeUrl, id).toBeNull();
          await expectAuthError(b, res, 'provider_not_found');
          for (const query of ['', '?code=c&state=junk', '?error=access_denied']) {
            await expectAuthError(b, await b.callback(new URL(`${callbackUrl(id)}${query}`)), 'provider_not_found');
          }
        }
        // A real state of another provider, delivered to an unknown one, is used up all the same.
        const { b, cb } = await pendingCallback('acme');
        const elsewhere = new URL(cb);
        elsewhere.pathname = elsewhere.pathname.replace('/acme/', '/nope/');
        await expectAuthError(b, await b.callback(elsewhere), 'provider_not_found');
        await expectAuthError(b, await b.callback(cb), 'invalid_state');
      });

      it('a provider disabled between start and callback: provider_not_found', async () => {
        const { b, cb } = await pendingCallback('acme-late');
        expect((await h.admin.fetch('/auth/providers/acme-late', { method: 'PATCH', json: { enabled: false } })).status).toBe(200);
        try {
          await expectAuthError(b, await b.callback(cb), 'provider_not_found');
        } finally {
          await h.admin.fetch('/auth/providers/acme-late', { method: 'PATCH', json: { enabled: true } });
        }
      });
    });

    // ---- security review (issue 24): each test reproduces a finding ---------------------------

    describe('security review findings', () => {
      const pendingOf = async (b: Browser) => {
        const res = await b.fetch('/auth/link/confirm');
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      };

      it('finding 1: an unverified OAuth email never shares an account with its verified owner (pre-account takeover)', async () => {
        const email = `${uniq('dave')}@example.com`;
        const attacker = uniq('attacker');
        idp.setAccount(attacker, { email, email_verified: false, name: 'Not Dave' });
        const a = h.browser();
        const squatted = await expectLoggedIn(a, await a.login('acme', { login: attacker }));
        expect(squatted.user.email_verified).toBe(false);

        // Dave arrives with a VERIFIED email on another provider: the account becomes his alone.
        const dave = uniq('dave');
        idp.setAccount(dave, { email, email_verified: true, name: 'Dave Real' });
        const d = h.browser();
        const owner = await expectLoggedIn(d, await d.login('acme-b', { login: dave }));
        expect(owner.user.email).toBe(email);
        expect(owner.user.email_verified).toBe(true);
        expect(owner.user.oauthAccounts).toEqual([{ provider: 'acme-b', providerAccountId: dave }]);
        // The unverified holder's session ended with the claim ...
        expect((await a.fetch('/auth/session')).status).toBe(401);
        // ... and the unverified identity no longer logs into Dave's account.
        const again = h.browser();
        await expectAuthError(again, await again.login('acme', { login: attacker }), 'account_exists');
        const users = (await (await h.admin.fetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { items: { oauthAccounts: unknown[] }[] };
        expect(users.items).toHaveLength(1);
        expect(users.items[0]!.oauthAccounts).toEqual([{ provider: 'acme-b', providerAccountId: dave }]);
      });

      it('finding 1: a user made by an admin counts as verified: a verified identity links, an unverified one does not', async () => {
        const created = await h.admin.fetch('/auth/users', { method: 'POST', json: { email: `${uniq('made')}@example.com`, password: 'a long password' } });
        const made = (await created.json()) as { id: string; email: string };
        const verified = uniq('v');
        idp.setAccount(verified, { email: made.email, email_verified: true });
        const b = h.browser();
        expect((await expectLoggedIn(b, await b.login('acme', { login: verified }))).userId).toBe(made.id);
        const unverified = uniq('u');
        idp.setAccount(unverified, { email: made.email, email_verified: false });
        const c = h.browser();
        await expectAuthError(c, await c.login('acme-b', { login: unverified }), 'account_exists');
      });

      it('finding 2: a planted pending link is invisible to the victim in another browser and cannot be confirmed', async () => {
        const owner = await h.t.createUser({ email: `${uniq('victim')}@example.com` });
        const attacker = uniq('planter');
        idp.setAccount(attacker, { email: owner.email, email_verified: false, name: 'Evil Twin' });
        const a = h.browser();
        await expectAuthError(a, await a.login('acme', { login: attacker }), 'account_exists');

        const victim = h.browser();
        expect((await victim.passwordLogin(owner.email, owner.password)).status).toBe(200);
        expect(await pendingOf(victim)).toMatchObject({ status: 404, body: { error: { code: 'no_pending_link' } } });
        const confirm = await victim.fetch('/auth/link/confirm', { method: 'POST', headers: { origin: FRONTEND } });
        expect(confirm.status).toBe(404);
        // The attacker's browser holds the binding cookie but no session of the owner: nothing to see.
        expect((await a.fetch('/auth/link/confirm')).status).toBe(401);
        const later = h.browser();
        await expectAuthError(later, await later.login('acme', { login: attacker }), 'account_exists');
        const doc = (await (await h.admin.fetch(`/auth/users/${owner.id}`)).json()) as { oauthAccounts: unknown[] };
        expect(doc.oauthAccounts).toEqual([]);
      });

      it("finding 2: one flow cannot overwrite another's pending link; the owner sees who the identity is", async () => {
        const owner = await h.t.createUser({ email: `${uniq('own')}@example.com` });
        const mine = uniq('mine');
        idp.setAccount(mine, { email: owner.email, email_verified: false, name: 'Own Er' });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme', { login: mine }), 'account_exists');
        // Someone else's flow for the same account, later, from another browser.
        const other = uniq('other');
        idp.setAccount(other, { email: owner.email, email_verified: false, name: 'Someone Else' });
        const x = h.browser();
        await expectAuthError(x, await x.login('acme', { login: other }), 'account_exists');

        expect((await b.passwordLogin(owner.email, owner.password)).status).toBe(200);
        const pending = await pendingOf(b);
        expect(pending.status).toBe(200);
        expect(pending.body).toMatchObject({ provider: 'acme', email: owner.email, providerAccountId: mine, name: 'Own Er' });
        const confirmed = await b.fetch('/auth/link/confirm', { method: 'POST', headers: { origin: FRONTEND } });
        expect(await confirmed.json()).toEqual({ linked: { provider: 'acme', providerAccountId: mine } });
        expect((await pendingOf(b)).status).toBe(404);
      });

      it('finding 7: provider token blobs are encrypted at rest and live no longer than their session', async () => {
        const login = uniq('blob');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectLoggedIn(b, await b.login('acme-b', { login }));
        const sid = sha256(b.sessionId!);
        const key = `svc__todo:oauth_tokens:${sid}`;
        const store = h.t.instance.stores.forRole('providerTokens');
        const raw = (await store.get(key))!;
        const blob = (await h.t.instance.auth.getProviderTokenBlob('svc__todo', sid))!;
        expect(idp.issued.access.has(blob.access)).toBe(true);
        expect(raw).not.toContain(blob.access);
        expect(raw.startsWith('enc:v1:')).toBe(true);
        // Never past the session's hard cap.
        const ttl = await store.ttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(3600);
        // A session that ended without a logout (expired, removed): its blob is gone on the next read.
        await h.t.instance.stores.forRole('sessions').del(`${h.t.keyPrefix}session:${sid}`);
        expect(await h.t.instance.auth.getProviderTokenBlob('svc__todo', sid)).toBeNull();
        expect(await store.get(key)).toBeNull();
      });
    });

    // ---- security round 3 (issue 39): every way in ends together ---------------------------

    describe('issue 39: a claim leaves one way in; pending records die with the epoch', () => {
      const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

      /** An attacker's account made from an unverified claim of `email`, signed in in browser `a`. */
      async function squat(email: string) {
        const login = uniq('squatter');
        idp.setAccount(login, { email, email_verified: false, name: 'Not The Owner' });
        const a = h.browser();
        const made = await expectLoggedIn(a, await a.login('acme', { login }));
        expect(made.user.email_verified).toBe(false);
        return { a, login, userId: made.userId };
      }

      /** The verified owner of `email` arrives through another provider: the claim. */
      async function ownerArrives(email: string) {
        const login = uniq('owner');
        idp.setAccount(login, { email, email_verified: true, name: 'The Owner' });
        const d = h.browser();
        const res = await d.login('acme-b', { login });
        return { d, res, login };
      }

      it('finding 1: a passkey the attacker registered on the unverified account does not log into the claimed one', async () => {
        const email = `${uniq('erin')}@example.com`;
        const { a, userId } = await squat(email);
        const device = new SoftAuthenticator(FRONTEND);
        const options = (await (await a.fetch('/auth/passkeys/options', { method: 'POST' })).json()) as CreationOptions;
        expect((await a.fetch('/auth/passkeys', { method: 'POST', json: { response: device.create(options) } })).status).toBe(201);

        const { d, res } = await ownerArrives(email);
        const owner = await expectLoggedIn(d, res);
        expect(owner.userId).toBe(userId);
        expect(((await (await d.fetch('/auth/passkeys')).json()) as { items: unknown[] }).items).toEqual([]);

        const x = h.browser();
        const request = (await (await x.fetch('/auth/login/passkey/options', { method: 'POST' })).json()) as RequestOptions;
        const login = await x.fetch('/auth/login/passkey', { method: 'POST', json: { response: device.get(request) } });
        expect(login.status).toBe(401);
        expect(await errorOf(login)).toBe('invalid_passkey');
        expect(x.sessionId).toBeUndefined();
      });

      it('finding 2: TOTP and a second step left waiting by the attacker: the owner is not held, the waiting step dies', async () => {
        const email = `${uniq('fay')}@example.com`;
        const { a, login } = await squat(email);
        const enrolled = (await (await a.fetch('/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string };
        const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
        const confirmed = await a.fetch('/auth/totp/confirm', { method: 'POST', json: { code: totp.generate() } });
        const { recoveryCodes } = (await confirmed.json()) as { recoveryCodes: string[] };
        // A login of the attacker's identity waits at the second step.
        const w = h.browser();
        const waiting = await w.login('acme', { login });
        expect(waiting.headers.get('location')).toBe('/login?mfa=totp');

        // The owner gets straight in: no factor she never set.
        const { d, res } = await ownerArrives(email);
        const owner = await expectLoggedIn(d, res);
        expect(await (await d.fetch('/auth/session')).json()).toMatchObject({ totp: false });
        expect(owner.user.oauthAccounts).toHaveLength(1);

        // The waiting step with a recovery code or a fresh code: dead.
        for (const body of [{ recoveryCode: recoveryCodes[0] }, { code: totp.generate({ timestamp: Date.now() + 30_000 }) }]) {
          const done = await w.fetch('/auth/login/totp', { method: 'POST', json: body });
          expect(done.status).toBe(401);
          expect(await errorOf(done)).toBe('mfa_expired');
        }
        expect(w.sessionId).toBeUndefined();
      });

      it('finding 9: a verified provider email never links into an administrator (admins connect identities themselves)', async () => {
        const admin = await h.t.createUser({ admin: true, email: `${uniq('boss')}@example.com` });
        const login = uniq('boss-idp');
        idp.setAccount(login, { email: admin.email, email_verified: true });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme', { login }), 'account_exists');
        const doc = (await (await h.admin.fetch(`/auth/users/${admin.id}`)).json()) as { oauthAccounts: unknown[] };
        expect(doc.oauthAccounts).toEqual([]);
      });

      it('finding 3: a pending link dies when the owner changes her password (the epoch moved)', async () => {
        const owner = await h.t.createUser({ email: `${uniq('gus')}@example.com` });
        const login = uniq('gus-idp');
        idp.setAccount(login, { email: owner.email, email_verified: false });
        const b = h.browser();
        await expectAuthError(b, await b.login('acme', { login }), 'account_exists');
        expect((await b.passwordLogin(owner.email, owner.password)).status).toBe(200);
        expect((await b.fetch('/auth/link/confirm')).status).toBe(200);
        expect((await b.fetch('/auth/password', { method: 'POST', json: { currentPassword: owner.password, newPassword: 'another long password' } })).status).toBe(204);
        expect((await b.fetch('/auth/link/confirm')).status).toBe(404);
        const confirm = await b.fetch('/auth/link/confirm', { method: 'POST' });
        expect(confirm.status).toBe(404);
        expect(((await (await b.fetch('/auth/account/providers')).json()) as { items: unknown[] }).items).toEqual([]);
      });

      it('finding 3: a connect flow started before logout-all fails after it, nothing linked', async () => {
        const owner = await h.t.createUser({ email: `${uniq('hal')}@example.com` });
        const b = h.browser();
        expect((await b.passwordLogin(owner.email, owner.password)).status).toBe(200);
        const started = await b.fetch('/auth/oauth/acme/link', { method: 'POST' });
        const { authorizationUrl } = (await started.json()) as { authorizationUrl: string };
        const other = h.browser();
        expect((await other.passwordLogin(owner.email, owner.password)).status).toBe(200);
        expect((await other.fetch('/auth/logout-all', { method: 'POST' })).status).toBe(204);

        const login = uniq('hal-idp');
        idp.setAccount(login, { email: owner.email, email_verified: true });
        const res = await b.callback(await b.authorize(new URL(authorizationUrl), { login }));
        expect(res.headers.get('location')).toBe('/?auth_error=invalid_state');
        const again = h.browser();
        expect((await again.passwordLogin(owner.email, owner.password)).status).toBe(200);
        expect(((await (await again.fetch('/auth/account/providers')).json()) as { items: unknown[] }).items).toEqual([]);
      });
    });

    describe('TOTP on OAuth logins (auth.totp.oauth, default on)', () => {
      it('a user with TOTP on is asked for the code after the provider: /login?mfa=totp, then POST /auth/login/totp', async () => {
        const login = uniq('mfa');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectLoggedIn(b, await b.login('acme', { login }));
        const enrolled = (await (await b.fetch('/auth/totp/enroll', { method: 'POST', headers: { origin: FRONTEND } })).json()) as { otpauthUri: string };
        const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
        expect((await b.fetch('/auth/totp/confirm', { method: 'POST', headers: { origin: FRONTEND }, json: { code: totp.generate() } })).status).toBe(200);

        const next = h.browser();
        expect((await next.setReturnTo('/reports', FRONTEND)).status).toBe(204);
        const res = await next.login('acme', { login });
        expect(res.status).toBe(302);
        expect(res.headers.get('location')).toBe('/login?mfa=totp');
        expect(setsSession(res)).toBe(false);
        expect((await next.fetch('/auth/session')).status).toBe(401);
        const done = await next.fetch('/auth/login/totp', { method: 'POST', headers: { origin: FRONTEND }, json: { code: totp.generate({ timestamp: Date.now() + 30_000 }) } });
        expect(done.status).toBe(200);
        expect(await done.json()).toMatchObject({ returnTo: '/reports' });
        expect(await (await next.fetch('/auth/session')).json()).toMatchObject({ provider: 'acme', totp: true });
      });
    });

    describe('connected accounts (CONTRACT 10)', () => {
      /** Runs a connect flow from a signed-in browser; returns the callback's response. */
      async function connect(b: Browser, providerId: string, login: string) {
        const res = await b.fetch(`/auth/oauth/${providerId}/link`, { method: 'POST', headers: { origin: FRONTEND } });
        expect(res.status).toBe(200);
        const { authorizationUrl } = (await res.json()) as { authorizationUrl: string };
        return b.callback(await b.authorize(new URL(authorizationUrl), { login }));
      }

      it('a signed-in user connects an identity that has no email; it then logs in; GET lists it', async () => {
        const owner = await h.t.createUser({ email: `${uniq('conn')}@example.com` });
        const b = h.browser();
        expect((await b.passwordLogin(owner.email, owner.password)).status).toBe(200);
        const login = uniq('noemail');
        idp.setAccount(login, { name: 'No Mail' });
        const done = await connect(b, 'acme', login);
        expect(done.status).toBe(302);
        expect(done.headers.get('location')).toBe('/');
        const list = (await (await b.fetch('/auth/account/providers')).json()) as { items: Record<string, unknown>[] };
        expect(list.items).toEqual([{ provider: 'acme', providerAccountId: login, email: null, linkedAt: expect.stringMatching(ISO) }]);

        const other = h.browser();
        const session = await expectLoggedIn(other, await other.login('acme', { login }));
        expect(session.userId).toBe(owner.id);
      });

      it("another user's identity: identity_in_use, nothing changes", async () => {
        const login = uniq('taken');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const holder = h.browser();
        const held = await expectLoggedIn(holder, await holder.login('acme', { login }));
        const someone = await h.t.createUser({ email: `${uniq('someone')}@example.com` });
        const b = h.browser();
        await b.passwordLogin(someone.email, someone.password);
        const res = await connect(b, 'acme', login);
        expect(res.status).toBe(302);
        expect(res.headers.get('location')).toBe('/?auth_error=identity_in_use');
        expect(((await (await b.fetch('/auth/account/providers')).json()) as { items: unknown[] }).items).toEqual([]);
        const again = h.browser();
        expect((await expectLoggedIn(again, await again.login('acme', { login }))).userId).toBe(held.userId);
      });

      it('DELETE disconnects; the last way to log in is refused (409 last_login_method); bad input', async () => {
        const login = uniq('only');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectLoggedIn(b, await b.login('acme', { login }));
        const last = await b.fetch(`/auth/account/providers/acme/${login}`, { method: 'DELETE', headers: { origin: FRONTEND } });
        expect(last.status).toBe(409);
        expect(await last.json()).toMatchObject({ error: { code: 'last_login_method' } });
        // A second identity makes the first removable.
        const second = uniq('second');
        idp.setAccount(second, { email: `${second}@example.com`, email_verified: true });
        expect((await connect(b, 'acme-b', second)).headers.get('location')).toBe('/');
        expect((await b.fetch(`/auth/account/providers/acme/${login}`, { method: 'DELETE', headers: { origin: FRONTEND } })).status).toBe(204);
        const list = (await (await b.fetch('/auth/account/providers')).json()) as { items: { provider: string }[] };
        expect(list.items.map((i) => i.provider)).toEqual(['acme-b']);

        expect((await b.fetch(`/auth/account/providers/acme/${login}`, { method: 'DELETE' })).status).toBe(404);
        expect((await b.fetch('/auth/oauth/nope/link', { method: 'POST' })).status).toBe(404);
        // An id no provider could have is as unknown as any other (CONTRACT 10: unknown -> 404).
        expect((await b.fetch('/auth/oauth/Bad_Id/link', { method: 'POST' })).status).toBe(404);
        expect((await b.fetch(`/auth/account/providers/Bad_Id/${login}`, { method: 'DELETE' })).status).toBe(404);
        const anon = h.browser();
        expect((await anon.fetch('/auth/account/providers')).status).toBe(401);
        expect((await anon.fetch('/auth/oauth/acme/link', { method: 'POST' })).status).toBe(401);
        expect((await anon.fetch(`/auth/account/providers/acme-b/${second}`, { method: 'DELETE' })).status).toBe(401);
      });
    });

    // ---- (f) provider tokens ------------------------------------------------------------------

    describe('provider tokens', () => {
      it('by default no token blob is kept; the login handler gets the tokens but no sid', async () => {
        const login = uniq('notok');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectLoggedIn(b, await b.login('acme', { login }));
        const sid = sha256(b.sessionId!);
        expect(await tokenBlobKeys(h.t, sid)).toEqual([]);
        const ctx = h.scan.loginContexts.at(-1)!;
        expect(ctx.providerId).toBe('acme');
        expect(idp.issued.access.has(ctx.accessToken)).toBe(true);
        expect(ctx).not.toHaveProperty('sid');
        expect(ctx).not.toHaveProperty('providerTokenNamespace');
      });

      it('persistProviderTokens keeps {access, refresh, expiresAt} under <ns>:oauth_tokens:<sid>; logout deletes it', async () => {
        const login = uniq('tok');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true, name: 'Tok En', picture: 'https://img.example/tok.png' });
        const b = h.browser();
        const session = await expectLoggedIn(b, await b.login('acme-tokens', { login }));
        const sid = sha256(b.sessionId!);

        const ctx = h.scan.loginContexts.at(-1)!;
        expect(ctx).toMatchObject({ providerId: 'acme-tokens', userId: session.userId, sid, providerTokenNamespace: 'svc__todo' });
        expect(ctx.profile).toMatchObject({ id: login, email: `${login}@example.com`, emailVerified: true, name: 'Tok En', avatarUrl: 'https://img.example/tok.png' });
        expect(ctx.userInfo).toMatchObject({ sub: login, email: `${login}@example.com` });
        expect(idp.issued.access.has(ctx.accessToken)).toBe(true);
        expect(idp.issued.refresh.has(ctx.refreshToken!)).toBe(true);
        expect(ctx.expiresAt).toMatch(ISO);
        expect(Date.parse(ctx.expiresAt!)).toBeGreaterThan(Date.now());

        const key = `svc__todo:oauth_tokens:${sid}`;
        expect(await tokenBlobKeys(h.t, sid)).toEqual([key]);
        expect(await h.t.instance.auth.getProviderTokenBlob('svc__todo', sid)).toEqual({ access: ctx.accessToken, refresh: ctx.refreshToken, expiresAt: ctx.expiresAt });

        // A plugin adds its fields.
        const auth = h.t.instance.auth;
        const blob = (await auth.getProviderTokenBlob('svc__todo', sid))!;
        await auth.setProviderTokenBlob('svc__todo', sid, { ...blob, accountLabel: 'work', scopes: ['repo'] });
        expect(await auth.getProviderTokenBlob('svc__todo', sid)).toEqual({ access: ctx.accessToken, refresh: ctx.refreshToken, expiresAt: ctx.expiresAt, accountLabel: 'work', scopes: ['repo'] });

        const logout = await b.fetch('/auth/logout', { method: 'POST', headers: { origin: FRONTEND } });
        expect(logout.status).toBe(204);
        expect(await auth.getProviderTokenBlob('svc__todo', sid)).toBeNull();
        expect(await tokenBlobKeys(h.t, sid)).toEqual([]);
      });
      it('logout deletes the blobs even after the provider was deleted, and blobs a plugin added', async () => {
        await createProvider(h.admin, {
          providerId: 'acme-gone',
          type: 'custom',
          clientId: 'svc-pkce',
          clientSecret: SECRETS.pkce,
          scopes: ['openid', 'email'],
          config: customConfig({ persistProviderTokens: true, providerTokenNamespace: 'svc__todo' }),
        });
        const login = uniq('gone');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const b = h.browser();
        await expectLoggedIn(b, await b.login('acme-gone', { login }));
        const sid = sha256(b.sessionId!);
        const auth = h.t.instance.auth;
        const blob = (await auth.getProviderTokenBlob('svc__todo', sid))!;
        expect(idp.issued.access.has(blob.access)).toBe(true);
        await auth.setProviderTokenBlob('svc__cache', sid, { ...blob, note: 'a second plugin keeps its own copy' });

        expect((await h.admin.fetch('/auth/providers/acme-gone', { method: 'DELETE' })).status).toBe(204);
        expect((await b.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
        expect(await auth.getProviderTokenBlob('svc__todo', sid)).toBeNull();
        expect(await auth.getProviderTokenBlob('svc__cache', sid)).toBeNull();
        expect(await tokenBlobKeys(h.t, sid)).toEqual([]);
      });

      it('logout-all deletes the blobs of every session of the user', async () => {
        const login = uniq('all');
        idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
        const one = h.browser();
        const two = h.browser();
        await expectLoggedIn(one, await one.login('acme-tokens', { login }));
        await expectLoggedIn(two, await two.login('acme-tokens', { login }));
        const sids = [sha256(one.sessionId!), sha256(two.sessionId!)];
        for (const sid of sids) expect(await h.t.instance.auth.getProviderTokenBlob('svc__todo', sid)).not.toBeNull();
        expect((await one.fetch('/auth/logout-all', { method: 'POST' })).status).toBe(204);
        for (const sid of sids) expect(await tokenBlobKeys(h.t, sid)).toEqual([]);
        expect((await two.fetch('/auth/session')).status).toBe(401);
      });
    });

    it("a plugin's failing login handler does not undo the login", async () => {
      h.t.instance.auth.registerOAuthLoginHandler('acme-late', async () => {
        throw new Error('plugin bug');
      });
      const login = uniq('handler');
      idp.setAccount(login, { email: `${login}@example.com`, email_verified: true });
      const b = h.browser();
      const session = await expectLoggedIn(b, await b.login('acme-late', { login }));
      expect(session.provider).toBe('acme-late');
    });

    it('the leak scanner saw every response, learned the secrets, and catches a planted leak', async () => {
      expect(h.scan.scanned).toBeGreaterThan(100);
      expect(h.scan.sessionIds.length).toBeGreaterThan(10);
      expect(idp.issued.access.size).toBeGreaterThan(5);
      expect(idp.issued.refresh.size).toBeGreaterThan(5);
      const probe = newScanner();
      const access = [...idp.issued.access][0]!;
      await expect(probe.inspect('planted body', new Response(JSON.stringify({ token: access })))).rejects.toThrow(/LEAK.*body.*IdP token/);
      await expect(probe.inspect('planted header', new Response(null, { headers: { location: `/x?secret=${encodeURIComponent(SECRETS.pkce)}` } }))).rejects.toThrow(/LEAK.*location.*client secret/);
      const sid = h.scan.sessionIds[0]!;
      probe.addSecret(sid, 'session id');
      await expect(probe.inspect('session id in its own cookie', new Response(null, { headers: { 'set-cookie': `${COOKIE}=${sid}; Path=/; HttpOnly` } }))).resolves.toBeUndefined();
      await expect(probe.inspect('session id elsewhere', new Response(null, { headers: { 'set-cookie': `other=${sid}; Path=/` } }))).rejects.toThrow(/LEAK.*Set-Cookie other.*session id/);
    });
  });
}

// =============================================================================================
// (e) The provider admin API (embedded store; store-independent).

describe('provider admin API', () => {
  let h: Harness;
  let user: Browser;
  const adminSecret = `admin-api-secret-${randomUUID()}`;

  beforeAll(async () => {
    const scan = newScanner();
    scan.addSecret(adminSecret, 'client secret (admin API)');
    h = await harness(
      {
        config: appConfig([
          acmeTemplate(),
          { id: 'beta', displayName: 'Beta ID', authorizationEndpoint: 'https://beta.example/authorize', tokenEndpoint: 'https://beta.example/token', userInfoEndpoint: 'https://beta.example/me', scopes: ['read:user'], pkce: false },
        ]),
      },
      scan,
    );
    const plain = await h.t.createUser();
    user = h.browser();
    expect((await user.passwordLogin(plain.email, plain.password)).status).toBe(200);
  });
  afterEach(() => h?.scan.verify());
  afterAll(() => h?.t.close());

  it('POST/GET/PATCH/DELETE /auth/providers: shapes, write-only secret, 409, 404', async () => {
    const created = await h.admin.fetch('/auth/providers', { method: 'POST', json: { providerId: 'acme', type: 'custom', clientId: 'client-1', clientSecret: adminSecret } });
    expect(created.status).toBe(201);
    const doc = (await created.json()) as Record<string, unknown>;
    expect(doc).toMatchObject({
      id: 'acme',
      providerId: 'acme',
      type: 'custom',
      label: 'Acme SSO',
      clientId: 'client-1',
      hasClientSecret: true,
      redirectUri: callbackUrl('acme'),
      scopes: ['openid', 'email', 'profile'],
      enabled: true,
      config: { authorizationEndpoint: idp.authorizationEndpoint, tokenEndpoint: idp.tokenEndpoint, userInfoEndpoint: idp.userInfoEndpoint, pkce: true },
    });
    expect(doc).not.toHaveProperty('clientSecret');

    const dup = await h.admin.fetch('/auth/providers', { method: 'POST', json: { providerId: 'acme', type: 'custom', clientId: 'client-2' } });
    expect(dup.status).toBe(409);
    expect(await dup.json()).toMatchObject({ error: { code: 'provider_exists' } });

    const beta = await h.admin.fetch('/auth/providers', {
      method: 'POST',
      json: { providerId: 'beta', type: 'custom', clientId: 'client-b', scopes: [], redirectUri: 'https://app.example/api/auth/oauth/beta/callback' },
    });
    expect(beta.status).toBe(201);
    expect(await beta.json()).toMatchObject({ id: 'beta', label: 'Beta ID', hasClientSecret: false, scopes: [], redirectUri: 'https://app.example/api/auth/oauth/beta/callback', config: { pkce: false } });

    const list = await h.admin.fetch('/auth/providers');
    expect(list.status).toBe(200);
    const docs = (await list.json()) as Record<string, unknown>[];
    expect(docs.map((d) => d.id).sort()).toEqual(['acme', 'beta']);
    for (const d of docs) expect(d).not.toHaveProperty('clientSecret');
    expect(docs.find((d) => d.id === 'acme')).toMatchObject({ hasClientSecret: true, label: 'Acme SSO' });

    // The login page's list: enabled providers only, no secrets.
    const publicList = async () => (await (await h.browser().fetch('/auth/oauth/providers')).json()) as unknown[];
    expect(await publicList()).toEqual(
      expect.arrayContaining([
        { providerId: 'acme', label: 'Acme SSO', type: 'custom' },
        { providerId: 'beta', label: 'Beta ID', type: 'custom' },
      ]),
    );

    const patched = await h.admin.fetch('/auth/providers/acme', { method: 'PATCH', json: { label: 'Acme 2', enabled: false, clientSecret: '' } });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toMatchObject({ id: 'acme', label: 'Acme 2', enabled: false, hasClientSecret: false, scopes: ['openid', 'email', 'profile'] });
    expect(await publicList()).toEqual([{ providerId: 'beta', label: 'Beta ID', type: 'custom' }]);
    const resecret = await h.admin.fetch('/auth/providers/acme', { method: 'PATCH', json: { clientSecret: adminSecret, enabled: true } });
    expect(await resecret.json()).toMatchObject({ hasClientSecret: true, enabled: true, label: 'Acme 2' });

    expect((await h.admin.fetch('/auth/providers/beta', { method: 'DELETE' })).status).toBe(204);
    expect(((await (await h.admin.fetch('/auth/providers')).json()) as { id: string }[]).map((d) => d.id)).toEqual(['acme']);
    for (const [method, json] of [
      ['DELETE', undefined],
      ['PATCH', { label: 'x' }],
    ] as const) {
      // Ids no provider could have (not kebab-case) are as unknown as a removed one: 404 (CONTRACT 5).
      for (const id of ['beta', 'No_Such', 'a.b', 'x'.repeat(100)]) {
        const res = await h.admin.fetch(`/auth/providers/${id}`, { method, json });
        expect(res.status, `${method} ${id}`).toBe(404);
        expect(await res.json()).toMatchObject({ error: { code: 'not_found' } });
      }
    }
  });

  it('400 validation_failed for bad bodies', async () => {
    const bad: [string, Record<string, unknown>, string][] = [
      ['unknown field', { providerId: 'gamma', type: 'custom', clientId: 'c', config: customConfig(), color: 'red' }, ''],
      ['bad redirectUri', { providerId: 'gamma', type: 'custom', clientId: 'c', config: customConfig(), redirectUri: 'not a url' }, 'redirectUri'],
      ['redirectUri not on the web', { providerId: 'gamma', type: 'custom', clientId: 'c', config: customConfig(), redirectUri: 'javascript:alert(1)' }, 'redirectUri'],
      ['bad endpoint URL', { providerId: 'gamma', type: 'custom', clientId: 'c', config: customConfig({ tokenEndpoint: 'nope' }) }, 'config.tokenEndpoint'],
      ['custom without endpoints', { providerId: 'gamma', type: 'custom', clientId: 'c' }, 'config.authorizationEndpoint'],
      ['keycloak without realmURL', { providerId: 'keycloak', type: 'arctic', clientId: 'c', clientSecret: 's' }, 'config.realmURL'],
      ['persistProviderTokens without namespace', { providerId: 'gamma', type: 'custom', clientId: 'c', config: customConfig({ persistProviderTokens: true }) }, 'config.providerTokenNamespace'],
      ['missing clientId', { providerId: 'gamma', type: 'custom', config: customConfig() }, 'clientId'],
      ['unknown type', { providerId: 'gamma', type: 'saml', clientId: 'c' }, 'type'],
      ['unknown built-in', { providerId: 'no-such-provider', type: 'arctic', clientId: 'c' }, 'providerId'],
    ];
    for (const [what, body, path] of bad) {
      const res = await h.admin.fetch('/auth/providers', { method: 'POST', json: body });
      expect(res.status, what).toBe(400);
      const json = (await res.json()) as { error: { code: string; details?: { path: string }[] } };
      expect(json.error.code, what).toBe('validation_failed');
      if (path) expect(json.error.details?.map((d) => d.path), what).toContain(path);
    }
    const patch = await h.admin.fetch('/auth/providers/acme', { method: 'PATCH', json: { providerId: 'other' } });
    expect(patch.status).toBe(400);
    const patchTokens = await h.admin.fetch('/auth/providers/acme', { method: 'PATCH', json: { config: customConfig({ persistProviderTokens: true }) } });
    expect(patchTokens.status).toBe(400);
    expect(((await (await h.admin.fetch('/auth/providers')).json()) as { id: string }[]).map((d) => d.id)).toEqual(['acme']);
  });

  it('non-admins get 403, anonymous callers 401', async () => {
    const calls: [string, string, unknown?][] = [
      ['GET', '/auth/providers'],
      ['POST', '/auth/providers', { providerId: 'zeta', type: 'custom', clientId: 'c', config: customConfig() }],
      ['PATCH', '/auth/providers/acme', { label: 'hijacked' }],
      ['DELETE', '/auth/providers/acme'],
      ['GET', '/auth/available-providers'],
    ];
    for (const [method, path, json] of calls) {
      const res = await user.fetch(path, { method, json });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(await res.json()).toMatchObject({ error: { code: 'forbidden' } });
      expect((await h.browser().fetch(path, { method, json })).status, `${method} ${path} anonymous`).toBe(401);
    }
    const list = (await (await h.admin.fetch('/auth/providers')).json()) as { id: string; label: string }[];
    expect(list).toEqual([expect.objectContaining({ id: 'acme', label: 'Acme 2' })]);
  });

  it('GET /auth/available-providers lists every built-in provider and the custom templates, with redirectUri', async () => {
    const res = await h.admin.fetch('/auth/available-providers');
    expect(res.status).toBe(200);
    const all = (await res.json()) as { providerId: string; type: string; label: string; pkce: boolean; configKeys: string[]; defaultScopes: string[]; redirectUri: string }[];
    for (const p of all) {
      expect(p.redirectUri, p.providerId).toBe(callbackUrl(p.providerId));
      expect(typeof p.label).toBe('string');
      expect(typeof p.pkce).toBe('boolean');
      expect(Array.isArray(p.configKeys) && Array.isArray(p.defaultScopes)).toBe(true);
      expect(p).not.toHaveProperty('clientSecret');
    }
    // Every provider class arctic exports (found here independently of svc).
    const arcticClasses = Object.entries(arctic).filter(
      ([name, value]) => name !== 'OAuth2Client' && typeof value === 'function' && typeof (value as { prototype?: { createAuthorizationURL?: unknown } }).prototype?.createAuthorizationURL === 'function',
    );
    expect(arcticClasses.length).toBeGreaterThanOrEqual(60);
    const builtins = all.filter((p) => p.type === 'arctic');
    expect(builtins).toHaveLength(arcticClasses.length);
    expect(new Set(builtins.map((p) => p.providerId)).size).toBe(builtins.length);
    expect(builtins.find((p) => p.providerId === 'keycloak')).toMatchObject({ pkce: true, configKeys: expect.arrayContaining(['realmURL']) });
    expect(all.filter((p) => p.type === 'custom')).toEqual([
      { providerId: 'acme', type: 'custom', label: 'Acme SSO', pkce: true, configKeys: expect.any(Array), defaultScopes: ['openid', 'email', 'profile'], trustEmailVerified: true, redirectUri: callbackUrl('acme') },
      { providerId: 'beta', type: 'custom', label: 'Beta ID', pkce: false, configKeys: expect.any(Array), defaultScopes: ['read:user'], trustEmailVerified: true, redirectUri: callbackUrl('beta') },
    ]);
  });

  it('with SVC_SECRET_ENCRYPTION_KEY the stored clientSecret is enc:v1: and login still works', async () => {
    const enc = await harness({ env: { SVC_SECRET_ENCRYPTION_KEY: `key-${randomUUID()}` } }, h.scan);
    try {
      await createProvider(enc.admin, { providerId: 'acme', type: 'custom', clientId: 'svc-pkce', clientSecret: SECRETS.pkce });
      const docs = await enc.t.instance.db.collection<{ _id: string; providerId: string; clientSecret?: string }>('svc__core-oauthprovider');
      const stored = await docs.findOne({ providerId: 'acme' });
      expect(stored!.clientSecret).toMatch(/^enc:v1:/);
      expect(stored!.clientSecret).not.toContain(SECRETS.pkce);

      const login = uniq('enc');
      idp.setAccount(login, { email: `${login}@example.com`, email_verified: true, name: 'En Crypted' });
      const b = enc.browser();
      const session = await expectLoggedIn(b, await b.login('acme', { login }));
      expect(session.provider).toBe('acme');

      // The IdP really checks the secret: a wrong one fails the code exchange.
      expect((await enc.admin.fetch('/auth/providers/acme', { method: 'PATCH', json: { clientSecret: 'wrong-secret-value' } })).status).toBe(200);
      const wrong = enc.browser();
      await expectAuthError(wrong, await wrong.login('acme', { login }), 'token_exchange_failed');
    } finally {
      await enc.t.close();
    }
  });
});
