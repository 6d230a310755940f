// Values as svc sealed them before issue 39 (`enc:v1:<iv>.<tag>.<data>`, no record binding), to show
// that such data still opens and is sealed again.

import { createCipheriv, randomBytes, scryptSync } from 'node:crypto';

export function sealedTheOldWay(passphrase: string, plain: string): string {
  const key = scryptSync(passphrase, 'svc-secret-encryption-v1', 32);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return `enc:v1:${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${data.toString('base64url')}`;
}
