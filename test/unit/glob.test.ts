// The embedded store's SCAN MATCH (the cache list of svc__cache reads it through `Store.inspect`).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { globMatch } from '../../src/store/glob.ts';

describe('globMatch', () => {
  it('Redis globs for the embedded store (redis util.c stringmatchlen)', () => {
    const cases: [string, string, boolean][] = [
      ['auth:*', 'auth:session:1', true],
      ['a?c', 'abc', true],
      ['a[bx]c', 'axc', true],
      ['a[^b]c', 'abc', false],
      ['a\\*', 'a*', true],
      ['a\\*', 'ab', false],
      ['x.y', 'xzy', false],
      // A range written backwards is the same range, as in Redis.
      ['a[z-x]c', 'ayc', true],
      ['a[z-x]c', 'abc', false],
      ['[ K- ]', 'A', true],
      ['[a-]', '-', false], // the range a..] (taken backwards): Redis 7 lists `]` and `a` here, not `-`
      ['[a-]', ']', true],
      // Where the RegExp translation differed from Redis (issue 35 finding 8; checked against a real Redis in test/e2e/cache.test.ts).
      ['[\\]]', ']', true],
      ['[\\]]', '\\', false],
      ['[]a]', ']', false],
      ['[]a]', ']a]', false],
      ['[]a]', 'a', false],
      ['[ab', 'a', true],
      ['[ab', 'c', false],
      ['x[', 'x', false],
      ['?', 'é', false], // one byte, like Redis
      ['??', 'é', true],
    ];
    for (const [glob, key, expected] of cases) expect(globMatch(glob, key), `${glob} ~ ${key}`).toBe(expected);
  });

  it('any glob is safe to match (no pattern an admin types can fail or hang the embedded store)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('[', ']', '-', '^', '\\', '*', '?', 'a', 'z', 'K', ' ', '.') }), fc.string({ maxLength: 12 }), (glob, key) => {
        expect(typeof globMatch(glob, key)).toBe('boolean');
      }),
      { numRuns: 2000 },
    );
    expect(globMatch('*a'.repeat(50) + 'b', 'a'.repeat(200))).toBe(false); // backtracking cut short, as in Redis
  });
});
