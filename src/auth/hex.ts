/** Lower-case hex digits, the form of SHA-256 digests and UUIDs as svc writes them. */
const DIGITS = '0123456789abcdef';
/** A digit's value by character code; -1: not a lower-case hex digit. */
const VALUES = new Int8Array(128).fill(-1);
for (let d = 0; d < 16; d++) VALUES[DIGITS.charCodeAt(d)] = d;

/** The value of the lower-case hex digit with this character code (`charCodeAt`), or -1. */
export const hexValue = (code: number): number => (code < 128 ? VALUES[code]! : -1);

/** Each lower-case hex digit's character code, by value (0-15). */
export const HEX_DIGIT_CODES = Uint8Array.from(DIGITS, (c) => c.charCodeAt(0));
