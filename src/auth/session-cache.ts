import type { SessionRecord } from '../http/env.ts';
import { DigestTable, NOT_A_DIGEST } from './digest-table.ts';
import { PackedIds } from './packed-ids.ts';

/** Second chances one eviction may give before the entry under the hand goes anyway. */
const SWEEP_STEPS = 32;

/** The periodic writes an entry remembers (`SessionCache.due`). */
type Stamp = 'pushedAt' | 'seenAt';

/** A slot's times (`SessionCache.times`, three per slot): when its record was read, its TTL pushed, its "last seen" written. */
const READ = 0;
const PUSHED = 1;
const SEEN = 2;
/** A slot's flags (`SessionCache.flags`): its record is kept; served since the eviction sweep last passed it. */
const HELD = 1;
const USED = 2;
/**
 * Where a cache keeps its records, by slot number (`SessionCache`). The default keeps each record as it
 * was given (`ObjectSlots`); a store that knows the record's shape keeps its fields in columns instead
 * (`SessionRecordSlots`), and hands out a new object on each `get`.
 */
export interface RecordSlots<R> {
  /** Room for slots 0 to `slots - 1`: called once, before any `put`. */
  reserve(slots: number): void;
  put(slot: number, record: R): void;
  get(slot: number): R;
  /** The slot's record is no longer kept: let go of what it references. */
  drop(slot: number): void;
}

/** Records kept as they were given: one object each (API key records). */
export class ObjectSlots<R> implements RecordSlots<R> {
  private readonly records: (R | undefined)[] = [];
  reserve(): void {}
  put(slot: number, record: R): void {
    this.records[slot] = record;
  }
  get(slot: number): R {
    return this.records[slot]!;
  }
  drop(slot: number): void {
    this.records[slot] = undefined;
  }
}

/** `SessionRecordSlots`' flags. */
const ADMIN = 1;
const TOTP = 2;
/** Distinct provider names numbered (`SessionRecordSlots`: 1 to 255, in a byte); past them, a name is kept by slot. */
const PROVIDER_NAMES = 255;

/**
 * Session records (CONTRACT section 3's fields) in columns, as the cache keeps them for
 * `auth.session.localCache`: per slot the user id packed (`PackedIds`: a UUID in 16 bytes), the
 * provider name's number (one string per distinct name, numbered in a byte), the two epoch times in a
 * Float64Array and the two flags in a byte. A parsed record is an object, two heap numbers and the
 * strings; kept as such, 100,000 cached sessions held about 10 MB more, and their user ids as strings
 * 2.3 MB more (bench/session-cache-memory.ts). `get` builds the record again (what a request reads of
 * it: `sessionOf` in sessions.ts).
 */
export class SessionRecordSlots implements RecordSlots<SessionRecord> {
  private userIds = new PackedIds(0);
  /** The provider name's number per slot (`names`); 0: the name is in `otherProviders`. */
  private providerNumbers = new Uint8Array(0);
  /** Provider names by number (0 unused). */
  private readonly names: string[] = [''];
  private readonly numbers = new Map<string, number>();
  /** Names past the numbered ones, by slot. */
  private readonly otherProviders = new Map<number, string>();
  /** createdAt, expiresAt: two per slot. */
  private times = new Float64Array(0);
  /** ADMIN | TOTP. */
  private bits = new Uint8Array(0);

  reserve(slots: number): void {
    this.userIds = new PackedIds(slots);
    this.providerNumbers = new Uint8Array(slots);
    this.times = new Float64Array(slots * 2);
    this.bits = new Uint8Array(slots);
  }

  put(slot: number, record: SessionRecord): void {
    this.userIds.put(slot, record.userId);
    const number = this.number(record.provider);
    this.providerNumbers[slot] = number;
    if (number === 0) this.otherProviders.set(slot, record.provider);
    else this.otherProviders.delete(slot);
    this.times[slot * 2] = record.createdAt;
    this.times[slot * 2 + 1] = record.expiresAt;
    this.bits[slot] = (record.isAdmin ? ADMIN : 0) | (record.totp ? TOTP : 0);
  }

