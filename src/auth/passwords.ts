import { hash, verify } from '@node-rs/argon2';

/**
 * argon2id with OWASP's parameters (m=19456 KiB, t=2, p=1). The PHC string records them
 * (`$argon2id$v=19$m=19456,t=2,p=1$...`), so they can be raised later and old hashes still verify.
 * @node-rs/argon2 hashes on libuv's thread pool: the event loop stays free during a login.
 */
const PARAMS = { algorithm: 2 /* Algorithm.Argon2id: an ambient const enum, not importable as a value */, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const MIN_PASSWORD_LENGTH = 8;
/** Bounds the work an attacker can make one login cost. */
export const MAX_PASSWORD_LENGTH = 256;

export function hashPassword(password: string): Promise<string> {
  return hash(password, PARAMS);
}

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    return await verify(stored, password);
  } catch {
    return false; // a malformed stored hash never logs anybody in
  }
}

/** True when a stored hash was made with weaker parameters than today's. */
export function needsRehash(stored: string): boolean {
  return !stored.startsWith(`$argon2id$v=19$m=${PARAMS.memoryCost},t=${PARAMS.timeCost},p=${PARAMS.parallelism}$`);
}

let dummy: Promise<string> | undefined;
/**
 * A hash to verify against when the email is unknown, so an unknown email and a wrong password
 * cost the same time (enumeration safety).
 */
export function dummyHash(): Promise<string> {
  return (dummy ??= hashPassword('svc-dummy-password-for-timing'));
}
