// Sign in with Apple (account-security issue, part 4): `response_mode=form_post`, a cross-site POST
// to the callback, completed in the browser that holds the state cookie; the id_token verified
// (signature against Apple's key set, issuer, audience, nonce); the name from Apple's `user` field,
// which Apple sends on the first login only.
//
// Apple is played by a real OpenID provider (oidc-provider, test/support/apple-idp.ts) with Apple's
// issuer and paths, ES256 id_tokens and form_post, behind a front that checks the ES256 client-secret
// JWT svc signs with the .p8 key. svc's calls to appleid.apple.com go there (routeHosts).

import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { APPLE_ISSUER, startAppleIdp, type AppleIdp } from '../support/apple-idp.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { LeakScanner } from '../support/leak-scanner.ts';
import { Browser } from '../support/oidc.ts';
import { routeHosts } from '../support/route-hosts.ts';

const SVC_BASE = 'http://localhost:3000';
const COOKIE = 'sid_app';
const CALLBACK = `${SVC_BASE}/api/auth/oauth/apple/callback`;
const CLIENT_ID = 'com.example.svc.web';
const APPLE_PAGE = 'https://appleid.apple.com';

let apple: AppleIdp;
let t: TestApp;
let scan: LeakScanner;
let admin: Browser;
let restore: () => void;
const browser = () => new Browser(scan.wrap(t.fetch), { svcBase: SVC_BASE, cookieName: COOKIE });
const uniq = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  apple = await startAppleIdp({ clientId: CLIENT_ID, redirectUris: [CALLBACK] });
  restore = routeHosts({ 'appleid.apple.com': apple.url });
  scan = new LeakScanner(COOKIE, { tokenSets: [apple.issued] });
  scan.addSecret(apple.p8, 'Apple .p8 key');
  t = await createTestApp();
  scan.watchLogins(t.instance, ['apple']);
  admin = browser();
  const adminUser = await t.createUser({ admin: true });
  expect((await admin.passwordLogin(adminUser.email, adminUser.password)).status).toBe(200);
  const res = await admin.fetch('/auth/providers', {
    method: 'POST',
    json: { providerId: 'apple', type: 'arctic', clientId: CLIENT_ID, clientSecret: apple.p8, config: { teamId: apple.teamId, keyId: apple.keyId } },
  });
  expect(res.status, await res.clone().text()).toBe(201);
});
afterEach(() => {
  apple.tamper = 'none';
  scan.verify();
});
afterAll(async () => {
  restore?.();
  await t?.close();
  await apple?.close();
});

/** The authorize URL svc sent the browser to, pointed at the local Apple. */
const local = (authorizeUrl: URL) => new URL(`${authorizeUrl.pathname}${authorizeUrl.search}`, apple.url);

/**
 * Start, sign in at "Apple", and get the form Apple's page would post (not yet posted). `user` is
 * what Apple's page adds on a first login (the stand-in puts it in the page).
 */
async function appleForm(b: Browser, login: string, user?: Record<string, unknown>) {
  const { authorizeUrl } = await b.start('apple');
  expect(authorizeUrl?.origin).toBe(APPLE_PAGE);
  apple.nextUser = user ?? null;
  const { action, fields } = await b.authorizeFormPost(local(authorizeUrl!), { login });
  expect(action.toString()).toBe(CALLBACK);
  if (user) expect(JSON.parse(fields.get('user')!)).toEqual(user);
  return { authorizeUrl: authorizeUrl!, fields };
}

/** Apple's page posts the form cross-site: Apple's Origin, and no svc cookie (SameSite=Lax keeps it home). */
function crossSitePost(b: Browser, fields: URLSearchParams, contentType = 'application/x-www-form-urlencoded') {
  return b.fetch('/api/auth/oauth/apple/callback', {
    method: 'POST',
    headers: { origin: APPLE_PAGE, 'content-type': contentType, cookie: '' },
    body: fields.toString(),
  });
}

/** The browser follows the 303 (a top-level GET, which carries its Lax cookies). */
function follow(b: Browser, res: Response) {
  expect(res.status).toBe(303);
  const location = res.headers.get('location')!;
  return b.fetch(new URL(location, CALLBACK).pathname + new URL(location, CALLBACK).search);
}

async function sessionUser(b: Browser) {
  const res = await b.fetch('/auth/session?expand=user');
  expect(res.status).toBe(200);
  return (await res.json()) as { user: { email: string; firstname: string; lastname: string; email_verified: boolean; oauthAccounts: { provider: string; providerAccountId: string }[] } };
}

