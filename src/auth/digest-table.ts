import { hexValue } from './hex.ts';

/** Hex characters in a SHA-256 digest. */
const DIGEST_LENGTH = 64;
/**
 * 32-bit words kept of a digest: its first 128 bits. Two digests that agree there but differ after are
 * as likely as a guessed 128-bit key (never, among random session ids), and to make one agree with a
 * given digest takes about 2^128 hashes: matching on them is matching on the digest.
 */
const WORDS = 4;

/** Entries the first table has room for (at most half full); it doubles as entries come. */
const FIRST_ENTRIES = 1024;
/** Places for `entries` entries at most half full: a power of two, so that `& (places - 1)` wraps. */
const placesFor = (entries: number): number => 2 ** Math.ceil(Math.log2(Math.max(1, entries) * 2));

/** `DigestTable.find` for a string that is no digest: nothing can be kept under it. */
export const NOT_A_DIGEST = -2;

/**
 * SHA-256 digests (64 lower-case hex characters, as the store's keys hold them) to slot numbers, for the
 * local caches (`SessionCache`). A `Map` keyed by the hex string held, per entry, the 80-byte string and
 * about 35 bytes of the map's table; here a digest is its first 16 bytes (WORDS) in one `Uint32Array`
 * column (by slot) and the table is an `Int32Array` (slot + 1, 0: empty) at most half full, open-addressed
 * with linear probing: about 26 bytes an entry, none of them a heap object (100,000 cached sessions:
 * bench/session-cache-memory.ts). A digest's first word is already uniform, so it is the table's hash.
 * Removal shifts the entries after it back (no tombstones), so a lookup never walks past more than one
 * cluster.
 */
export class DigestTable {
  /**
   * WORDS per slot: the digest of the slot's entry, its first 128 bits (meaningful while it is listed).
   * Made whole at once: a zeroed buffer this large is memory the OS maps but commits only page by page as
   * slots are first written, so an emptier cache costs no more, and growing never copies it.
   */
  private readonly keys: Uint32Array;
  /** slot + 1 per place (0: empty), at most half full: built again at twice the size when it would not be. */
  private table: Int32Array;
  private listed = 0;
  /** The digest last decoded (`decode`): `lastHash`'s words, or `lastHash` is no digest. */
  private readonly words = new Uint32Array(WORDS);
  private lastHash: string | null = null;
  private lastValid = false;

  /** For slots 0 to `slots - 1`. */
  constructor(slots: number) {
    this.keys = new Uint32Array(slots * WORDS);
    this.table = new Int32Array(placesFor(Math.min(slots, FIRST_ENTRIES)));
  }

  /** The slot listed under `hash`; -1: none; NOT_A_DIGEST: `hash` is no digest. */
  find(hash: string): number {
    if (!this.decode(hash)) return NOT_A_DIGEST;
    const { table, words } = this;
    const mask = table.length - 1;
    if (mask < 0) return -1;
    for (let at = words[0]! & mask; ; at = (at + 1) & mask) {
      const entry = table[at]!;
      if (entry === 0) return -1;
      if (this.holds(entry - 1)) return entry - 1;
    }
  }

  /** Lists `slot` under `hash`, a digest `find` has just said is not listed. */
  insert(hash: string, slot: number): void {
    if (!this.decode(hash)) throw new Error('DigestTable.insert: not a SHA-256 hex digest');
    if ((this.listed + 1) * 2 > this.table.length) this.rebuild(this.table.length * 2);
    this.keys.set(this.words, slot * WORDS);
    this.table[this.free(this.words[0]!)] = slot + 1;
    this.listed++;
  }

  /** `slot` is no longer listed (it was). */
  remove(slot: number): void {
    const { table } = this;
    const mask = table.length - 1;
    let at = this.keys[slot * WORDS]! & mask;
    while (table[at] !== slot + 1) at = (at + 1) & mask;
    // Backward shift: an entry further on in the cluster whose home is not between the gap and it moves
    // into the gap, which moves to where it was; the cluster's end stops it.
    for (let next = (at + 1) & mask; ; next = (next + 1) & mask) {
      const entry = table[next]!;
      if (entry === 0) break;
      const home = this.keys[(entry - 1) * WORDS]! & mask;
      const stays = at <= next ? at < home && home <= next : at < home || home <= next;
      if (stays) continue;
      table[at] = entry;
      at = next;
    }
    table[at] = 0;
    this.listed--;
  }

  /** The table at `places` places, its entries listed again. */
  private rebuild(places: number): void {
    const old = this.table;
    this.table = new Int32Array(places);
    for (const entry of old) if (entry !== 0) this.table[this.free(this.keys[(entry - 1) * WORDS]!)] = entry;
  }

  /** The first empty place from `first`'s home on. */
  private free(first: number): number {
    const mask = this.table.length - 1;
    let at = first & mask;
    while (this.table[at] !== 0) at = (at + 1) & mask;
    return at;
  }

  private holds(slot: number): boolean {
    const { keys, words } = this;
    const base = slot * WORDS;
    for (let w = 0; w < WORDS; w++) if (keys[base + w] !== words[w]) return false;
    return true;
  }

  /** `hash`'s words into `words`; false: not 64 lower-case hex characters. A request asks about its hash several times: decoded once. */
  private decode(hash: string): boolean {
    if (hash === this.lastHash) return this.lastValid;
    this.lastHash = hash;
    this.lastValid = false;
    if (hash.length !== DIGEST_LENGTH) return false;
    for (let w = 0; w < WORDS; w++) {
      let word = 0;
      for (let i = w * 8; i < w * 8 + 8; i++) {
        const digit = hexValue(hash.charCodeAt(i));
        if (digit < 0) return false;
        word = (word << 4) | digit;
      }
      this.words[w] = word;
    }
    // The rest is not kept, but a string that is no digest must still find nothing.
    for (let i = WORDS * 8; i < DIGEST_LENGTH; i++) {
      if (hexValue(hash.charCodeAt(i)) < 0) return false;
    }
    this.lastValid = true;
    return true;
  }
}
