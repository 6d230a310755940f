// Password checks side by side (src/auth/passwords.ts) and the threads they queue on (src/auth/hash-threads.ts).
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { HashThreads, HashThreadsFailed } from '../../src/auth/hash-threads.ts';
import { hashPassword, hasCharacters, verifyPassword } from '../../src/auth/passwords.ts';
import { AppError } from '../../src/http/errors.ts';

const PARAMS = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 };

describe('hasCharacters: the length of a new password as a person counts it', () => {
  it('printable ASCII by its length; emoji, combining marks and CR LF by their graphemes', () => {
    expect(hasCharacters('abcdefgh', 8)).toBe(true);
    expect(hasCharacters('abc defg', 8)).toBe(true);
    expect(hasCharacters('abcdefg', 8)).toBe(false);
    expect(hasCharacters('😀'.repeat(4), 8)).toBe(false); // 8 UTF-16 units, 4 characters
    expect(hasCharacters('😀'.repeat(8), 8)).toBe(true);
    expect(hasCharacters('a\u0301'.repeat(4), 8)).toBe(false); // 4 accented letters in 8 units
    expect(hasCharacters('\r\n'.repeat(4), 8)).toBe(false); // CR LF is one character
    expect(hasCharacters('abcdefg\u0301', 8)).toBe(false);
  });
});

describe('password checks', () => {
  it('side by side: each answers for its own password, a malformed hash is false, and past (cores - 1) x 17 at once 429', async () => {
    const stored = await hashPassword('correct horse battery');
    const bound = Math.max(1, availableParallelism() - 1) * 17;
    const n = bound + 10;
    const guess = (i: number) => (i % 3 === 0 ? 'wrong password' : 'correct horse battery');
    const hashOf = (i: number) => (i % 7 === 0 ? '$argon2id$broken' : stored);
    const results = await Promise.allSettled(Array.from({ length: n }, (_, i) => verifyPassword(hashOf(i), guess(i))));
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused).toHaveLength(n - bound);
    for (const r of refused) expect((r as PromiseRejectedResult).reason).toMatchObject({ status: 429, code: 'too_many_requests' } satisfies Partial<AppError>);
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') expect(r.value, `check ${i}`).toBe(i % 7 !== 0 && i % 3 !== 0);
    });
    // The checks are accepted in the order they came: the first `bound` ones.
    expect(results.slice(0, bound).every((r) => r.status === 'fulfilled')).toBe(true);
    // And a new one is taken once they are done.
    expect(await verifyPassword(stored, 'correct horse battery')).toBe(true);
  });
});

describe('hashing threads', () => {
  it('hash and verify on a thread; an idle thread stops, and starts again when asked', async () => {
    const threads = new HashThreads(1, PARAMS, { idleMs: 100 });
    expect(threads.started).toBe(false);
    const stored = (await threads.run({ op: 'hash', password: 'pw one two' })) as string;
    expect(stored).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(threads.started).toBe(true);
    expect(await threads.run({ op: 'verify', stored, password: 'pw one two' })).toBe(true);
    expect(await threads.run({ op: 'verify', stored, password: 'pw one three' })).toBe(false);
    await expect(threads.run({ op: 'verify', stored: 'not a hash', password: 'x' })).rejects.toThrow();
    await expect.poll(() => threads.started, { timeout: 5000, interval: 50 }).toBe(false);
    expect(await threads.run({ op: 'verify', stored, password: 'pw one two' })).toBe(true);
    expect(threads.usable).toBe(true);
  });

  it('a thread that dies fails its checks with HashThreadsFailed, and the threads are not used again', async () => {
    const crashing = `require('node:worker_threads').parentPort.on('message', () => process.exit(3));`;
    const threads = new HashThreads(1, PARAMS, { source: crashing });
    await expect(threads.run({ op: 'hash', password: 'pw one two' })).rejects.toBeInstanceOf(HashThreadsFailed);
    expect(threads.usable).toBe(false);
    expect(threads.started).toBe(false);
    await expect(threads.run({ op: 'hash', password: 'pw one two' })).rejects.toBeInstanceOf(HashThreadsFailed);
  });
});