  get(slot: number): SessionRecord {
    const bits = this.bits[slot]!;
    const userId = this.userIds.get(slot);
    const isAdmin = (bits & ADMIN) !== 0;
    const number = this.providerNumbers[slot]!;
    const provider = number !== 0 ? this.names[number]! : this.otherProviders.get(slot)!;
    const createdAt = this.times[slot * 2]!;
    const expiresAt = this.times[slot * 2 + 1]!;
    return bits & TOTP ? { userId, isAdmin, provider, createdAt, expiresAt, totp: true } : { userId, isAdmin, provider, createdAt, expiresAt };
  }

  drop(slot: number): void {
    this.userIds.drop(slot);
    if (this.providerNumbers[slot] === 0) this.otherProviders.delete(slot);
  }

  /** The provider name's number, numbering it if there is room; 0: none. */
  private number(provider: string): number {
    const known = this.numbers.get(provider);
    if (known !== undefined) return known;
    if (this.names.length > PROVIDER_NAMES) return 0;
    this.numbers.set(provider, this.names.length);
    this.names.push(provider);
    return this.names.length - 1;
  }
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
 * "last seen", beside the record. No object per entry: the hash (a SHA-256 digest, 64 hex characters)
 * lists the entry's slot in a `DigestTable` (32 bytes in a typed column), and the slot's columns hold
 * three epoch times in a Float64Array, the flags in a byte, and the record in `records` (sessions:
 * `SessionRecordSlots`, columns too). 100,000 sessions: bench/session-cache-memory.ts. API key records
 * (auth/api-keys.ts) are kept the same way, in a cache of their own, as objects (`ObjectSlots`). A hash
 * that is no digest (nothing svc hashes) finds nothing and keeps nothing.
 * Bounded by count, evicting with the CLOCK rule (an LRU approximation): a use only flags its entry; when
 * the cache is full, a hand goes round the slots, and the entry under it goes unless it was used since the
 * hand last passed, in which case it loses its flag and the hand moves on. A use costs no write beyond its
 * flag (moving the entry on every use cost a hot session about half a microsecond per request).
 */
export class SessionCache<R = SessionRecord> {
  /** hash -> its slot in the columns below. */
  private readonly index: DigestTable;
  /** The eviction sweep's next slot (`add`). */
  private hand = 0;
  /** hash -> the token of the read in flight; an invalidation deletes it. */
  private readonly reading = new Map<string, object>();
  private live = false;
  /** Epoch ms, three per slot (READ, PUSHED, SEEN); NaN: never (an interval since NaN is never short: `due`). */
  private readonly times: Float64Array;
  /** HELD | USED, one byte per slot. */
  private readonly flags: Uint8Array;
  /** Slots below it were handed out once; freed ones wait in `free`. */
  private next = 0;
  private readonly free: number[] = [];

  constructor(
    private readonly maxEntries: number,
    private readonly maxAgeMs: number,
    private readonly records: RecordSlots<R> = new ObjectSlots<R>(),
  ) {
    // One slot per entry the cache may hold, all made now (no entry is added to a full cache before one
    // goes): zeroed typed columns, which the OS commits page by page as slots are first used, so a cache
    // that never fills costs what it holds, and none is ever copied to grow.
    this.index = new DigestTable(maxEntries);
    this.times = new Float64Array(maxEntries * 3);
    this.flags = new Uint8Array(maxEntries);
    records.reserve(maxEntries);
  }

  /** The cached record, or undefined: not cached, too old, or the cache is not live. */
  get(hash: string, now: number): R | undefined {
    const slot = this.index.find(hash);
    if (slot < 0 || !(this.flags[slot]! & HELD)) return undefined;
    if (now - this.times[slot * 3 + READ]! >= this.maxAgeMs) {
      this.drop(slot);
      return undefined;
    }
    this.flags[slot]! |= USED;
    return this.records.get(slot);
  }

