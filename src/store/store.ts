import type { StoreInspector } from './inspect.ts';

/**
 * The one key-value store interface of svc: sessions, OAuth state, rate limits and plugins all use it.
 * Every command touches a single key, so a Redis Cluster works unchanged. Values are strings; callers
 * JSON-encode. TTLs are whole seconds. Implementations: `RedisStore` (ioredis) and `MemoryStore`.
 * A store that cannot be reached throws `UnavailableError` (answered 503), never hangs.
 */
export interface SetOptions {
  ttl?: number;
  nx?: boolean;
  xx?: boolean;
  keepTtl?: boolean;
}

export interface Subscription {
  unsubscribe(): Promise<void>;
}

/** What a tracking store tells its listener (`Store.track`). */
export interface TrackingListener {
  /** These keys changed or went (written, deleted, expired, evicted) anywhere; null: assume every key did. */
  invalidate(keys: string[] | null): void;
  /** true once invalidations flow; false when they may be missed (connection lost): trust nothing cached. */
  live(on: boolean): void;
}

export interface Store {
  /** Instance id (`cache`, `cachePersistent`, ...) and Redis db index, for log lines. */
  readonly name: string;
  /**
   * A read-only view of db `db` of this store's server for one request (the admin's cache list):
   * Redis opens a short-lived connection of its own for it; the embedded store has one keyspace for
   * every db. The caller closes it. An unreachable store throws `UnavailableError`.
   */
  inspect(db: number): Promise<StoreInspector>;
  get(key: string): Promise<string | null>;
  /** Reads the value and resets its TTL in one round trip (Redis `GETEX EX`); null when missing. */
  getEx(key: string, ttl: number): Promise<string | null>;
  /**
   * Writes the value; returns whether it was written. `nx`: only when the key is missing; `xx`: only
   * when it exists; `keepTtl`: keep the key's current expiry instead of clearing it.
   */
  set(key: string, value: string, opts?: SetOptions): Promise<boolean>;
  /** Reads and deletes atomically (Redis `GETDEL`): of two concurrent callers, one gets the value. */
  getDel(key: string): Promise<string | null>;
  del(key: string): Promise<boolean>;
  /**
   * Deletes `key` only while it holds `value`, in one atomic step (a Lua script on Redis); returns whether
   * it did. A lock's owner lets go of its own lock, never of one another caller took after its TTL ran out.
   */
  delIfValue(key: string, value: string): Promise<boolean>;
  /** Sets a TTL on an existing key; false when the key is missing. */
  expire(key: string, ttl: number): Promise<boolean>;
  /** Seconds left; -1 without expiry; -2 when missing (Redis `TTL`). */
  ttl(key: string): Promise<number>;
  /** Increments a counter; a new counter expires after `ttl` seconds (fixed window). */
  incr(key: string, ttl: number): Promise<number>;
  /**
   * Counts one use in a window the counter's key names (`...:<minute>`): increments `key`, returns the
   * count; a new counter expires after `ttl` seconds. One command on Redis (`INCR`, its `EXPIRE` sent after
   * the first count without waiting): the name, not the expiry, ends the window, so an `EXPIRE` lost to a
   * failure leaves an idle key behind, never a counter that counts for ever.
   */
  incrWindow(key: string, ttl: number): Promise<number>;
  /**
   * Reads `key` and, when it exists, counts one use in `counter` (as `incrWindow`), in one atomic step and
   * one round trip (a Lua script on Redis): `[value, count]`, or `[null, 0]` with nothing counted (so
   * that unknown keys make no counters). The two keys must share a Redis Cluster hash slot
   * (`hashSlotTag`): the caller gives `counter` the hash tag of `key`.
   */
  getAndIncrWindow(key: string, counter: string, ttl: number): Promise<[string | null, number]>;
  /**
   * Decrements an existing counter, keeping its TTL; a counter it brings to 0 (or below) is removed in
   * the same atomic step, so another instance's increment right after is never lost with it. A missing
   * key stays missing (returns 0).
   */
  decr(key: string): Promise<number>;
  /** Adds members to a set; with `ttl`, (re)sets the set's expiry. */
  sAdd(key: string, members: string[], ttl?: number): Promise<void>;
  sRem(key: string, members: string[]): Promise<void>;
  sMembers(key: string): Promise<string[]>;
  /**
   * Sends `message` to every subscriber of `channel` in every process that shares this store
   * (Redis `PUBLISH`). Fire and forget: nobody listening is not an error. Channels are names, never
   * secrets, like keys.
   */
  publish(channel: string, message: string): Promise<void>;
  /**
   * Calls `onMessage` for each message published on `channel` from now on; resolves once the
   * subscription is active. Delivery is at most once: a subscriber that lost its connection misses
   * what was published meanwhile, so `onResume` runs when it is back, for the caller to catch up.
   */
  subscribe(channel: string, onMessage: (message: string) => void, onResume?: () => void): Promise<Subscription>;
  /**
   * Server-assisted invalidation of what a process keeps of keys under `prefix` (Redis `CLIENT TRACKING`
   * in broadcasting mode; several prefixes: one connection for all). Absent where the store cannot do
   * it: the embedded store (in-process anyway) and a Redis Cluster. Returns a function that stops tracking.
   */
  track?(prefix: string | string[], listener: TrackingListener): Promise<() => Promise<void>>;
  /**
   * A Redis connection of its own (an ioredis client or Cluster), for a library that speaks Redis
   * itself: the socket.io adapter that carries realtime events between instances. Absent on the
   * embedded store (one process: nothing to carry).
   */
  dedicatedConnection?(): unknown;
  /** Throws UnavailableError when the store is down. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * What Redis Cluster hashes of `key` to pick its slot: the text of its hash tag (the first `{...}`, not
 * empty), else the whole key. Two keys with the same tag share a slot, so one script may name both.
 */
export function hashSlotTag(key: string): string {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return key.slice(open + 1, close);
  }
  return key;
}
