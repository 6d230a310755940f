import { Buffer } from 'node:buffer';
import { randomFillSync } from 'node:crypto';
import { HEX_DIGIT_CODES } from './auth/hex.ts';

/**
 * Random bytes drawn in blocks and handed out 16 at a time (as Node's own `randomUUID` does): a
 * `randomBytes(16)` call cost about 6 µs.
 */
const pool = Buffer.alloc(16 * 256);
let poolAt = pool.length;

/** Where the next 16 random bytes are in `pool`; each is handed out once. */
function next16(): number {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += 16;
  return at;
}

/** 16 random bytes of its own (a copy: the caller may change them). */
export function random16(): Buffer {
  const at = next16();
  return Buffer.from(pool.subarray(at, at + 16));
}

/** Where a UUID's 36 characters are written before they become a string. */
const scratch = Buffer.alloc(36);

/**
 * The 16 bytes at `at` as a UUID's text (8-4-4-4-12 lower-case hex digits), made as one string. Why not
 * by concatenation (Node's `randomUUID`, a template): the text is then a tree of about 15 strings, 0.5 KB
 * a request for the `X-Request-Id` of every answer, which V8 copies at each young-generation collection
 * while the answer waits to be written (docs/benchmarks.md, "What an answer keeps alive").
 */
export function uuidText(bytes: Uint8Array, at = 0): string {
  const out = scratch;
  let j = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) out[j++] = 0x2d;
    const byte = bytes[at + i]!;
    out[j++] = HEX_DIGIT_CODES[byte >> 4]!;
    out[j++] = HEX_DIGIT_CODES[byte & 15]!;
  }
  return out.toString('latin1', 0, 36);
}

/** A random UUID (version 4, RFC 9562 section 5.4), as `crypto.randomUUID()` makes it, as one string (`uuidText`). */
export function randomUuid(): string {
  const at = next16();
  pool[at + 6] = 0x40 | (pool[at + 6]! & 0x0f);
  pool[at + 8] = 0x80 | (pool[at + 8]! & 0x3f);
  return uuidText(pool, at);
}
