import type { EntrySummary } from './schemas.ts';

/**
 * One key as read from a store, before presentation (truncation, JSON, redaction). A string comes
 * as text; the other types as the JSON form of their contents. `cut`: the store holds more than was
 * read (a string beyond the read cap, a collection beyond its first elements).
 */
export type RawEntry =
  | { type: 'string'; ttl: number; size: number; text: string; cut: boolean }
  | { type: 'hash'; ttl: number; size: number; fields: Record<string, string>; cut: boolean }
  | { type: 'list' | 'set'; ttl: number; size: number; members: string[]; cut: boolean }
  | { type: 'zset'; ttl: number; size: number; members: { member: string; score: number }[]; cut: boolean }
  | { type: string & {}; ttl: number; size: number; unsupported: true };

export interface PageQuery {
  pattern: string;
  offset: number;
  limit: number;
}

/** Read-only access to one store instance and db, for the time of one request. */
export interface CacheReader {
  /** The keys `offset` .. `offset + limit - 1` in scan order, with type and TTL. */
  page(q: PageQuery): Promise<{ items: EntrySummary[]; hasMore: boolean }>;
  /** One key; null when it does not exist (or expired meanwhile). */
  entry(key: string): Promise<RawEntry | null>;
  close(): void;
}

/** Largest string read from the store: enough to parse (and redact) any sane JSON document. */
export const STRING_READ_CAP = 4 * 1024 * 1024;
/** Elements read of a hash, list, set or sorted set; the transport cap cuts far earlier anyway. */
export const COLLECTION_READ_CAP = 1000;
