/**
 * Redis's glob matcher, `stringmatchlen` of redis/src/util.c (7.x), ported line for line so the
 * embedded store lists exactly the keys `SCAN MATCH` lists on Redis, odd patterns included: `\x`
 * inside a class is `x` (`[\]]` matches `]`), `]` right after `[` closes an empty class (`[]a]`
 * matches nothing), an unclosed `[abc` is the class `[abc]`, a backwards range `[z-a]` is `[a-z]`.
 * Like Redis it compares bytes (UTF-8), so `?` is one byte. A RegExp translation got these wrong.
 */

/** Redis gives up on patterns nested this deep (a `*` is one level): no match, not a stack overflow. */
const MAX_NESTING = 1000;
const STAR = 0x2a;
const QUESTION = 0x3f;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const BACKSLASH = 0x5c;
const CARET = 0x5e;
const DASH = 0x2d;

/** A byte as C's (signed) `char` holds it: Redis compares range bounds that way. */
const signed = (byte: number): number => (byte << 24) >> 24;

function matchAt(p: Buffer, pi: number, s: Buffer, si: number, state: { skipLonger: boolean }, nesting: number): boolean {
  if (nesting > MAX_NESTING) return false;
  while (pi < p.length && si < s.length) {
    switch (p[pi]) {
      case STAR: {
        while (pi + 1 < p.length && p[pi + 1] === STAR) pi++;
        if (pi + 1 === p.length) return true;
        while (si < s.length) {
          if (matchAt(p, pi + 1, s, si, state, nesting + 1)) return true;
          if (state.skipLonger) return false;
          si++;
        }
        // No match for the rest of the pattern anywhere in the rest of the string: an earlier `*`
        // taking more of the string cannot help either.
        state.skipLonger = true;
        return false;
      }
      case QUESTION:
        si++;
        break;
      case OPEN: {
        pi++;
        const not = p[pi] === CARET;
        if (not) pi++;
        let match = false;
        for (;;) {
          if (p[pi] === BACKSLASH && p.length - pi >= 2) {
            pi++;
            if (p[pi] === s[si]) match = true;
          } else if (p[pi] === CLOSE) {
            break;
          } else if (pi >= p.length) {
            pi--; // an unclosed class ends with the pattern
            break;
          } else if (p.length - pi >= 3 && p[pi + 1] === DASH) {
            let start = signed(p[pi]!);
            let end = signed(p[pi + 2]!);
            if (start > end) [start, end] = [end, start];
            const c = signed(s[si]!);
            pi += 2;
            if (c >= start && c <= end) match = true;
          } else if (p[pi] === s[si]) {
            match = true;
          }
          pi++;
        }
        if (not) match = !match;
        if (!match) return false;
        si++;
        break;
      }
      default:
        if (p[pi] === BACKSLASH && p.length - pi >= 2) pi++;
        if (p[pi] !== s[si]) return false;
        si++;
        break;
    }
    pi++;
    if (si === s.length) {
      while (p[pi] === STAR) pi++;
      break;
    }
  }
  return pi >= p.length && si === s.length;
}

/** Whether `key` matches the Redis glob `pattern` (as `SCAN ... MATCH pattern` decides). */
export function globMatch(pattern: string, key: string): boolean {
  return matchAt(Buffer.from(pattern), 0, Buffer.from(key), 0, { skipLonger: false }, 0);
}
