import { describe, expect, it } from 'vitest';
import { random16, randomUuid, uuidText } from '../../src/uuid.ts';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('randomUuid (the X-Request-Id svc makes)', () => {
  it('is a version 4, variant 10 UUID, never the same twice over several blocks of random bytes', () => {
    const ids = Array.from({ length: 5000 }, randomUuid);
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('has every random digit take every value (no byte left zero or repeated from the block)', () => {
    const ids = Array.from({ length: 2000 }, randomUuid);
    for (let at = 0; at < 36; at++) {
      if ([8, 13, 14, 18, 19, 23].includes(at)) continue; // the dashes, the version digit, the variant digit
      expect(new Set(ids.map((id) => id[at])).size, `digit ${at}`).toBe(16);
    }
    // The variant digit: 8, 9, a or b, each.
    expect(new Set(ids.map((id) => id[19]))).toEqual(new Set(['8', '9', 'a', 'b']));
  });

  it('shares its random bytes with random16 without handing any out twice', () => {
    const copies = Array.from({ length: 600 }, () => [random16().toString('hex'), randomUuid().replaceAll('-', '')]).flat();
    expect(new Set(copies).size).toBe(copies.length);
  });
});

describe('uuidText', () => {
  it('writes 16 bytes as 8-4-4-4-12 lower-case hex digits, from any offset', () => {
    const bytes = Buffer.from('ff00112233445566778899aabbccddeeff01', 'hex');
    expect(uuidText(bytes)).toBe('ff001122-3344-5566-7788-99aabbccddee');
    expect(uuidText(bytes, 2)).toBe('11223344-5566-7788-99aa-bbccddeeff01');
  });
});
