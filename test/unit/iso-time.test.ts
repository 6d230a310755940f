import { describe, expect, it, vi } from 'vitest';
import { isoTime } from '../../src/http/iso-time.ts';

describe('isoTime', () => {
  it('formats exactly as Date#toISOString, on table hits, misses and slot collisions', () => {
    const now = Date.now();
    const times = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 59_999, 86_399_999, 951_782_400_000, now, now + 86_400_000, 253_402_300_799_999];
    // Same slot, different seconds (127 s apart), alternating: each must be formatted for its own second.
    for (let i = 0; i < 200; i++) times.push(now + (i % 2) * 127_000 + i, now - i * 1_234_567);
    for (const ms of times) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    for (const ms of times) expect(isoTime(ms)).toBe(new Date(ms).toISOString()); // again, from the table
  });

  it("keeps a session's creation and its expiry one day (or one hour) later in the table together", () => {
    const created = 1_764_036_000_123;
    for (const ttl of [86_400_000, 3_600_000, 604_800_000]) {
      const expires = created + ttl + 555;
      isoTime(created);
      isoTime(expires);
      const spy = vi.spyOn(Date.prototype, 'toISOString');
      try {
        for (let i = 0; i < 10; i++) expect([isoTime(created), isoTime(expires)]).toEqual([new Date(created).toJSON(), new Date(expires).toJSON()]);
        expect(spy.mock.calls.length).toBe(20); // only the toJSON() of the expectation itself
      } finally {
        spy.mockRestore();
      }
    }
  });

  it('leaves what the table does not cover to Date: before 1970, past 9999, fractions, and throws on NaN', () => {
    for (const ms of [-1, -62_198_755_200_000, 253_402_300_800_000, 1.5, 1_700_000_000_000.25]) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
  });
});
