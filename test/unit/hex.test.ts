import { describe, expect, it } from 'vitest';
import { HEX_DIGIT_CODES, hexValue } from '../../src/auth/hex.ts';

describe('hexValue', () => {
  it('reads the sixteen lower-case digits, and nothing else', () => {
    const read = new Map<string, number>();
    for (let code = 0; code < 0x3000; code++) {
      const value = hexValue(code);
      if (value >= 0) read.set(String.fromCharCode(code), value);
    }
    expect(Object.fromEntries(read)).toEqual(Object.fromEntries([...'0123456789abcdef'].map((c, i) => [c, i])));
    // Upper case, the characters either side of each range, and NaN (charCodeAt past the end).
    for (const c of 'ABCDEF/:`g-') expect(hexValue(c.charCodeAt(0))).toBe(-1);
    expect(hexValue(''.charCodeAt(0))).toBe(-1);
  });

  it('HEX_DIGIT_CODES writes each value back as its digit', () => {
    for (let v = 0; v < 16; v++) expect(hexValue(HEX_DIGIT_CODES[v]!)).toBe(v);
    expect(Buffer.from(HEX_DIGIT_CODES).toString('latin1')).toBe('0123456789abcdef');
  });
});
