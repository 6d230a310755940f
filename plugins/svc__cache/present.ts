import { LOOKS_JSON, parseStructured, redact, redactText } from './redact.ts';
import type { InspectedEntry } from '../../src/index.ts';
import type { CacheEntry } from './schemas.ts';

/** SPEC.md rule 6: values above 16 KiB (UTF-8 bytes) are cut for transport. */
export const TRANSPORT_LIMIT = 16 * 1024;

/** The first `limit` bytes of `text` as a string, never splitting a character. */
function cutBytes(text: string, limit: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= limit) return text;
  let end = limit;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // back off a continuation byte
  return bytes.subarray(0, end).toString('utf8');
}

/** The JSON form of a collection's contents; with `hide`, members that are JSON are redacted too. */
function contents(raw: Exclude<InspectedEntry, { type: 'string' } | { unsupported: true }>, hide: boolean): object {
  const text = (s: string) => (hide ? redactText(s) : s);
  if (raw.type === 'hash') {
    const fields = Object.entries(raw.fields).map(([field, value]): [string, string] => [field, text(value)]);
    const obj = Object.fromEntries(fields);
    return hide ? (redact(obj).value as object) : obj; // a field named `password` is a secret too
  }
  if (raw.type === 'zset') return raw.members.map(({ member, score }) => ({ member: text(member), score }));
  return raw.members.map(text);
}

/**
 * What `cacheEntry` answers for one key: JSON parsed on the server (a byte-order mark skipped,
 * double encoding unwrapped) and, unless secrets are shown, redacted in both `value` (re-serialized)
 * and `valueParsed`, plain text too (`password=...`, URL passwords); then cut at 16 KiB. A cut value has
 * no `valueParsed` (the structured form would carry the whole value past the transport limit).
 * A string too big to read whole cannot be parsed, so it cannot be redacted: when it looks like
 * JSON and secrets are hidden, its value is withheld rather than sent unredacted.
 */
export function presentEntry(key: string, raw: InspectedEntry, hideSecrets: boolean): CacheEntry {
  const head = { key, ttl: raw.ttl, type: raw.type, size: raw.size };
  if ('unsupported' in raw) return { ...head, value: '' };

  let value: string;
  let parsed: unknown;
  let cut = raw.cut;
  if (raw.type === 'string') {
    // Untouched text (JSON or not) keeps its original form; JSON is parsed after redaction.
    value = hideSecrets ? redactText(raw.text) : raw.text;
    if (raw.cut && hideSecrets && LOOKS_JSON.test(raw.text)) value = '';
    else if (!raw.cut) parsed = parseStructured(value);
  } else {
    parsed = contents(raw, hideSecrets);
    value = JSON.stringify(parsed);
  }

  if (Buffer.byteLength(value) > TRANSPORT_LIMIT) {
    value = cutBytes(value, TRANSPORT_LIMIT);
    cut = true;
  }
  if (cut) return { ...head, value, truncated: true };
  return { ...head, value, ...(parsed !== undefined ? { valueParsed: parsed } : {}) };
}
