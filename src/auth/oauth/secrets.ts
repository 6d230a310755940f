import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';

/** Every sealed value starts with this (CONTRACT 5). */
const PREFIX = 'enc:v1:';
/**
 * Values sealed with their record id as AAD (issue 39) start with `enc:v1:r.` and have four parts;
 * values sealed before have three (`enc:v1:<iv>.<tag>.<data>`): still opened, and sealed again at
 * start-up (`needsResealing`). An iv is 16 base64url characters, so `r` never reads as one.
 */
export const BOUND_PREFIX = `${PREFIX}r.`;
const IV_BYTES = 12;
/** The full GCM tag: without `authTagLength` Node accepts a tag cut to 4 bytes, which a forger can guess. */
const TAG_BYTES = 16;

/** A sealed value that cannot be opened (no key, wrong key, tampered, another record's, or plaintext where a key is set). */
export class SecretError extends Error {
  override readonly name = 'SecretError';
}

/**
 * Secrets at rest (CONTRACT section 5): OAuth client secrets, TOTP secrets, provider token blobs.
 * AES-256-GCM under a key derived from `SVC_SECRET_ENCRYPTION_KEY`, stored as
 * `enc:v1:r.<iv>.<tag>.<ciphertext>` (base64url). Each value is bound to its record by `aad` (the
 * record's kind and id, e.g. `oauth-provider:acme`), so a value copied into another record (another
 * provider's secret, another user's TOTP) does not open there. Without a key, values are stored as
 * given (svc warns at start-up); with one, a plaintext value is refused, never used silently: the
 * start-up re-seals the ones in the database (`needsResealing`).
 */
export class SecretBox {
  private readonly key?: Buffer;

  constructor(passphrase: string | undefined) {
    // scrypt turns any passphrase into 32 key bytes; the fixed salt is fine for one key per deployment.
    if (passphrase) this.key = scryptSync(passphrase, 'svc-secret-encryption-v1', 32);
  }

  get encrypts(): boolean {
    return this.key !== undefined;
  }

  seal(plain: string, aad: string): string {
    if (!this.key) return plain;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${BOUND_PREFIX}${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${data.toString('base64url')}`;
  }

  open(stored: string, aad: string): string {
    if (!stored.startsWith(PREFIX)) {
      if (this.key) throw new SecretError(`the secret of ${aad} is stored unencrypted although SVC_SECRET_ENCRYPTION_KEY is set: save it again`);
      return stored;
    }
    if (!this.key) throw new SecretError(`the secret of ${aad} is encrypted but SVC_SECRET_ENCRYPTION_KEY is not set`);
    const bound = stored.startsWith(BOUND_PREFIX);
    const [iv, tag, data, extra] = stored.slice(bound ? BOUND_PREFIX.length : PREFIX.length).split('.').map((part) => Buffer.from(part, 'base64url'));
    if (iv?.length !== IV_BYTES || tag?.length !== TAG_BYTES || !data || extra) throw new SecretError(`the secret of ${aad} is malformed`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, iv, { authTagLength: TAG_BYTES });
      if (bound) decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(data), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretError(`the secret of ${aad} does not open: another key, altered, or another record's`);
    }
  }

  /** True when a key is set and `stored` is not sealed the current way (plaintext, or sealed without its record id). */
  needsResealing(stored: string): boolean {
    return this.key !== undefined && !stored.startsWith(BOUND_PREFIX);
  }

  /** `stored` sealed the current way: a plaintext value is taken as the secret, an older seal is opened first. */
  reseal(stored: string, aad: string): string {
    if (!this.needsResealing(stored)) return stored;
    return this.seal(stored.startsWith(PREFIX) ? this.open(stored, aad) : stored, aad);
  }
}

/** The `aad` of each kind of sealed record: its kind and id, in one place so sealing and opening agree. */
export const sealedRecord = {
  providerSecret: (providerId: string) => `oauth-provider:${providerId}`,
  totp: (userId: string) => `totp:${userId}`,
  /** A provider token blob, by its store key (`{namespace}:oauth_tokens:{session hash}`). */
  tokenBlob: (storeKey: string) => `oauth-tokens:${storeKey}`,
};
