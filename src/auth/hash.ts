import { createHash } from 'node:crypto';

/**
 * SHA-256 in hex: how svc names a secret in a store key (session ids, OAuth states, pending logins,
 * asset tokens) so the key never holds the secret itself. The ids are 256-bit random values, so a plain
 * hash is enough: nothing to brute-force, no salt needed.
 */
export const sha256hex = (value: string): string => createHash('sha256').update(value).digest('hex');
