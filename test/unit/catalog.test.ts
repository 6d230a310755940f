// The built-in provider catalog against the real arctic module: coverage (a new arctic class fails
// here by name), constructor order and PKCE kind of every entry (by building a real authorize URL),
// and the user-info mappings of a few providers against their documented sample responses.

import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as arctic from 'arctic';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadArctic } from '../../src/auth/oauth/arctic.ts';
import { catalog, catalogEntry, discoverArcticProviders } from '../../src/auth/oauth/catalog.ts';
import type { ArcticClient, CatalogEntry } from '../../src/auth/oauth/catalog-types.ts';
import { mapUserInfo, type Profile } from '../../src/auth/oauth/profile.ts';

const arcticModule = arctic as unknown as Record<string, unknown>;
// What providerClient does first: the entries' adapters read arctic through `arctic()` (src/auth/oauth/arctic.ts).
await loadArctic();
const providersDir = fileURLToPath(new URL('../../node_modules/arctic/dist/providers/', import.meta.url));
const classOf = (entry: CatalogEntry) => arcticModule[entry.className] as new (...args: never[]) => ArcticClient;

/** Plausible provider `config` values for every key an entry may ask for. */
const CONFIG: Record<string, string> = {
  realmURL: 'https://idp.example.com/realms/x',
  tenant: 'common',
  domain: 'example.okta.com',
  baseURL: 'https://git.example.com',
  teamId: 'TEAM123456',
  keyId: 'KEY1234567',
};
/** Keys whose value shows up in the authorize URL (Apple's team and key ids only sign the client secret). */
const URL_KEYS = new Set(['realmURL', 'tenant', 'domain', 'baseURL']);

const OPTIONS = { clientId: 'client-id-123', clientSecret: 'client-secret-456', redirectUri: 'https://app.example.com/api/auth/oauth/x/callback', config: CONFIG };
const STATE = 'state-abc-123';
const VERIFIER = arctic.generateCodeVerifier();
const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

type Loose = { createAuthorizationURL(...args: unknown[]): URL; validateAuthorizationCode(...args: unknown[]): Promise<arctic.OAuth2Tokens> };
const loose = (client: ArcticClient) => client as unknown as Loose;

describe('catalog coverage of arctic', () => {
  const discovered = discoverArcticProviders(arcticModule);
  const classNames = catalog.map((e) => e.className);

  it('has an entry for every provider class arctic exports', () => {
    expect(discovered.length).toBeGreaterThanOrEqual(60);
    const missing = discovered.filter((name) => !classNames.includes(name));
    expect(missing, `arctic exports provider classes without a catalog entry: ${missing.join(', ')}`).toEqual([]);
  });

  it('names no class arctic does not export, and each class once', () => {
    const unknown = classNames.filter((name) => !discovered.includes(name));
    expect(unknown, `catalog entries for classes arctic does not export: ${unknown.join(', ')}`).toEqual([]);
    expect(new Set(classNames).size).toBe(classNames.length);
    expect(catalog.length).toBe(discovered.length);
  });

  it('every entry has a row in the provider guide (docs/providers.md: the page checked, when, and what changed)', () => {
    const guide = readFileSync(fileURLToPath(new URL('../../docs/providers.md', import.meta.url)), 'utf8');
    const table = guide.slice(guide.indexOf('| Provider'), guide.indexOf('## Settings per provider'));
    const missing = catalog.map((e) => e.id).filter((id) => !table.includes(`(\`${id}\``));
    expect(missing, `catalog entries without a row in docs/providers.md: ${missing.join(', ')}`).toEqual([]);
  });

  it('uses unique kebab-case ids, in alphabetical order', () => {
    const ids = catalog.map((e) => e.id);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([...ids].sort());
  });

  it("uses arctic's module file name as the id", () => {
    for (const entry of catalog) {
      const file = `${providersDir}${entry.id}.js`;
      expect(existsSync(file), `${entry.id}: no ${file}`).toBe(true);
      expect(readFileSync(file, 'utf8'), `${entry.id}.js does not define ${entry.className}`).toMatch(new RegExp(`export class ${entry.className}\\b`));
    }
  });

  it('has a label, sane default scopes and known config keys everywhere', () => {
    for (const entry of catalog) {
      expect(entry.label.trim(), entry.id).not.toBe('');
      for (const scope of entry.defaultScopes) expect(scope, entry.id).toMatch(/^\S+$/);
      for (const key of entry.configKeys) expect(Object.keys(CONFIG), `${entry.id}: config key ${key}`).toContain(key);
    }
  });

  it('discovers classes with both flow methods only, without OAuth2Client', () => {
    class Both {
      createAuthorizationURL() {}
      validateAuthorizationCode() {}
    }
    class Half {
      createAuthorizationURL() {}
    }
    expect(discoverArcticProviders({ OAuth2Client: arctic.OAuth2Client, Zed: Both, Both, Half, generateState: arctic.generateState, n: 1 })).toEqual(['Both', 'Zed']);
    expect(discovered).not.toContain('OAuth2Client');
    expect(discovered).not.toContain('OAuth2Tokens');
  });

  it('finds entries by id', () => {
    expect(catalogEntry('keycloak')?.className).toBe('KeyCloak');
    expect(catalogEntry('microsoft-entra-id')?.configKeys).toEqual(['tenant']);
    expect(catalogEntry('42')?.className).toBe('FortyTwo');
    expect(catalogEntry('nope')).toBeUndefined();
  });
});

