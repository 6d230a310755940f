// Ids kept by slot without a string each (src/auth/packed-ids.ts): every id comes back as it was given,
// whichever form it was kept in.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PackedIds } from '../../src/auth/packed-ids.ts';

describe('PackedIds', () => {
  const ids = [
    randomUUID(),
    '00000000-0000-0000-0000-000000000000',
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
    '0123abcd-4567-89ef-0a1b-2c3d4e5f6789',
    'F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6', // upper case: a string
    'f81d4fae-7dec-11d0-a765-00a0c91e6bfg', // not hex
    'f81d4fae07dec-11d0-a765-00a0c91e6bf6', // a digit where a dash goes
    'f81d4fae-7dec-11d0-a765-00a0c91e6bf', // 35 characters
    'user-12345',
    'a',
    '1234567890123456', // 16: packed
    '12345678901234567', // 17: a string
    'café', // Latin-1
    'zoë-ünïcödé', // Latin-1 too
    'user-Ω', // beyond Latin-1: a string
    '😀',
    '65f1c0ffee0123456789abcd', // a MongoDB ObjectId's hex: a string (24 characters)
  ];

  it('gives back every id as it was given', () => {
    const packed = new PackedIds(ids.length);
    ids.forEach((id, slot) => packed.put(slot, id));
    expect(ids.map((_, slot) => packed.get(slot))).toEqual(ids);
  });

  it('a slot given another id, of another form, gives back the new one; a dropped string is let go', () => {
    const packed = new PackedIds(2);
    const uuid = randomUUID();
    for (const [first, second] of [
      ['user-Ω', uuid],
      [uuid, 'user-Ω'],
      ['short', '😀'],
      ['😀', 'short'],
      ['a-long-id-of-twenty-chars', 'another-long-id-of-thirty-chars'],
    ] as const) {
      packed.put(0, first);
      packed.put(1, 'neighbour');
      packed.put(0, second);
      expect([packed.get(0), packed.get(1)]).toEqual([second, 'neighbour']);
    }
    packed.put(1, '😀');
    packed.drop(1);
    packed.put(1, 'b');
    expect(packed.get(1)).toBe('b');
    // What it holds as strings (nothing but slot 0's last, which is one): none left behind by a drop.
    expect((packed as unknown as { others: Map<number, string> }).others.size).toBe(1);
  });

  it('thousands of random UUIDs come back exact', () => {
    const packed = new PackedIds(5000);
    const given = Array.from({ length: 5000 }, () => randomUUID());
    given.forEach((id, slot) => packed.put(slot, id));
    expect(given.every((id, slot) => packed.get(slot) === id)).toBe(true);
  });
});
