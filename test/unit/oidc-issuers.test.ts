// The issuer cache of `type: "oidc"` providers (src/auth/oauth/oidc-issuers.ts) against a local
// OpenID provider (test/support/fake-oidc.ts): the discovery document's checks and cache, and the key
// set's refresh on an unknown `kid` (key rotation) limited by a cool-down.

import { errors, jwtVerify } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { IssuerError, OidcIssuers } from '../../src/auth/oauth/oidc-issuers.ts';
import { startFakeOidc, type FakeOidc } from '../support/fake-oidc.ts';

let fake: FakeOidc;
beforeAll(async () => {
  fake = await startFakeOidc({ clientId: 'c', clientSecret: 's' });
});
afterEach(() => {
  fake.discovery = 'ok';
});
afterAll(() => fake?.close());

const count = (suffix: string) => fake.requests.filter((r) => r.path === `/tenant-a${suffix}`).length;
const discoveries = () => count('/.well-known/openid-configuration');
const keySets = () => count('/jwks');
const token = () => fake.sign({ iss: fake.issuer, aud: 'c', sub: 'u1', exp: Math.floor(Date.now() / 1000) + 60 });

describe('discovery', () => {
  it('discover() always reads and checks; metadata() serves the cached copy within its TTL', async () => {
    const issuers = new OidcIssuers({ allowInsecure: false });
    const before = discoveries();
    const as = await issuers.discover(fake.issuer);
    expect(as).toMatchObject({ issuer: fake.issuer, token_endpoint: `${fake.issuer}/token`, jwks_uri: `${fake.issuer}/jwks` });
    await issuers.metadata(fake.issuer);
    await issuers.metadata(fake.issuer);
    expect(discoveries() - before).toBe(1);
    await issuers.discover(fake.issuer);
    expect(discoveries() - before).toBe(2);
  });

  it('concurrent reads share one request', async () => {
    const issuers = new OidcIssuers({ allowInsecure: false });
    const before = discoveries();
    await Promise.all([issuers.metadata(fake.issuer), issuers.metadata(fake.issuer), issuers.metadata(fake.issuer)]);
    expect(discoveries() - before).toBe(1);
  });

  it('after its TTL the document is read again; a stale copy serves while that read fails', async () => {
    const issuers = new OidcIssuers({ allowInsecure: false, metadataTtlMs: 0 });
    await issuers.discover(fake.issuer);
    const before = discoveries();
    fake.discovery = 'http-500';
    expect((await issuers.metadata(fake.issuer)).issuer).toBe(fake.issuer);
    expect(discoveries() - before).toBe(1);
    // discover() (an admin saving the provider) never settles for a stale copy.
    await expect(issuers.discover(fake.issuer)).rejects.toThrow(IssuerError);
  });

  it('refuses a document whose endpoints break the provider URL rule, and an issuer that breaks it', async () => {
    const issuers = new OidcIssuers({ allowInsecure: false });
    fake.discovery = 'plain-http-token-endpoint';
    await expect(issuers.discover(fake.issuer)).rejects.toThrow(/token_endpoint must use https/);
    await expect(new OidcIssuers({ allowInsecure: false }).discover('http://idp.example.com/x')).rejects.toThrow(/must use https/);
  });
});

describe('key set', () => {
  it('an unknown kid (the IdP rotated its key) reads the key set again', async () => {
    const issuers = new OidcIssuers({ allowInsecure: false, jwksCooldownMs: 0 });
    await issuers.discover(fake.issuer);
    const before = keySets();
    await jwtVerify(await token(), await issuers.keys(fake.issuer), { issuer: fake.issuer, audience: 'c' });
    await jwtVerify(await token(), await issuers.keys(fake.issuer), { issuer: fake.issuer, audience: 'c' });
    expect(keySets() - before).toBe(1);
    await fake.rotateKey();
    await jwtVerify(await token(), await issuers.keys(fake.issuer), { issuer: fake.issuer, audience: 'c' });
    expect(keySets() - before).toBe(2);
  });

  it('within the cool-down an unknown kid does not read the key set again (forged kids cause no request storm)', async () => {
    const issuers = new OidcIssuers({ allowInsecure: false, jwksCooldownMs: 60_000 });
    await issuers.discover(fake.issuer);
    const before = keySets();
    await jwtVerify(await token(), await issuers.keys(fake.issuer));
    await fake.rotateKey();
    for (let i = 0; i < 3; i++) await expect(jwtVerify(await token(), await issuers.keys(fake.issuer))).rejects.toBeInstanceOf(errors.JWKSNoMatchingKey);
    expect(keySets() - before).toBe(1);
  });

  it('a refreshed discovery document keeps the key set (and its cache) while jwks_uri is the same', async () => {
    const issuers = new OidcIssuers({ allowInsecure: false });
    await issuers.discover(fake.issuer);
    const keys = await issuers.keys(fake.issuer);
    await issuers.discover(fake.issuer);
    expect(await issuers.keys(fake.issuer)).toBe(keys);
  });
});