  /**
   * Whether this instance should do a periodic write for the session now (push its TTL: `pushedAt`;
   * write its "last seen": `seenAt`), not done within `intervalMs`; if so, counts it as done.
   */
  due(hash: string, stamp: Stamp, now: number, intervalMs: number): boolean {
    const found = this.index.find(hash);
    if (found === NOT_A_DIGEST) return true;
    const slot = found < 0 ? this.add(hash) : found;
    const at = slot * 3 + (stamp === 'pushedAt' ? PUSHED : SEEN);
    if (now - this.times[at]! < intervalMs) return false; // never done: NaN, not less
    this.times[at] = now;
    return true;
  }

  /** When this instance last pushed the session's TTL (epoch ms). */
  pushedAt(hash: string): number | undefined {
    const slot = this.index.find(hash);
    if (slot < 0) return undefined;
    const at = this.times[slot * 3 + PUSHED]!;
    return Number.isNaN(at) ? undefined : at;
  }

  /** The write counted by `due` failed: due again on the next request. */
  failed(hash: string, stamp: Stamp): void {
    const slot = this.index.find(hash);
    if (slot >= 0) this.times[slot * 3 + (stamp === 'pushedAt' ? PUSHED : SEEN)] = NaN;
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
    const found = this.index.find(hash);
    if (found === NOT_A_DIGEST) return;
    const slot = found < 0 ? this.add(hash) : found;
    this.records.put(slot, record);
    this.times[slot * 3 + READ] = readAt;
    this.flags[slot]! |= HELD;
  }

  /** Redis says the key changed or went (here or elsewhere): its record is no longer trusted. */
  invalidate(hash: string): void {
    const slot = this.index.find(hash);
    if (slot >= 0) this.drop(slot);
    this.reading.delete(hash);
  }

  /** The session ended here: nothing of it is kept. */
  forget(hash: string): void {
    const slot = this.index.find(hash);
    if (slot >= 0) this.unlist(slot);
    this.reading.delete(hash);
  }

  /** Tracking on or off; either way, what was kept is no longer trusted. */
  setLive(on: boolean): void {
    this.live = on;
    this.clear();
  }

  clear(): void {
    for (let slot = 0; slot < this.next; slot++) this.drop(slot);
    this.reading.clear();
  }

  /** The slot's record is no longer kept; its times stay. */
  private drop(slot: number): void {
    if (!(this.flags[slot]! & HELD)) return;
    this.flags[slot]! &= ~HELD;
    this.records.drop(slot);
  }

  /** The slot's entry goes: the slot can serve another. */
  private unlist(slot: number): void {
    this.index.remove(slot);
    this.drop(slot);
    this.flags[slot] = 0;
    this.free.push(slot);
  }

  /** A new entry for `hash` (a digest not listed): no record, never pushed nor seen, not used. */
  private add(hash: string): number {
    // Room first (the new entry is never the one to go): the entry under the hand goes, unless used
    // since the hand last passed it; then it loses its flag and the hand moves on. Each use buys one
    // pass. At most SWEEP_STEPS second chances per eviction, so that a full cache of hot sessions costs
    // one request a few microseconds, not a walk over all of them. The entries: the slots handed out
    // less the freed ones; full, every slot is listed.
    for (let step = 0; this.next - this.free.length >= this.maxEntries; step++) {
      const slot = this.hand;
      this.hand = slot + 1 === this.next ? 0 : slot + 1;
      if (!(this.flags[slot]! & USED) || step >= SWEEP_STEPS) {
        this.unlist(slot);
        break;
      }
      this.flags[slot]! &= ~USED;
    }
    const slot = this.free.pop() ?? this.next++;
    this.times[slot * 3 + READ] = NaN;
    this.times[slot * 3 + PUSHED] = NaN;
    this.times[slot * 3 + SEEN] = NaN;
    this.flags[slot] = 0;
    this.index.insert(hash, slot);
    return slot;
  }
}