/** The entry's client with dummy options, and the authorize URL built the way the flow calls it for `pkce`. */
function build(entry: CatalogEntry) {
  const Class = classOf(entry);
  expect(Class, `arctic exports no ${entry.className}`).toBeTypeOf('function');
  const client = entry.create(Class, OPTIONS);
  const url =
    entry.pkce === 'none'
      ? loose(client).createAuthorizationURL(STATE, entry.defaultScopes)
      : loose(client).createAuthorizationURL(STATE, VERIFIER, entry.defaultScopes);
  return { Class, client, url };
}

describe.each(catalog.map((entry) => [entry.id, entry] as const))('%s: constructor and authorize URL', (_id, entry) => {
  it('builds an instance of the arctic class', () => {
    const { Class, client } = build(entry);
    expect(client).toBeInstanceOf(Class);
  });

  it('puts the state, the client id and the redirect URI in the URL', () => {
    const { url } = build(entry);
    expect(url).toBeInstanceOf(URL);
    expect(url.searchParams.get('state')).toBe(STATE);
    // TikTok calls its client id the "client key".
    expect(url.searchParams.get('client_id') ?? url.searchParams.get('client_key')).toBe(OPTIONS.clientId);
    expect(url.searchParams.get('redirect_uri')).toBe(OPTIONS.redirectUri);
  });

  it('passes the config keys to the constructor', () => {
    const { url } = build(entry);
    for (const key of entry.configKeys.filter((k) => URL_KEYS.has(k))) expect(url.toString()).toContain(CONFIG[key]!.replace(/^https:\/\//, ''));
  });

  it(`matches pkce "${entry.pkce}"`, () => {
    const { Class, url } = build(entry);
    const proto = (Class as unknown as { prototype: Record<string, (...args: unknown[]) => unknown> }).prototype;
    if (entry.pkce === 'none') {
      expect(url.searchParams.has('code_challenge')).toBe(false);
      // start.gg's second parameter is the scopes (the entry adapts it), never a verifier.
      expect(proto.validateAuthorizationCode!.length).toBe(entry.id === 'startgg' ? 2 : 1);
      return;
    }
    if (entry.id === 'coinbase' || entry.id === 'vk') {
      // arctic's class has no PKCE (its exchange takes only the code): the adapter replaces both methods
      // (VK ID's also takes the callback's parameters, for `device_id`).
      expect(proto.validateAuthorizationCode!.length).toBe(1);
      expect(loose(build(entry).client).validateAuthorizationCode.length).toBe(entry.id === 'vk' ? 3 : 2);
    } else expect(proto.validateAuthorizationCode!.length).toBe(2);
    if (entry.id === 'myanimelist') {
      // MyAnimeList supports only the plain method; arctic sends it.
      expect(url.searchParams.get('code_challenge_method')).toBe('plain');
      expect(url.searchParams.get('code_challenge')).toBe(VERIFIER);
    } else {
      expect(url.searchParams.get('code_challenge_method')).toBe('S256');
      expect(url.searchParams.get('code_challenge')).toBe(s256(VERIFIER));
    }
    if (entry.pkce === 'optional') {
      const withoutVerifier = loose(entry.create(Class, OPTIONS)).createAuthorizationURL(STATE, null, entry.defaultScopes);
      expect(withoutVerifier.searchParams.has('code_challenge')).toBe(false);
    }
  });
});

describe('adapters around arctic quirks', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('Apple asks for form_post when scopes are requested', () => {
    const apple = loose(catalogEntry('apple')!.create(arctic.Apple as never, OPTIONS));
    expect(apple.createAuthorizationURL(STATE, ['name', 'email']).searchParams.get('response_mode')).toBe('form_post');
    expect(apple.createAuthorizationURL(STATE, []).searchParams.has('response_mode')).toBe(false);
  });

  it('start.gg sends the scopes its token endpoint wants when the flow passes only the code', async () => {
    const bodies: string[] = [];
    vi.stubGlobal('fetch', async (request: Request) => {
      bodies.push(await request.text());
      return Response.json({ access_token: 'at', token_type: 'bearer', expires_in: 3600 });
    });
    const startgg = loose(catalogEntry('startgg')!.create(arctic.StartGG as never, OPTIONS));
    await startgg.validateAuthorizationCode('the-code');
    expect(new URLSearchParams(bodies[0]).get('scope')).toBe('user.identity user.email');
  });

  it('Twitch sends the client id of the instance that exchanged the code to Helix', async () => {
    vi.stubGlobal('fetch', async () => Response.json({ access_token: 'at', token_type: 'bearer', expires_in: 3600 }));
    const entry = catalogEntry('twitch')!;
    const tokens = await loose(entry.create(arctic.Twitch as never, OPTIONS)).validateAuthorizationCode('the-code');
    const http = fakeHttp({
      'https://api.twitch.tv/helix/users': {
        data: [{ id: '141981764', login: 'twitchdev', display_name: 'TwitchDev', profile_image_url: 'https://static-cdn.jtvnw.net/p.png', email: 'not-real@email.com' }],
      },
    });
    expect(await resolveProfile(entry, tokens, http.fetch)).toEqual({
      id: '141981764',
      email: 'not-real@email.com',
      emailVerified: true,
      name: 'TwitchDev',
      avatarUrl: 'https://static-cdn.jtvnw.net/p.png',
    });
    expect(http.calls[0]!.headers['Client-Id']).toBe(OPTIONS.clientId);
  });
});

// ------------------------------------------------------------------------------------------------
// User-info mappings, with the sample responses the providers document
// ------------------------------------------------------------------------------------------------

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
}

