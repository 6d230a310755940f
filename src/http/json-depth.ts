/** Nesting no request body and no provider answer needs; deeper is refused before it is parsed. */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether JSON text nests arrays or objects deeper than `max`, by one pass over its characters.
 * Parsing a megabyte of `[[[[…]]]]` and collecting it took ~0.8 s of the event loop per request
 * (20 at once: 10 s); this pass takes a few milliseconds and allocates nothing.
 */
export function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return false;
}

