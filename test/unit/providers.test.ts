// The decision the OAuth flow takes on a login's email (CONTRACT 5, `trustEmailVerified`), as the
// pure functions providers.ts exports: provider documents and profiles in, a boolean out.

import { describe, expect, it } from 'vitest';
import { catalog } from '../../src/auth/oauth/catalog.ts';
import { defaultTrustEmailVerified, emailVerifiedBy, trustsEmailOf } from '../../src/auth/oauth/providers.ts';

type Doc = Parameters<typeof emailVerifiedBy>[0];
const doc = (providerId: string, extra: Partial<Doc> = {}): Doc => ({ providerId, type: 'arctic', config: {}, ...extra });

describe('emailVerifiedBy', () => {
  it('a trusted provider: its claim decides; config.trustEmailVerified verifies an email it says nothing about', () => {
    expect(emailVerifiedBy(doc('keycloak'), { emailVerified: true })).toBe(true);
    expect(emailVerifiedBy(doc('keycloak'), { emailVerified: false })).toBe(false);
    expect(emailVerifiedBy(doc('keycloak', { config: { trustEmailVerified: true } }), { emailVerified: false })).toBe(true);
    expect(emailVerifiedBy(doc('acme', { type: 'custom', trustEmailVerified: true }), { emailVerified: true })).toBe(true);
  });

  it('an untrusted provider never verifies an email: not by its claim, not by config.trustEmailVerified', () => {
    expect(emailVerifiedBy(doc('authentik', { trustEmailVerified: false }), { emailVerified: true })).toBe(false);
    expect(emailVerifiedBy(doc('authentik', { trustEmailVerified: false, config: { trustEmailVerified: true } }), { emailVerified: true })).toBe(false);
    expect(emailVerifiedBy(doc('google', { trustEmailVerified: false, config: { trustEmailVerified: true } }), { emailVerified: false })).toBe(false);
  });

  it('turning trustEmailVerified on (authentik 2025.10 or later) lets its claim count again', () => {
    expect(emailVerifiedBy(doc('authentik', { trustEmailVerified: true }), { emailVerified: true })).toBe(true);
    expect(emailVerifiedBy(doc('authentik', { trustEmailVerified: true }), { emailVerified: false })).toBe(false);
  });

  it('a document saved before the field existed gets the default of its providerId', () => {
    expect(emailVerifiedBy(doc('authentik'), { emailVerified: true })).toBe(false);
    expect(emailVerifiedBy(doc('synology'), { emailVerified: true })).toBe(false);
    expect(emailVerifiedBy(doc('gitea'), { emailVerified: true })).toBe(true);
    expect(emailVerifiedBy(doc('authentik', { type: 'custom' }), { emailVerified: true })).toBe(true); // a custom template named like a built-in
  });
});

describe('defaults of trustEmailVerified', () => {
  it('false only for the built-ins whose verified flag is unreliable; true for custom providers', () => {
    expect(catalog.filter((e) => !defaultTrustEmailVerified('arctic', e.id)).map((e) => e.id)).toEqual(['authentik', 'synology']);
    expect(defaultTrustEmailVerified('custom', 'acme')).toBe(true);
    expect(trustsEmailOf(doc('synology', { trustEmailVerified: true }))).toBe(true);
    expect(trustsEmailOf(doc('gitea', { trustEmailVerified: false }))).toBe(false);
  });
});