describe('Sign in with Apple: the admin API checks the .p8 key', () => {
  it('a clientSecret that is no EC P-256 private key (PKCS#8 PEM), or none, is 400 naming clientSecret, and nothing changes', async () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const config = { teamId: apple.teamId, keyId: apple.keyId };
    for (const clientSecret of ['not a key', apple.p8.replace(/[A-Za-z]/g, 'A'), rsa, p384, undefined]) {
      // POST validates before it would find the saved provider (409): each of these is refused for the key.
      const res = await admin.fetch('/auth/providers', { method: 'POST', json: { providerId: 'apple', type: 'arctic', clientId: CLIENT_ID, config, ...(clientSecret === undefined ? {} : { clientSecret }) } });
      expect(res.status, String(clientSecret).slice(0, 30)).toBe(400);
      const { error } = (await res.json()) as { error: { code: string; details: { path: string; message: string }[] } };
      expect(error.code).toBe('validation_failed');
      expect(error.details.map((d) => d.path)).toEqual(['clientSecret']);
    }
    for (const clientSecret of ['not a key', rsa, '']) {
      const res = await admin.fetch('/auth/providers/apple', { method: 'PATCH', json: { clientSecret } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { details: { path: string }[] } }).error.details.map((d) => d.path)).toEqual(['clientSecret']);
    }
    // The saved key is untouched: a login still works (the tests below), and the right key is accepted again.
    const res = await admin.fetch('/auth/providers/apple', { method: 'PATCH', json: { clientSecret: apple.p8 } });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { hasClientSecret: boolean }).hasClientSecret).toBe(true);
  });
});

