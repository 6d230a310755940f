import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';

const PREFIX = 'enc:v1:';

/**
 * Client secrets at rest (CONTRACT section 5): AES-256-GCM under a key derived from
 * `SVC_SECRET_ENCRYPTION_KEY`, stored as `enc:v1:<iv>.<tag>.<ciphertext>` (base64url). Without a key,
 * secrets are stored as given (svc warns at start-up).
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

  seal(plain: string): string {
    if (!this.key) return plain;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${PREFIX}${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${data.toString('base64url')}`;
  }

  open(stored: string): string {
    if (!stored.startsWith(PREFIX)) return stored;
    if (!this.key) throw new Error('a client secret is encrypted but SVC_SECRET_ENCRYPTION_KEY is not set');
    const [iv, tag, data] = stored.slice(PREFIX.length).split('.');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv ?? '', 'base64url'));
    decipher.setAuthTag(Buffer.from(tag ?? '', 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data ?? '', 'base64url')), decipher.final()]).toString('utf8');
  }
}
