import * as v from 'valibot';

/** SPEC.md rule 1: the page sizes the widget offers; anything else is refused. */
export const PAGE_SIZES = ['25', '50', '100', '200', '500'] as const;

// Query values arrive as strings: each is checked as text, then turned into a number.
const db = v.optional(
  v.pipe(v.string(), v.regex(/^\d{1,2}$/, 'db must be 0 to 15'), v.transform(Number), v.maxValue(15, 'db must be 0 to 15')),
  '0',
);
// Any text: an id that no configured instance has is 404 `unknown_instance`, not a validation error.
const instance = v.optional(v.pipe(v.string(), v.minLength(1, 'instance must not be empty'), v.maxLength(100)), 'cache');

export const entriesQuery = v.object({
  /** Redis SCAN MATCH glob; empty lists every key. */
  pattern: v.optional(v.pipe(v.string(), v.maxLength(1024, 'pattern is at most 1024 characters')), ''),
  offset: v.optional(
    v.pipe(v.string(), v.regex(/^\d{1,9}$/, 'offset must be a non-negative integer'), v.transform(Number)),
    '0',
  ),
  limit: v.optional(v.pipe(v.string(), v.picklist(PAGE_SIZES, 'limit must be one of 25, 50, 100, 200, 500'), v.transform(Number)), '50'),
  db,
  instance,
});
export type EntriesQuery = v.InferOutput<typeof entriesQuery>;

export const entryQuery = v.object({
  key: v.pipe(v.string(), v.minLength(1, 'key is required'), v.maxLength(8192, 'key is at most 8192 characters')),
  db,
  instance,
});
export type EntryQuery = v.InferOutput<typeof entryQuery>;

/** One row of `cacheEntries`: `ttl` in seconds, -1 no expiry, -2 missing (gone since the scan). */
export interface EntrySummary {
  key: string;
  ttl: number;
  type: string;
}

/** `cacheEntry` (CONTRACT section 9). */
export interface CacheEntry extends EntrySummary {
  /** Bytes of a string; number of elements of a hash, list, set or sorted set. */
  size: number;
  value: string;
  valueParsed?: unknown;
  truncated?: true;
}