/** A `fetch` that answers JSON by URL (404 for unknown URLs, or the status given for a URL) and records the calls. */
function fakeHttp(routes: Record<string, unknown>, statuses: Record<string, number> = {}) {
  const calls: Call[] = [];
  const fn = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    // The catalog passes headers as a plain object: recorded with their original casing.
    calls.push({ url, method: init?.method ?? 'GET', headers: { ...(init?.headers as Record<string, string> | undefined) } });
    if (statuses[url]) return new Response('{}', { status: statuses[url] });
    if (!(url in routes)) return new Response('{"message":"Not Found"}', { status: 404 });
    return Response.json(routes[url]);
  };
  return { fetch: fn as typeof fetch, calls };
}

/** What the flow does with an entry's source (catalog-types.ts): GET with the bearer token, the id_token, or the custom fetch. */
async function resolveProfile(entry: CatalogEntry, tokens: arctic.OAuth2Tokens, http: typeof fetch, config: Record<string, unknown> = {}, callback = new URLSearchParams()): Promise<Profile> {
  const source = entry.userInfo;
  if (source.kind === 'custom') return (await source.fetch(tokens, config, http)).profile;
  // The signature, issuer, audience and nonce checks are proven against a real OpenID provider (test/e2e/apple.test.ts).
  if (source.kind === 'verifiedIdToken') return source.map(arctic.decodeIdToken(tokens.idToken()) as Record<string, unknown>, callback);
  if (source.kind === 'idToken') return (source.map ?? mapUserInfo)(arctic.decodeIdToken(tokens.idToken()) as Record<string, unknown>);
  const url = typeof source.url === 'function' ? source.url(config) : source.url;
  const res = await http(url, { headers: { Authorization: `Bearer ${tokens.accessToken()}`, ...source.headers } });
  return (source.map ?? mapUserInfo)((await res.json()) as Record<string, unknown>);
}

const tokens = (data: Record<string, unknown> = {}) => new arctic.OAuth2Tokens({ access_token: 'gho_access', token_type: 'bearer', ...data });

