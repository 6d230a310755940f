import type { SessionRecord } from './sessions.ts';

interface Entry {
  record: SessionRecord;
  /** When it was read from the store (epoch ms): entries older than the hard age are read again. */
  readAt: number;
}

/**
 * `auth.session.localCache`: recently used session records in this process, kept exact by the store.
 * Redis tells every instance which session keys changed or went (`Store.track`: a logout, logout-all,
 * password change, demotion, deletion or expiry on ANY instance), and the entry goes at once. Rules
 * that keep it exact:
 * - Nothing is served while invalidations may be missed (`live` false: connection lost, not yet set
 *   up); going offline drops everything.
 * - A read that an invalidation overtakes is not kept: the invalidation for a key can arrive on the
 *   tracking connection before the reply of a read that returns the old value (Redis's "caching in
 *   progress" race), so a read is kept only if no invalidation of its key arrived since it started.
 * - Entries are served for at most `maxAgeMs` after their read: a bound on any failure the connection
 *   does not report (a half-open socket).
 * Bounded by count (least recently used out first); `Map` keeps insertion order, a hit re-inserts.
 */
export class SessionCache {
  private readonly entries = new Map<string, Entry>();
  /** hash -> the token of the read in flight; an invalidation deletes it. */
  private readonly reading = new Map<string, object>();
  private live = false;

  constructor(
    private readonly maxEntries: number,
    private readonly maxAgeMs: number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The cached record, or undefined: not cached, too old, or the cache is not live. */
  get(hash: string, now: number): SessionRecord | undefined {
    const entry = this.entries.get(hash);
    if (!entry) return undefined;
    this.entries.delete(hash);
    if (now - entry.readAt >= this.maxAgeMs) return undefined;
    this.entries.set(hash, entry);
    return entry.record;
  }

  /** Marks a store read of `hash` as started; the token goes to `finish`. Null: nothing will be kept. */
  begin(hash: string): object | null {
    if (!this.live) return null;
    const token = {};
    this.reading.set(hash, token);
    return token;
  }

  /** Keeps what the read found (null: no session) unless an invalidation came between begin and now. */
  finish(hash: string, token: object, record: SessionRecord | null, readAt: number): void {
    if (this.reading.get(hash) !== token) return;
    this.reading.delete(hash);
    if (!record || !this.live) return;
    this.entries.set(hash, { record, readAt });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  /** Forgets one session: its key changed or went, here or elsewhere. */
  evict(hash: string): void {
    this.entries.delete(hash);
    this.reading.delete(hash);
  }

  /** Tracking on or off; either way, what was kept is no longer trusted. */
  setLive(on: boolean): void {
    this.live = on;
    this.clear();
  }

  clear(): void {
    this.entries.clear();
    this.reading.clear();
  }
}
