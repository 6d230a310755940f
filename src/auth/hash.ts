import { hash } from 'node:crypto';

/**
 * SHA-256 in hex: how svc names a secret in a store key (session ids, OAuth states, pending logins,
 * asset tokens) so the key never holds the secret itself. The ids are 256-bit random values, so a plain
 * hash is enough: nothing to brute-force, no salt needed. One-shot `crypto.hash`: on every authenticated
 * request (the session cookie), and a third of the cost of a `createHash` object.
 */
export const sha256hex = (value: string): string => hash('sha256', value, 'hex');
