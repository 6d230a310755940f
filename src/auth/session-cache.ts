import type { SessionRecord } from '../http/env.ts';

/** Second chances one eviction may give before the oldest entry goes anyway. */
const SWEEP_STEPS = 32;

/** The periodic writes an entry remembers (`SessionCache.due`). */
type Stamp = 'pushedAt' | 'seenAt';

/**
 * The times of an entry are milliseconds since the cache's `base` (its first use), not since the epoch:
 * small integers, which V8 keeps inside the object, where an epoch time is a number object of its own
 * (three per entry; measured: 3 MB less live heap per 100,000 cached sessions). Past 24 days of uptime they are
 * number objects again, as correct, only larger.
 */
interface Entry<R> {
  /** Null until read, and again once Redis says the key changed. */
  record: R | null;
  /** When `record` was read from the store (ms since `base`): records older than the hard age are read again. */
  readAt: number;
  /** When this instance last pushed the session's sliding TTL (ms since `base`); survives invalidations. */
  pushedAt: number | undefined;
  /** When this instance last wrote the session's "last seen" (ms since `base`); survives invalidations. */
  seenAt: number | undefined;
  /** Served since the eviction sweep last passed it (its second chance: see `add`). */
  used: boolean;
}

/**
 * Every field set from the start, so V8 keeps them all inside the object: stamps added later would
 * go to a separate property array (measured: 38 bytes more per cached session).
 */
function newEntry<R>(record: R | null, readAt: number): Entry<R> {
  return { record, readAt, pushedAt: undefined, seenAt: undefined, used: false };
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
 * It also remembers when this instance last pushed each sliding TTL (`touchInterval`) and wrote each
 * "last seen", in the same entry: one map, one key string per session (100,000 sessions: see
 * bench/session-cache-memory.ts). API key records (auth/api-keys.ts) are kept the same way, in a cache of their own.
 * Bounded by count, evicting with the CLOCK rule (an LRU approximation): `Map` keeps insertion order,
 * a use only flags its entry, and when the cache is full the oldest entry goes unless it was used
 * since, in which case it loses its flag and moves to the young end. A use costs no Map write
 * (moving the entry on every use cost a hot session about half a microsecond per request).
 */
export class SessionCache<R = SessionRecord> {
  private readonly entries = new Map<string, Entry<R>>();
  /** hash -> the token of the read in flight; an invalidation deletes it. */
  private readonly reading = new Map<string, object>();
  private live = false;
  /** The epoch time the entries' times count from (`Entry`): the `now` of the first call. */
  private base: number | undefined;

  constructor(
    private readonly maxEntries: number,
    private readonly maxAgeMs: number,
  ) {}

  /** The cached record, or undefined: not cached, too old, or the cache is not live. */
  get(hash: string, now: number): R | undefined {
    const entry = this.entries.get(hash);
    if (!entry?.record) return undefined;
    if (this.since(now) - entry.readAt >= this.maxAgeMs) {
      entry.record = null;
      return undefined;
    }
    entry.used = true;
    return entry.record;
  }

  /**
   * Whether this instance should do a periodic write for the session now (push its TTL: `pushedAt`;
   * write its "last seen": `seenAt`), not done within `intervalMs`; if so, counts it as done.
   */
  due(hash: string, stamp: Stamp, now: number, intervalMs: number): boolean {
    const entry = this.entries.get(hash) ?? this.add(hash, newEntry<R>(null, 0));
    const last = entry[stamp];
    const at = this.since(now);
    if (last !== undefined && at - last < intervalMs) return false;
    entry[stamp] = at;
    return true;
  }

  /** When this instance last pushed the session's TTL (epoch ms). */
  pushedAt(hash: string): number | undefined {
    const at = this.entries.get(hash)?.pushedAt;
    return at === undefined ? undefined : at + this.base!;
  }

  /** `now` (epoch ms) as the entries keep times: ms since `base`. */
  private since(now: number): number {
    return now - (this.base ??= now);
  }

  /** The write counted by `due` failed: due again on the next request. */
  failed(hash: string, stamp: Stamp): void {
    const entry = this.entries.get(hash);
    if (entry) entry[stamp] = undefined;
  }

  /** Marks a store read of `hash` as started; the token goes to `finish`. Null: nothing will be kept. */
  begin(hash: string): object | null {
    if (!this.live) return null;
    const token = {};
    this.reading.set(hash, token);
    return token;
  }

  /** Keeps what the read found (null: no session) unless an invalidation came between begin and now; `readAt`: epoch ms. */
  finish(hash: string, token: object, record: R | null, readAt: number): void {
    if (this.reading.get(hash) !== token) return;
    this.reading.delete(hash);
    if (!record || !this.live) return;
    const entry = this.entries.get(hash);
    const at = this.since(readAt);
    if (entry) {
      entry.record = record;
      entry.readAt = at;
    } else this.add(hash, newEntry(record, at));
  }

  /** Redis says the key changed or went (here or elsewhere): its record is no longer trusted. */
  invalidate(hash: string): void {
    const entry = this.entries.get(hash);
    if (entry) entry.record = null;
    this.reading.delete(hash);
  }

  /** The session ended here: nothing of it is kept. */
  forget(hash: string): void {
    this.entries.delete(hash);
    this.reading.delete(hash);
  }

  /** Tracking on or off; either way, what was kept is no longer trusted. */
  setLive(on: boolean): void {
    this.live = on;
    this.clear();
  }

  clear(): void {
    for (const entry of this.entries.values()) entry.record = null;
    this.reading.clear();
  }

  private add(hash: string, entry: Entry<R>): Entry<R> {
    // Room first (the new entry is never the one to go): the oldest entry goes, unless used since
    // the sweep last passed it; then it moves to the young end without its flag, and the next oldest
    // is looked at. Each use buys one pass. At most SWEEP_STEPS second chances per eviction, so that a
    // full cache of hot sessions costs one request a few microseconds, not a walk over all of them.
    for (let step = 0; this.entries.size >= this.maxEntries; step++) {
      const [oldest, first] = this.entries.entries().next().value!;
      this.entries.delete(oldest);
      if (!first.used || step >= SWEEP_STEPS) break;
      first.used = false;
      this.entries.set(oldest, first);
    }
    this.entries.set(hash, entry);
    return entry;
  }
}
