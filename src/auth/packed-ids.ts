import { Buffer } from 'node:buffer';
import { uuidText } from '../uuid.ts';
import { hexValue } from './hex.ts';

/** Bytes per slot: a UUID's 16, or an id of up to 16 one-byte characters. */
const WIDTH = 16;
/** `forms`: 1 to WIDTH, an id of that many one-byte characters, as its bytes; 0: kept as a string. */
const UUID = WIDTH + 1;

/**
 * Ids by slot, without a string each: a lower-case UUID (the form of every id svc makes, `randomUUID`) as
 * its 16 bytes, an id of up to 16 one-byte (Latin-1) characters as those bytes, any other id as it was
 * given. A string is an object on the heap: a UUID's is 56 bytes and the pointer to it 8 more, where
 * here it takes 17 (bench/session-cache-memory.ts: the user ids of 100,000 cached sessions). What it
 * costs is a new string on each `get`, made by one `toString`: 50 to 90 ns (a plain string read is 3).
 * The columns are made whole for all slots at once (zeroed: the OS commits their pages as slots are written).
 */
export class PackedIds {
  private readonly bytes: Buffer;
  /** Per slot: UUID, the id's length, or 0 (in `others`). */
  private readonly forms: Uint8Array;
  private readonly others = new Map<number, string>();

  constructor(slots: number) {
    this.bytes = Buffer.alloc(slots * WIDTH);
    this.forms = new Uint8Array(slots);
  }

  put(slot: number, id: string): void {
    if (this.forms[slot] === 0) this.others.delete(slot);
    const form = this.pack(slot * WIDTH, id);
    this.forms[slot] = form;
    if (form === 0) this.others.set(slot, id);
  }

  get(slot: number): string {
    const form = this.forms[slot]!;
    if (form === UUID) return uuidText(this.bytes, slot * WIDTH);
    if (form !== 0) return this.bytes.toString('latin1', slot * WIDTH, slot * WIDTH + form);
    return this.others.get(slot)!;
  }

  /** The slot's id is no longer kept. */
  drop(slot: number): void {
    if (this.forms[slot] === 0) this.others.delete(slot);
  }

  /** Writes `id` at `at` in one of the packed forms and returns it; 0: it fits none. */
  private pack(at: number, id: string): number {
    if (id.length === 36 && this.packUuid(at, id)) return UUID;
    if (id.length === 0 || id.length > WIDTH) return 0;
    for (let i = 0; i < id.length; i++) {
      const code = id.charCodeAt(i);
      if (code > 0xff) return 0;
      this.bytes[at + i] = code;
    }
    return id.length;
  }

  /** Whether `id` is a lower-case UUID (8-4-4-4-12 hex digits); if so its 16 bytes are written at `at`. */
  private packUuid(at: number, id: string): boolean {
    let digit = 0;
    for (let i = 0; i < 36; i++) {
      const code = id.charCodeAt(i);
      if (i === 8 || i === 13 || i === 18 || i === 23) {
        if (code !== 0x2d) return false;
        continue;
      }
      const value = hexValue(code);
      if (value < 0) return false;
      // Two digits per byte, the first in the high half; the byte is whole once its second digit is in.
      const byte = at + (digit >> 1);
      this.bytes[byte] = digit & 1 ? this.bytes[byte]! | value : value << 4;
      digit++;
    }
    return true;
  }
}
