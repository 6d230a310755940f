import { describe, expect, it } from 'vitest';
import { isoTime } from '../../src/http/iso-time.ts';

describe('isoTime', () => {
  it('formats exactly as Date#toISOString, on table hits, misses and slot collisions', () => {
    const now = Date.now();
    const times = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 59_999, 86_399_999, 951_782_400_000, now, now + 86_400_000, 253_402_300_799_999];
    // Same slot, different seconds (64 s apart), alternating: each must be formatted for its own second.
    for (let i = 0; i < 200; i++) times.push(now + (i % 2) * 64_000 + i, now - i * 1_234_567);
    for (const ms of times) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    for (const ms of times) expect(isoTime(ms)).toBe(new Date(ms).toISOString()); // again, from the table
  });

  it('leaves what the table does not cover to Date: before 1970, past 9999, fractions, and throws on NaN', () => {
    for (const ms of [-1, -62_198_755_200_000, 253_402_300_800_000, 1.5, 1_700_000_000_000.25]) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
  });
});
