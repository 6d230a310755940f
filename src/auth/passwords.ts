import { hash, verify } from '@node-rs/argon2';
import { availableParallelism } from 'node:os';
import * as v from 'valibot';
import { AppError } from '../http/errors.ts';
import { HashThreads, HashThreadsFailed, type HashJob } from './hash-threads.ts';

/**
 * argon2id with OWASP's parameters (m=19456 KiB, t=2, p=1). The PHC string records them
 * (`$argon2id$v=19$m=19456,t=2,p=1$...`), so they can be raised later and old hashes still verify.
 * @node-rs/argon2 hashes on libuv's thread pool: the event loop stays free during a login.
 */
const PARAMS = { algorithm: 2 /* Algorithm.Argon2id: an ambient const enum, not importable as a value */, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const MIN_PASSWORD_LENGTH = 8;
/** Bounds the work an attacker can make one login cost. */
export const MAX_PASSWORD_LENGTH = 256;
/** Characters that are each one grapheme on their own and with any neighbour (no CR LF, no combining marks). */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/**
 * Whether `text` holds at least `n` characters as a person counts them: `'😀'.length` is 2, and 4 emoji
 * are 4 characters, not 8. Stops at the n-th: counting every segment of a long string takes time that
 * grows with the square of its length (20,000 characters: 0.4 s; 100,000 ran out of memory), and a
 * request body may hold a megabyte. Printable ASCII is one character per unit, counted without the
 * segmenter: most passwords, and the bootstrap admin's, never load ICU's break rules (0.3-0.4 MB of the
 * node binary that stayed resident for the life of the process).
 */
export function hasCharacters(text: string, n: number): boolean {
  if (PRINTABLE_ASCII.test(text)) return text.length >= n;
  let count = 0;
  for (const _ of new Intl.Segmenter().segment(text)) if (++count >= n) return true;
  return count >= n;
}

const tooShort = `must be at least ${MIN_PASSWORD_LENGTH} characters`;

/** A password being set (users, change, reset, sign-up): at least 8 characters, at most 256 UTF-16 units. */
export const newPasswordSchema = v.pipe(
  v.string(),
  v.minLength(MIN_PASSWORD_LENGTH, tooShort), // what /openapi.json can say
  v.maxLength(MAX_PASSWORD_LENGTH),
  // Only where both lengths passed: one problem is one detail (valibot runs every check of a pipe).
  v.check((p) => p.length < MIN_PASSWORD_LENGTH || p.length > MAX_PASSWORD_LENGTH || hasCharacters(p, MIN_PASSWORD_LENGTH), tooShort),
);

/**
 * At most (cores - 1) hashes at once. argon2 runs on libuv's threads, which compete with the event
 * loop for CPU: a burst of logins must not slow every other request (measured on 2 cores: session
 * route p50 34-58 ms during 100 logins with 4 threads hashing, 10-11 ms with 1).
 */
const MAX_CONCURRENT = Math.max(1, availableParallelism() - 1);
/**
 * At most 16 hashes wait per hashing thread (~35 ms each on 2 cores: a login waits < 0.6 s). Past
 * that a login is refused at once with 429 and `Retry-After`: a burst of 150 logins made a
 * legitimate login wait 3.5 s behind an unbounded queue (security review, finding 4).
 */
const MAX_WAITING = 16 * MAX_CONCURRENT;
let running = 0;
const waiting: (() => void)[] = [];
/** Where checks go once they queue (hash-threads.ts: the next starts without waiting for the event loop). */
const threads = new HashThreads(MAX_CONCURRENT, PARAMS);

function busy(): AppError {
  return new AppError(429, 'too_many_requests', 'The server is checking too many passwords at once; try again in a second', undefined, { 'Retry-After': '1' });
}

/**
 * One check: on libuv's pool while a slot is free, on the hashing threads once checks queue (and while
 * they run, so that they stay one queue), on libuv's pool again, with waiting, if the threads failed.
 */
async function check(job: HashJob): Promise<string | boolean> {
  if (threads.usable && (threads.started || running >= MAX_CONCURRENT)) {
    if (threads.outstanding + running >= MAX_CONCURRENT + MAX_WAITING) throw busy();
    try {
      return await threads.run(job);
    } catch (err) {
      if (!(err instanceof HashThreadsFailed)) throw err;
    }
  }
  if (running >= MAX_CONCURRENT) {
    if (waiting.length >= MAX_WAITING) throw busy();
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
  running++;
  try {
    return await (job.op === 'hash' ? hash(job.password, PARAMS) : verify(job.stored, job.password));
  } finally {
    running--;
    waiting.shift()?.();
  }
}

export async function hashPassword(password: string): Promise<string> {
  return (await check({ op: 'hash', password })) as string;
}

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    return (await check({ op: 'verify', stored, password })) === true;
  } catch (err) {
    if (err instanceof AppError) throw err; // busy: 429
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