describe('Sign in with Apple: form_post callback', () => {
  it('a first login: the form is posted cross-site, the 303 GET logs in the browser holding the state; name from `user`, email from the id_token', async () => {
    const login = uniq('apple');
    const email = `${login}@privaterelay.appleid.com`;
    apple.setAccount(login, { email, email_verified: 'true' });
    const b = browser();
    const { authorizeUrl, fields } = await appleForm(b, login, { name: { firstName: 'Ada', lastName: 'Lovelace' }, email: 'someone-else@example.com' });

    // What svc asked Apple for: form_post (scopes were requested) and a nonce for the id_token.
    expect(authorizeUrl.searchParams.get('response_mode')).toBe('form_post');
    expect(authorizeUrl.searchParams.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(fields.get('state')).toBe(authorizeUrl.searchParams.get('state'));
    expect(fields.get('code')).toBeTruthy();

    const posted = await crossSitePost(b, fields);
    expect(posted.status).toBe(303);
    // Only the state travels in the URL: the code and the name stay on the server.
    expect(posted.headers.get('location')).toBe(`?state=${encodeURIComponent(fields.get('state')!)}`);
    expect(posted.headers.getSetCookie().some((c) => c.startsWith(`${COOKIE}=`))).toBe(false);

    const done = await follow(b, posted);
    expect(done.status).toBe(302);
    expect(done.headers.get('location')).toBe('/');
    const { user } = await sessionUser(b);
    expect(user).toMatchObject({ email, firstname: 'Ada', lastname: 'Lovelace', email_verified: true, oauthAccounts: [{ provider: 'apple', providerAccountId: login }] });
    // The client secret was an ES256 JWT signed with the .p8 key, never the key itself.
    expect(apple.clientSecrets.at(-1)).toMatchObject({ valid: true });
    expect(apple.clientSecrets.at(-1)!.jwt.split('.')).toHaveLength(3);
  });

  it('a later login: Apple sends no `user`, and the name svc kept stays', async () => {
    const login = uniq('apple');
    apple.setAccount(login, { email: `${login}@example.com`, email_verified: true });
    const first = browser();
    const one = await appleForm(first, login, { name: { firstName: 'Grace', lastName: 'Hopper' } });
    expect((await follow(first, await crossSitePost(first, one.fields))).headers.get('location')).toBe('/');
    const again = browser();
    const two = await appleForm(again, login);
    expect(two.fields.has('user')).toBe(false);
    expect((await follow(again, await crossSitePost(again, two.fields))).headers.get('location')).toBe('/');
    expect((await sessionUser(again)).user).toMatchObject({ firstname: 'Grace', lastname: 'Hopper' });
  });

  it('another browser cannot complete it: the GET without the state cookie is invalid_state, and the code is gone', async () => {
    const login = uniq('apple');
    apple.setAccount(login, { email: `${login}@example.com`, email_verified: true });
    const victim = browser();
    const { fields } = await appleForm(victim, login);
    const attacker = browser();
    const posted = await crossSitePost(attacker, fields);
    const res = await follow(attacker, posted);
    expect(res.headers.get('location')).toBe('/?auth_error=invalid_state');
    expect(attacker.sessionId).toBeUndefined();
    // The state was consumed by that attempt: the victim's own GET is refused too, and nobody logged in.
    const late = await victim.fetch(`/api/auth/oauth/apple/callback?state=${encodeURIComponent(fields.get('state')!)}`);
    expect(late.headers.get('location')).toBe('/?auth_error=invalid_state');
    expect(await t.instance.auth.users.findByEmail(`${login}@example.com`)).toBeNull();
  });

  it('the stored fields are single use: replaying the GET is invalid_state', async () => {
    const login = uniq('apple');
    apple.setAccount(login, { email: `${login}@example.com`, email_verified: true });
    const b = browser();
    const { fields } = await appleForm(b, login);
    const posted = await crossSitePost(b, fields);
    const location = posted.headers.get('location')!;
    expect((await follow(b, posted)).headers.get('location')).toBe('/');
    const replay = await b.fetch(`/api/auth/oauth/apple/callback${location}`);
    expect(replay.headers.get('location')).toBe('/?auth_error=invalid_state');
  });

  it('a POST for a state svc never issued stores nothing and ends in invalid_state', async () => {
    const b = browser();
    const fields = new URLSearchParams({ state: uniq('forged-state'), code: 'attacker-code' });
    const res = await follow(b, await crossSitePost(b, fields));
    expect(res.headers.get('location')).toBe('/?auth_error=invalid_state');
    expect(b.sessionId).toBeUndefined();
  });

  it('the person cancels at Apple (error=user_cancelled_authorize): access_denied, no session', async () => {
    const b = browser();
    const { authorizeUrl } = await b.start('apple');
    const fields = new URLSearchParams({ state: authorizeUrl!.searchParams.get('state')!, error: 'user_cancelled_authorize' });
    const res = await follow(b, await crossSitePost(b, fields));
    expect(res.headers.get('location')).toBe('/?auth_error=access_denied');
    expect(b.sessionId).toBeUndefined();
  });

  it('bad bodies: JSON is 415 unsupported_media_type; no state or an oversized field is invalid_state; a malformed provider id too', async () => {
    const b = browser();
    const json = await crossSitePost(b, new URLSearchParams({ state: 'x' }), 'application/json');
    expect(json.status).toBe(415);
    expect(((await json.json()) as { error: { code: string } }).error.code).toBe('unsupported_media_type');
    for (const fields of [new URLSearchParams({ code: 'c' }), new URLSearchParams({ state: 's', code: 'c'.repeat(5000) })]) {
      const res = await crossSitePost(b, fields);
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/?auth_error=invalid_state');
    }
    const bad = await b.fetch('/api/auth/oauth/Bad..Id/callback', { method: 'POST', headers: { origin: APPLE_PAGE, 'content-type': 'application/x-www-form-urlencoded' }, body: 'state=s&code=c' });
    expect(bad.headers.get('location')).toBe('/?auth_error=invalid_state');
  });

  it('only the callback accepts a POST from another site: any other state-changing route is still csrf_failed', async () => {
    const b = browser();
    const res = await b.fetch('/api/auth/logout', { method: 'POST', headers: { origin: APPLE_PAGE } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('csrf_failed');
  });
});

describe('Sign in with Apple: the id_token is verified', () => {
  it.each([
    ['wrong-nonce', 'a nonce other than the one svc sent'],
    ['other-audience', 'an audience other than our client id'],
    ['other-issuer', 'an issuer other than https://appleid.apple.com'],
    ['unpublished-key', 'a signature by a key Apple does not publish'],
  ] as const)('%s: an id_token with %s is token_exchange_failed, and nobody is created', async (tamper, _what) => {
    const login = uniq('apple');
    apple.setAccount(login, { email: `${login}@example.com`, email_verified: true });
    const b = browser();
    const { fields } = await appleForm(b, login);
    apple.tamper = tamper;
    const res = await follow(b, await crossSitePost(b, fields));
    expect(res.headers.get('location')).toBe('/?auth_error=token_exchange_failed');
    expect(b.sessionId).toBeUndefined();
    expect(await t.instance.auth.users.findByEmail(`${login}@example.com`)).toBeNull();
  });

  it('the same claims re-signed by a key Apple publishes log in: the changed claims are what the checks above refused', async () => {
    const login = uniq('apple');
    apple.setAccount(login, { email: `${login}@example.com`, email_verified: true });
    const b = browser();
    const { fields } = await appleForm(b, login);
    apple.tamper = 'resign';
    expect((await follow(b, await crossSitePost(b, fields))).headers.get('location')).toBe('/');
    expect((await sessionUser(b)).user.oauthAccounts).toEqual([expect.objectContaining({ provider: 'apple', providerAccountId: login })]);
    expect(APPLE_ISSUER).toBe(new URL(APPLE_PAGE).origin);
  });
});
