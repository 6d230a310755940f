// Secrets at rest (issue 39, finding 9): AES-256-GCM with the full 16-byte tag, each value bound to
// its record (the record id as AAD), values sealed before still readable, and with a key set no
// plaintext value is ever used silently.

import { describe, expect, it } from 'vitest';
import { SecretBox, SecretError, sealedRecord } from '../../src/auth/oauth/secrets.ts';
import { sealedTheOldWay } from '../support/secrets.ts';

const PASSPHRASE = 'unit-test-passphrase';
const box = new SecretBox(PASSPHRASE);
const ACME = sealedRecord.providerSecret('acme');
const OTHER = sealedRecord.providerSecret('other');

/** `sealed` with its tag (the part before the data) cut to `bytes`. */
function withTagCut(sealed: string, bytes: number): string {
  const parts = sealed.split('.');
  const tagAt = parts.length - 2;
  parts[tagAt] = Buffer.from(parts[tagAt]!, 'base64url').subarray(0, bytes).toString('base64url');
  return parts.join('.');
}

describe('SecretBox with a key', () => {
  it('seals as enc:v1: (CONTRACT 5), never showing the secret, and opens for the same record', () => {
    const sealed = box.seal('client-secret-1', ACME);
    expect(sealed).toMatch(/^enc:v1:/);
    expect(sealed).not.toContain('client-secret-1');
    expect(box.open(sealed, ACME)).toBe('client-secret-1');
  });

  it("a value copied into another record does not open there (the record id is the AAD)", () => {
    const sealed = box.seal('client-secret-1', ACME);
    expect(() => box.open(sealed, OTHER)).toThrow(SecretError);
    expect(() => box.open(box.seal('JBSWY3DPEHPK3PXP', sealedRecord.totp('user-a')), sealedRecord.totp('user-b'))).toThrow(SecretError);
  });

  it('a tag cut short is refused, even when its bytes are right (GCM needs all 16)', () => {
    for (const sealed of [box.seal('client-secret-1', ACME), sealedTheOldWay(PASSPHRASE, 'client-secret-1')]) {
      for (const bytes of [4, 8, 12, 15]) expect(() => box.open(withTagCut(sealed, bytes), ACME), `${bytes} bytes`).toThrow(SecretError);
    }
  });

  it('an altered ciphertext or another key is refused', () => {
    const sealed = box.seal('client-secret-1', ACME);
    const parts = sealed.split('.');
    const data = Buffer.from(parts.at(-1)!, 'base64url');
    data[0]! ^= 1;
    parts[parts.length - 1] = data.toString('base64url');
    expect(() => box.open(parts.join('.'), ACME)).toThrow(SecretError);
    expect(() => new SecretBox('another key').open(sealed, ACME)).toThrow(SecretError);
  });

  it('a value sealed before the record binding still opens, and is due to be sealed again', () => {
    const old = sealedTheOldWay(PASSPHRASE, 'client-secret-1');
    expect(box.open(old, ACME)).toBe('client-secret-1');
    expect(box.needsResealing(old)).toBe(true);
    const resealed = box.reseal(old, ACME);
    expect(box.needsResealing(resealed)).toBe(false);
    expect(box.open(resealed, ACME)).toBe('client-secret-1');
    expect(() => box.open(resealed, OTHER)).toThrow(SecretError);
  });

  it('a plaintext value is refused with a clear error, never used; sealing it again binds it', () => {
    expect(() => box.open('client-secret-1', ACME)).toThrow(/stored unencrypted although SVC_SECRET_ENCRYPTION_KEY is set/);
    expect(box.needsResealing('client-secret-1')).toBe(true);
    const resealed = box.reseal('client-secret-1', ACME);
    expect(box.open(resealed, ACME)).toBe('client-secret-1');
    expect(box.reseal(resealed, ACME)).toBe(resealed);
  });
});

describe('SecretBox without a key', () => {
  const plain = new SecretBox(undefined);
  it('stores values as given and refuses a sealed one (the key is missing)', () => {
    expect(plain.seal('client-secret-1', ACME)).toBe('client-secret-1');
    expect(plain.open('client-secret-1', ACME)).toBe('client-secret-1');
    expect(plain.needsResealing('client-secret-1')).toBe(false);
    expect(() => plain.open(box.seal('client-secret-1', ACME), ACME)).toThrow(/SVC_SECRET_ENCRYPTION_KEY is not set/);
  });
});
