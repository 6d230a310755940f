/**
 * A read-only look at a store's keyspace, for the admin's cache list (plugin `svc__cache`): keys by
 * SCAN with their type and TTL, and one key's contents read by its type. Both stores implement it
 * (`Store.inspect`), so a plugin never reaches for a store adapter or a Redis client itself. Nothing
 * here writes, and every read is bounded, so a huge key or keyspace cannot stall the store.
 */

/** One key as a page lists it: `type` and `ttl` as Redis `TYPE` and `TTL` say (`none` / -2: gone meanwhile). */
export interface InspectedKey {
  key: string;
  type: string;
  ttl: number;
}

/**
 * One key's contents by type. A string comes as text; the other types as their members. `size`: the
 * length the store reports (bytes of a string, elements of a collection); `cut`: the store holds more
 * than was read (a string beyond STRING_READ_CAP, a collection beyond COLLECTION_READ_CAP).
 */
export type InspectedEntry =
  | { type: 'string'; ttl: number; size: number; text: string; cut: boolean }
  | { type: 'hash'; ttl: number; size: number; fields: Record<string, string>; cut: boolean }
  | { type: 'list' | 'set'; ttl: number; size: number; members: string[]; cut: boolean }
  | { type: 'zset'; ttl: number; size: number; members: { member: string; score: number }[]; cut: boolean }
  | { type: string & {}; ttl: number; size: number; unsupported: true };

export interface ScanQuery {
  /** A Redis glob (`SCAN MATCH`); empty: every key. */
  pattern: string;
  offset: number;
  limit: number;
}

/** Read-only access to one store and db, opened for one request; the caller closes it. */
export interface StoreInspector {
  /**
   * The keys `offset` .. `offset + limit - 1` sorted by name (a Redis of more than SORTED_KEYSPACE_LIMIT
   * keys: in SCAN order), with type and TTL; `hasMore`: a next page exists.
   */
  scan(q: ScanQuery): Promise<{ items: InspectedKey[]; hasMore: boolean }>;
  /** One key's type, TTL and contents; null when it does not exist (or expired meanwhile). */
  read(key: string): Promise<InspectedEntry | null>;
  close(): void;
}

/** Largest string read from the store: enough to parse (and redact) any sane JSON document. */
export const STRING_READ_CAP = 4 * 1024 * 1024;
/** Elements read of a hash, list, set or sorted set; the transport cap cuts far earlier anyway. */
export const COLLECTION_READ_CAP = 1000;