describe('user-info mappings', () => {
  it('GitHub: the primary verified address from /user/emails', async () => {
    const http = fakeHttp({
      'https://api.github.com/user': {
        login: 'octocat',
        id: 1,
        avatar_url: 'https://github.com/images/error/octocat_happy.gif',
        name: 'monalisa octocat',
        email: 'octocat@github.com',
      },
      'https://api.github.com/user/emails': [
        { email: 'old@example.com', verified: true, primary: false, visibility: null },
        { email: 'octocat@github.com', verified: true, primary: true, visibility: 'public' },
      ],
    });
    expect(await resolveProfile(catalogEntry('github')!, tokens(), http.fetch)).toEqual({
      id: '1',
      email: 'octocat@github.com',
      emailVerified: true,
      name: 'monalisa octocat',
      avatarUrl: 'https://github.com/images/error/octocat_happy.gif',
    });
    expect(http.calls.map((c) => c.url)).toEqual(['https://api.github.com/user', 'https://api.github.com/user/emails']);
    for (const call of http.calls) {
      expect(call.headers.Authorization).toBe('Bearer gho_access');
      expect(call.headers['User-Agent']).toBeTruthy();
    }
  });

  it('GitHub: no verified address means the public email, unverified', async () => {
    const user = { login: 'octocat', id: 1, name: null, email: 'octocat@github.com', avatar_url: 'https://a.example/o.png' };
    const unverified = fakeHttp({
      'https://api.github.com/user': user,
      'https://api.github.com/user/emails': [{ email: 'octocat@github.com', verified: false, primary: true, visibility: 'public' }],
    });
    expect(await resolveProfile(catalogEntry('github')!, tokens(), unverified.fetch)).toEqual({
      id: '1',
      email: 'octocat@github.com',
      emailVerified: false,
      name: 'octocat',
      avatarUrl: 'https://a.example/o.png',
    });
    // Token without user:email: /user/emails refuses, the login still gets the public address.
    const refused = fakeHttp({ 'https://api.github.com/user': user }, { 'https://api.github.com/user/emails': 403 });
    expect(await resolveProfile(catalogEntry('github')!, tokens(), refused.fetch)).toMatchObject({ email: 'octocat@github.com', emailVerified: false });
    // No public email and no emails: no email at all (the flow answers no_email).
    const none = fakeHttp({ 'https://api.github.com/user': { ...user, email: null }, 'https://api.github.com/user/emails': [] });
    expect(await resolveProfile(catalogEntry('github')!, tokens(), none.fetch)).toMatchObject({ email: undefined, emailVerified: false });
  });

  it('Discord: `verified` is the email verification', async () => {
    const user = {
      id: '80351110224678912',
      username: 'Nelly',
      discriminator: '1337',
      global_name: 'Nelly N.',
      avatar: '8342729096ea3675442027381ff50dfe',
      verified: true,
      email: 'nelly@discord.com',
    };
    const entry = catalogEntry('discord')!;
    expect(entry.userInfo).toMatchObject({ kind: 'userinfo', url: 'https://discord.com/api/users/@me' });
    expect(await resolveProfile(entry, tokens(), fakeHttp({ 'https://discord.com/api/users/@me': user }).fetch)).toEqual({
      id: '80351110224678912',
      email: 'nelly@discord.com',
      emailVerified: true,
      name: 'Nelly N.',
      avatarUrl: 'https://cdn.discordapp.com/avatars/80351110224678912/8342729096ea3675442027381ff50dfe.png',
    });
    const unverified = { ...user, verified: false, global_name: null, avatar: null };
    expect(await resolveProfile(entry, tokens(), fakeHttp({ 'https://discord.com/api/users/@me': unverified }).fetch)).toEqual({
      id: '80351110224678912',
      email: 'nelly@discord.com',
      emailVerified: false,
      name: 'Nelly',
      avatarUrl: undefined,
    });
  });

  it('Google: OpenID Connect userinfo', async () => {
    const url = 'https://openidconnect.googleapis.com/v1/userinfo';
    const claims = {
      sub: '110169484474386276334',
      name: 'Ada Lovelace',
      given_name: 'Ada',
      family_name: 'Lovelace',
      picture: 'https://lh3.googleusercontent.com/a/ACg8ocI',
      email: 'ada@example.com',
      email_verified: true,
    };
    const entry = catalogEntry('google')!;
    expect(entry.defaultScopes).toEqual(['openid', 'email', 'profile']);
    expect(await resolveProfile(entry, tokens(), fakeHttp({ [url]: claims }).fetch)).toEqual({
      id: '110169484474386276334',
      email: 'ada@example.com',
      emailVerified: true,
      name: 'Ada Lovelace',
      givenName: 'Ada',
      familyName: 'Lovelace',
      avatarUrl: 'https://lh3.googleusercontent.com/a/ACg8ocI',
    });
    expect(await resolveProfile(entry, tokens(), fakeHttp({ [url]: { ...claims, email_verified: false } }).fetch)).toMatchObject({ emailVerified: false });
  });

  it('Keycloak: the realm userinfo endpoint', async () => {
    const entry = catalogEntry('keycloak')!;
    const claims = { sub: '3c6b8bd1-2a4d-4c32-9a8e-5c1b8c1f2e11', email_verified: false, name: 'Ada Lovelace', preferred_username: 'ada', email: 'ada@example.com' };
    for (const realmURL of ['https://idp.example.com/realms/x', 'https://idp.example.com/realms/x/']) {
      const http = fakeHttp({ 'https://idp.example.com/realms/x/protocol/openid-connect/userinfo': claims });
      expect(await resolveProfile(entry, tokens(), http.fetch, { realmURL })).toEqual({
        id: '3c6b8bd1-2a4d-4c32-9a8e-5c1b8c1f2e11',
        email: 'ada@example.com',
        emailVerified: false,
        name: 'Ada Lovelace',
        avatarUrl: undefined,
      });
    }
  });

  it('Microsoft Entra ID: Graph userinfo asserts no verification', async () => {
    const entry = catalogEntry('microsoft-entra-id')!;
    const claims = {
      sub: 'OLu859SGc2Sr9ZsqbkG-QbeLgJlb41KcdiPoLYNpSFA',
      name: 'Mikah Ollenburg',
      family_name: 'Ollenburg',
      given_name: 'Mikah',
      picture: 'https://graph.microsoft.com/v1.0/me/photo/$value',
      email: 'mikoll@contoso.com',
    };
    const http = fakeHttp({ 'https://graph.microsoft.com/oidc/userinfo': claims });
    expect(await resolveProfile(entry, tokens(), http.fetch)).toEqual({
      id: 'OLu859SGc2Sr9ZsqbkG-QbeLgJlb41KcdiPoLYNpSFA',
      email: 'mikoll@contoso.com',
      emailVerified: false,
      name: 'Mikah Ollenburg',
      avatarUrl: undefined,
    });
  });

  it('Apple: the id_token claims (email_verified may be the string "true")', async () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const idToken = `${b64({ alg: 'ES256', kid: 'k' })}.${b64({ iss: 'https://appleid.apple.com', sub: '001234.abcdef.1234', email: 'ada@privaterelay.appleid.com', email_verified: 'true' })}.sig`;
    expect(await resolveProfile(catalogEntry('apple')!, tokens({ id_token: idToken }), fakeHttp({}).fetch)).toEqual({
      id: '001234.abcdef.1234',
      email: 'ada@privaterelay.appleid.com',
      emailVerified: true,
      name: undefined,
      avatarUrl: undefined,
    });
  });

  it('Apple: the name from the form_post `user` field (first login only); its email is ignored, a malformed one costs only the name', async () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const idToken = `${b64({ alg: 'ES256', kid: 'k' })}.${b64({ iss: 'https://appleid.apple.com', sub: '001234.abcdef.1234', email: 'ada@example.com', email_verified: true })}.sig`;
    const user = JSON.stringify({ name: { firstName: 'Ada', lastName: 'Lovelace' }, email: 'mallory@example.com' });
    const apple = catalogEntry('apple')!;
    expect(await resolveProfile(apple, tokens({ id_token: idToken }), fakeHttp({}).fetch, {}, new URLSearchParams({ user }))).toEqual({
      id: '001234.abcdef.1234',
      email: 'ada@example.com',
      emailVerified: true,
      name: 'Ada Lovelace',
      avatarUrl: undefined,
    });
    const broken = await resolveProfile(apple, tokens({ id_token: idToken }), fakeHttp({}).fetch, {}, new URLSearchParams({ user: '{not json' }));
    expect(broken).toMatchObject({ id: '001234.abcdef.1234', email: 'ada@example.com', name: undefined });
  });
});
