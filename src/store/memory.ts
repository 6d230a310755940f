import { globMatch } from './glob.ts';
import type { InspectedEntry, ScanQuery, StoreInspector } from './inspect.ts';
import type { SetOptions, Store, Subscription } from './store.ts';

type Entry = { value: string | Set<string>; expiresAt?: number };

/**
 * Embedded store for a first run and for tests: a Map with real TTL semantics (expired keys are
 * invisible at once and swept every few seconds), checked by the same contract suite as Redis.
 * One process only: sessions vanish on restart and are not shared between instances.
 */
export class MemoryStore implements Store {
  private readonly data = new Map<string, Entry>();
  /** Pub/sub within this process: the only process that can see this store. */
  private readonly channels = new Map<string, Set<(message: string) => void>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    readonly name = 'cache (embedded)',
    // Read at each call (not `Date.now` captured once), so a test that moves the clock moves expiry too.
    private readonly now: () => number = () => Date.now(),
  ) {
    this.sweeper = setInterval(() => this.sweep(), 5000).unref();
  }

  private live(key: string): Entry | undefined {
    const entry = this.data.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= this.now()) {
      this.data.delete(key);
      return undefined;
    }
    return entry;
  }

  private sweep() {
    for (const key of this.data.keys()) this.live(key);
  }

  private string(key: string): string | null {
    const entry = this.live(key);
    if (!entry) return null;
    if (typeof entry.value !== 'string') throw new Error(`WRONGTYPE key "${key}" holds a set`);
    return entry.value;
  }

  private set_(key: string): Set<string> | undefined {
    const entry = this.live(key);
    if (entry && typeof entry.value === 'string') throw new Error(`WRONGTYPE key "${key}" holds a string`);
    return entry?.value as Set<string> | undefined;
  }

  async get(key: string) {
    return this.string(key);
  }

  async getEx(key: string, ttl: number) {
    const value = this.string(key);
    if (value !== null) this.data.get(key)!.expiresAt = this.now() + ttl * 1000;
    return value;
  }

  async set(key: string, value: string, opts: SetOptions = {}) {
    const existing = this.live(key);
    if ((opts.nx && existing) || (opts.xx && !existing)) return false;
    const expiresAt = opts.ttl ? this.now() + opts.ttl * 1000 : opts.keepTtl ? existing?.expiresAt : undefined;
    this.data.set(key, { value, expiresAt });
    return true;
  }

  async getDel(key: string) {
    const value = this.string(key);
    this.data.delete(key);
    return value;
  }

  async del(key: string) {
    const existed = this.live(key) !== undefined;
    this.data.delete(key);
    return existed;
  }

  async delIfValue(key: string, value: string) {
    if (this.string(key) !== value) return false;
    this.data.delete(key);
    return true;
  }

  async expire(key: string, ttl: number) {
    const entry = this.live(key);
    if (!entry) return false;
    entry.expiresAt = this.now() + ttl * 1000;
    return true;
  }

  async ttl(key: string) {
    const entry = this.live(key);
    if (!entry) return -2;
    if (entry.expiresAt === undefined) return -1;
    return Math.ceil((entry.expiresAt - this.now()) / 1000);
  }

  async incr(key: string, ttl: number) {
    return this.count(key, ttl);
  }

  /** `incr` in one synchronous step, so that `getAndIncrWindow` is one step too. */
  private count(key: string, ttl: number): number {
    const current = this.string(key);
    const next = (current === null ? 0 : Number.parseInt(current, 10)) + 1;
    if (Number.isNaN(next)) throw new Error(`ERR value of "${key}" is not an integer`);
    if (current === null) this.data.set(key, { value: String(next), expiresAt: this.now() + ttl * 1000 });
    else this.data.get(key)!.value = String(next);
    return next;
  }

  async incrWindow(key: string, ttl: number) {
    return this.count(key, ttl);
  }

  async getAndIncrWindow(key: string, counter: string, ttl: number): Promise<[string | null, number]> {
    const value = this.string(key);
    return value === null ? [null, 0] : [value, this.count(counter, ttl)];
  }

  async decr(key: string) {
    const current = this.string(key);
    if (current === null) return 0;
    const next = Number.parseInt(current, 10) - 1;
    if (next <= 0) this.data.delete(key);
    else this.data.get(key)!.value = String(next);
    return next;
  }

  async sAdd(key: string, members: string[], ttl?: number) {
    let set = this.set_(key);
    if (!set) {
      set = new Set();
      this.data.set(key, { value: set });
    }
    for (const m of members) set.add(m);
    if (ttl) this.data.get(key)!.expiresAt = this.now() + ttl * 1000;
  }

  async sRem(key: string, members: string[]) {
    const set = this.set_(key);
    if (!set) return;
    for (const m of members) set.delete(m);
    if (set.size === 0) this.data.delete(key);
  }

  async sMembers(key: string) {
    return [...(this.set_(key) ?? [])];
  }

  /** One live key's type, contents and TTL, expiry untouched (`inspect`). */
  private peek(key: string): { type: 'string' | 'set'; value: string | string[]; ttl: number } | undefined {
    const entry = this.live(key);
    if (!entry) return undefined;
    const ttl = entry.expiresAt === undefined ? -1 : Math.ceil((entry.expiresAt - this.now()) / 1000);
    return typeof entry.value === 'string' ? { type: 'string', value: entry.value, ttl } : { type: 'set', value: [...entry.value], ttl };
  }

  /**
   * Read-only view for the cache list, through the interface a Redis store gives. One keyspace, so
   * every db index shows the same keys (sorted by name, as a Redis of this size lists them); its values
   * are strings and sets.
   */
  async inspect(): Promise<StoreInspector> {
    return {
      scan: async ({ pattern, offset, limit }: ScanQuery) => {
        const glob = pattern || '*';
        const names = [...this.data.keys()].filter((key) => this.live(key) && globMatch(glob, key)).sort();
        const items = names.slice(offset, offset + limit).map((key) => {
          const found = this.peek(key);
          return { key, ttl: found?.ttl ?? -2, type: found?.type ?? 'none' };
        });
        return { items, hasMore: names.length > offset + limit };
      },
      read: async (key): Promise<InspectedEntry | null> => {
        const found = this.peek(key);
        if (!found) return null;
        if (found.type === 'string') {
          const text = found.value as string;
          return { type: 'string', ttl: found.ttl, size: Buffer.byteLength(text), text, cut: false };
        }
        const members = (found.value as string[]).sort();
        return { type: 'set', ttl: found.ttl, size: members.length, members, cut: false };
      },
      close() {},
    };
  }

  async publish(channel: string, message: string) {
    const listeners = this.channels.get(channel);
    if (!listeners) return;
    // Later, not now, as a Redis subscriber would get it: the publisher finishes its own step first.
    for (const listener of [...listeners]) setImmediate(() => listener(message));
  }

  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Subscription> {
    // One listener per subscription, even when a caller subscribes the same function twice.
    const listener = (message: string) => onMessage(message);
    let listeners = this.channels.get(channel);
    if (!listeners) this.channels.set(channel, (listeners = new Set()));
    listeners.add(listener);
    return {
      unsubscribe: async () => {
        listeners.delete(listener);
        if (listeners.size === 0 && this.channels.get(channel) === listeners) this.channels.delete(channel);
      },
    };
  }

  async ping() {}

  async close() {
    clearInterval(this.sweeper);
    this.channels.clear();
  }
}
