// The local caches' index (src/auth/digest-table.ts): SHA-256 hex digests to slot numbers, open-addressed.
// The table hashes on a digest's first 8 hex characters, so digests made here with the same first word
// share a home and form one cluster: the cases a real digest meets rarely, met on purpose.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DigestTable, NOT_A_DIGEST } from '../../src/auth/digest-table.ts';

/** A digest whose first word is `first` (its home: `first & (table size - 1)`), the rest from `name`. */
const digest = (first: number, name: string) => first.toString(16).padStart(8, '0') + createHash('sha256').update(name).digest('hex').slice(8);

/** A table for `slots` slots: its first table has 2 x `slots` places (for up to 1024 slots). */
const table = (slots: number) => new DigestTable(slots);

describe('DigestTable', () => {
  it('finds what was inserted, and nothing else', () => {
    const t = table(8);
    const a = createHash('sha256').update('a').digest('hex');
    expect(t.find(a)).toBe(-1);
    t.insert(a, 3);
    expect(t.find(a)).toBe(3);
    expect(t.find(createHash('sha256').update('b').digest('hex'))).toBe(-1);
  });

  it('a string that is no lower-case hex digest finds nothing and cannot be inserted', () => {
    const t = table(8);
    for (const s of ['', 'a', 'A'.repeat(64), 'g'.repeat(64), '0'.repeat(63), '0'.repeat(65), `${'0'.repeat(63)}é`]) {
      expect(t.find(s)).toBe(NOT_A_DIGEST);
      expect(() => t.insert(s, 0)).toThrow(/not a SHA-256 hex digest/);
    }
    expect(t.find('0'.repeat(64))).toBe(-1);
  });

  it('keeps a digest by its first 128 bits: a second half changed finds the same slot, a first half changed does not', () => {
    const t = table(8);
    const a = createHash('sha256').update('a').digest('hex');
    t.insert(a, 3);
    expect(t.find(a.slice(0, 32) + 'f'.repeat(32))).toBe(3);
    expect(t.find((a[0] === '0' ? '1' : '0') + a.slice(1))).toBe(-1);
    expect(t.find(a.slice(0, 31) + (a[31] === '0' ? '1' : '0') + a.slice(32))).toBe(-1);
  });

  it('one cluster: removing from its middle leaves the rest found (backward shift)', () => {
    const t = table(8); // 16 places
    const keys = Array.from({ length: 6 }, (_, i) => digest(5, `k${i}`));
    keys.forEach((k, slot) => t.insert(k, slot));
    t.remove(2);
    expect(t.find(keys[2]!)).toBe(-1);
    keys.forEach((k, slot) => slot !== 2 && expect(t.find(k)).toBe(slot));
    t.remove(0);
    t.remove(5);
    expect(keys.map((k) => t.find(k))).toEqual([-1, 1, -1, 3, 4, -1]);
  });

  it('a cluster that wraps round the table end', () => {
    const t = table(8); // 16 places: home 15, then 0, 1...
    const wrapped = Array.from({ length: 4 }, (_, i) => digest(15, `w${i}`));
    const atZero = digest(0, 'z'); // home 0, pushed on by the wrapped ones
    wrapped.forEach((k, slot) => t.insert(k, slot));
    t.insert(atZero, 4);
    t.remove(0); // the one at place 15: the others shift back across the end
    expect(t.find(wrapped[0]!)).toBe(-1);
    expect(wrapped.slice(1).map((k) => t.find(k))).toEqual([1, 2, 3]);
    expect(t.find(atZero)).toBe(4);
  });

  it('past the table end, an entry whose home is behind the gap stays where it is', () => {
    const t = table(8);
    const [x, y1, y2] = [digest(14, 'x'), digest(15, 'y1'), digest(15, 'y2')]; // places 14, 15, 0
    [x, y1, y2].forEach((k, slot) => t.insert(k, slot));
    t.remove(0); // the gap at 14: y1 (home 15) and y2 (home 15, at 0) must not move before their home
    expect([x, y1, y2].map((k) => t.find(k))).toEqual([-1, 1, 2]);
  });

  it('its table grows as entries come, and agrees with a Map over many random inserts and removals', () => {
    const t = table(20_000); // 2,048 places at first (1,024 entries); the 20,000 steps use fewer slots than that
    const model = new Map<string, number>();
    const free: number[] = [];
    let next = 0;
    let most = 0;
    let seed = 7;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 20_000; i++) {
      // Few homes: long clusters; many names: mostly inserts, and finds and removals of present keys.
      const key = digest(random(400), `n${random(3000)}`);
      const slot = model.get(key);
      if (slot === undefined) {
        const mine = free.pop() ?? next++;
        expect(t.find(key)).toBe(-1);
        t.insert(key, mine);
        model.set(key, mine);
        most = Math.max(most, model.size);
      } else if (random(3) !== 0) {
        expect(t.find(key)).toBe(slot);
      } else {
        t.remove(slot);
        model.delete(key);
        free.push(slot);
      }
    }
    expect(most).toBeGreaterThan(2 * 1024); // past two doublings of the table
    for (const [key, slot] of model) expect(t.find(key)).toBe(slot);
  });
});
