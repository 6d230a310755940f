import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import type { AuthUser, Session, SessionRecord } from '../http/env.ts';
import type { Store } from '../store/store.ts';
import { sha256hex } from './hash.ts';
import { SessionCache, SessionRecordSlots } from './session-cache.ts';

export type { Session, SessionRecord } from '../http/env.ts';

/** Where and from what a session was created (`GET /auth/sessions`). */
export interface SessionOrigin {
  ip: string;
  device: string;
  /** SHA-256 of the browser's `svc_device` id (known devices, CONTRACT 14): "this wasn't me" ends that device's sessions. Never shown. */
  deviceHash?: string;
}

/** A live session as its owner sees it in `GET /auth/sessions`. */
export interface SessionInfo extends Session, Partial<SessionOrigin> {
  /** The id its owner sees: derived one-way from the store hash, so neither the cookie value nor the hash. */
  publicId: string;
  /** Last request, to the minute (SEEN_INTERVAL); the creation time until the first write. */
  lastSeenAt: number;
}

/** One-way from the store hash: a public id reveals neither the cookie value nor the store key. */
export const publicSessionId = (hash: string) => createHash('sha256').update(`svc-session-public:${hash}`).digest('base64url').slice(0, 22);

/**
 * "Last seen" is written at most once per session per minute per instance, in its own key (never
 * by rewriting the record, which would race an admin's rewrite of `isAdmin`), and without waiting:
 * the hot path stays one store command per request, plus one write per minute per active session.
 */
export const SEEN_INTERVAL_MS = 60_000;
/** Bounds the memory of which sessions this instance marked seen recently. */
const SEEN_MEMORY = 50_000;

/** Keys under `prefix` whose records `cache` keeps (`startLocalCache`): the cache is told what Redis says of them. */
export interface TrackedPrefix {
  prefix: string;
  cache: Pick<SessionCache<unknown>, 'invalidate' | 'clear' | 'setLive'>;
}

/** A session found by `lookup`; `pushed`: this lookup pushed its sliding TTL back (the cookie is refreshed). */
export interface LookedUp {
  session: Session;
  pushed: boolean;
}

const ID_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const parseRecord = (raw: string | null): SessionRecord | null => (raw === null ? null : (JSON.parse(raw) as SessionRecord));

export const hashSessionId = sha256hex;

/**
 * The session a request sees: its record (CONTRACT section 3's fields), the expiry as of now, its
 * hash. Written out field by field: V8's object spread (`{ ...record, expiresAt, hash }`) costs about a
 * microsecond per request here, some 200 times this.
 */
function sessionOf(record: SessionRecord, expiresAt: number, hash: string): Session {
  const { userId, isAdmin, provider, createdAt, totp } = record;
  return totp ? { userId, isAdmin, provider, createdAt, expiresAt, totp, hash } : { userId, isAdmin, provider, createdAt, expiresAt, hash };
}

/**
 * Sessions as hashed random ids (the Copenhagen Book's pattern). The id is 32 random bytes,
 * base64url; only its SHA-256 reaches the store, so a store dump yields no usable cookie. The record
 * carries what middleware needs, so an authenticated request costs ONE store command: `GETEX`
 * (sliding) or `GET` (absolute). Admin changes and logouts go through the per-user index.
 */
export class SessionService {
  private readonly prefix: string;
  private readonly ttl: number;
  private readonly sliding: boolean;
  private readonly maxLifetimeMs: number;
  /** Users whose index this process touched since the last cleanup. */
  private readonly touched = new Set<string>();
  private readonly cleanupTimer: NodeJS.Timeout;
  private readonly endListeners: ((hashes: string[]) => Promise<void>)[] = [];
  /** `auth.session.localCache`: the records, and when this instance last pushed each sliding TTL and wrote each "last seen". */
  private readonly cache: SessionCache | null;
  /** When this instance last wrote each session's "last seen": in the cache's entries when there is one. */
  private readonly seen: Pick<Throttle, 'take' | 'forget'>;
  private readonly touchMs: number;
  private stopTracking?: () => Promise<void>;
  private readonly changeListeners: ((hashes: string[]) => Promise<void>)[] = [];

  constructor(
    private readonly store: Store,
    config: Config,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.prefix = config.auth.store.keyPrefix;
    this.ttl = config.auth.session.ttl;
    this.sliding = config.auth.session.ttlMode === 'sliding';
    this.maxLifetimeMs = config.auth.session.maxLifetime * 1000;
    this.cleanupTimer = setInterval(() => void this.cleanup(), config.auth.session.cleanupInterval * 1000).unref();
    const { localCache, localCacheSize, localCacheMaxAge, touchInterval } = config.auth.session;
    this.cache = localCache && store.track ? new SessionCache(localCacheSize, localCacheMaxAge * 1000, new SessionRecordSlots()) : null;
    const cache = this.cache;
    this.seen = cache
      ? { take: (hash, now) => cache.due(hash, 'seenAt', now, SEEN_INTERVAL_MS), forget: (hash) => cache.failed(hash, 'seenAt') }
      : new Throttle(SEEN_INTERVAL_MS, SEEN_MEMORY);
    this.touchMs = touchInterval * 1000;
    if (localCache && !store.track) logger.info({ store: store.name }, 'auth.session.localCache: this store is in-process already (or cannot track keys); no local cache');
  }

  /**
   * Starts the local cache's invalidations (`auth.session.localCache`). Until Redis confirms tracking,
   * and whenever the tracking connection is lost, lookups go to the store as without the cache.
   * `others`: more prefixes kept the same way (API key records), on the same tracking connection.
   */
  async startLocalCache(others: TrackedPrefix[] = []): Promise<void> {
    const cache = this.cache;
    if (!cache || !this.store.track) return;
    const sessionPrefix = this.key('');
    const tracked: TrackedPrefix[] = [{ prefix: sessionPrefix, cache }, ...others];
    let wasLive: boolean | undefined; // one line per change: a reconnect reports "off" from several events
    try {
      this.stopTracking = await this.store.track(tracked.map((t) => t.prefix), {
        invalidate: (keys) => {
          if (keys === null) {
            for (const t of tracked) t.cache.clear();
            return;
          }
          for (const key of keys) {
            for (const t of tracked) if (key.startsWith(t.prefix)) t.cache.invalidate(key.slice(t.prefix.length));
          }
        },
        live: (on) => {
          for (const t of others) t.cache.setLive(on);
          cache.setLive(on);
          if (on === wasLive) return;
          wasLive = on;
          this.logger.info({ store: this.store.name }, on ? 'local session cache on: Redis tracks session keys' : 'local session cache bypassed until key tracking is back');
        },
      });
    } catch (err) {
      this.logger.warn({ store: this.store.name, err: (err as Error).message }, 'auth.session.localCache: no local cache');
    }
  }

  private key(hash: string) {
    return `${this.prefix}session:${hash}`;
  }

  private indexKey(userId: string) {
    return `${this.prefix}user-sessions:${userId}`;
  }

  private seenKey(hash: string) {
    return `${this.prefix}session-seen:${hash}`;
  }

  /** When the session last proved who it is (`POST /auth/reauthenticate`): beside the record, so it never races a rewrite of it. */
  private authKey(hash: string) {
    return `${this.prefix}session-auth:${hash}`;
  }

  /**
   * Epoch ms of the session's last proof of who it is: a reauthentication, else its login (unless the
   * login proved too little: `markUnproven`). One store read (step-up routes only).
   */
  async authenticatedAt(session: Session): Promise<number> {
    const at = await this.store.get(this.authKey(session.hash));
    return at === null ? session.createdAt : Number(at) || 0;
  }

  /** The session proved who it is again, now (step-up). */
  async markAuthenticated(hash: string): Promise<void> {
    await this.store.set(this.authKey(hash), String(this.now()), { ttl: this.lifetime });
  }

  /**
   * A new session whose login does not count as a proof for step-up (a passkey without user
   * verification, which `POST /auth/reauthenticate` refuses too): stale until a reauthentication.
   */
  async markUnproven(hash: string): Promise<void> {
    await this.store.set(this.authKey(hash), '0', { ttl: this.lifetime });
  }

  /** Where the session was created (`SessionOrigin`): beside the record, whose shape CONTRACT fixes. */
  private originKey(hash: string) {
    return `${this.prefix}session-origin:${hash}`;
  }

  /** Longest a session can live: the index lives as long. */
  private get lifetime(): number {
    return this.sliding ? Math.ceil(this.maxLifetimeMs / 1000) : this.ttl;
  }

  /**
   * Creates a session; returns the id for the cookie. Single-key writes (Cluster-safe), the index
   * first: a session that logout-all and password changes cannot find must never exist. When the
   * session's write fails, the index holds a hash with no session, which readers prune. The entry is
   * added once more after the session's write: a prune on another instance may have found the key
   * missing in between and removed it (see `prune`).
   */
  async create(user: AuthUser & { totp?: boolean }, origin?: SessionOrigin): Promise<{ id: string; session: Session }> {
    const id = randomBytes(32).toString('base64url');
    const hash = hashSessionId(id);
    const createdAt = this.now();
    const record: SessionRecord = {
      userId: user.userId,
      isAdmin: user.isAdmin,
      provider: user.provider,
      createdAt,
      expiresAt: createdAt + this.ttl * 1000,
      ...(user.totp ? { totp: true as const } : {}),
    };
    await this.store.sAdd(this.indexKey(user.userId), [hash], this.lifetime);
    this.touched.add(user.userId);
    if (origin) await this.store.set(this.originKey(hash), JSON.stringify(origin), { ttl: this.lifetime });
    await this.store.set(this.key(hash), JSON.stringify(record), { ttl: this.ttl });
    await this.store.sAdd(this.indexKey(user.userId), [hash], this.lifetime);
    return { id, session: { ...record, hash } };
  }

  /** Whether the session with this hash still exists (no TTL change). */
  async isLive(hash: string): Promise<boolean> {
    return (await this.store.ttl(this.key(hash))) !== -2;
  }

  /** The session record behind a hash, without touching its TTL; null when it ended. */
  async byHash(hash: string): Promise<Session | null> {
    const raw = await this.store.get(this.key(hash));
    return raw === null ? null : { ...(JSON.parse(raw) as SessionRecord), hash };
  }

  /**
   * The record behind a hash and the milliseconds it has left without further activity (its TTL,
   * capped by the hard end), or null when it has ended. Does not slide it. For what outlives a
   * request (realtime sockets); two store commands, never on the request path.
   */
  async remaining(hash: string): Promise<{ record: SessionRecord; left: number } | null> {
    const [raw, ttl] = await Promise.all([this.store.get(this.key(hash)), this.store.ttl(this.key(hash))]);
    if (raw === null || ttl === -2) return null;
    const record = JSON.parse(raw) as SessionRecord;
    const hardLeft = this.hardEnd(record) - this.now();
    const left = ttl === -1 ? hardLeft : Math.min(ttl * 1000, hardLeft);
    return left > 0 ? { record, left } : null;
  }

  /** When a session's last moment is (epoch ms): the hard cap when sliding, the fixed expiry otherwise. */
  hardEnd(session: SessionRecord): number {
    return this.sliding ? session.createdAt + this.maxLifetimeMs : session.expiresAt;
  }

  /** Runs after sessions end (logout, logout-all, hard cap, found expired): gets their hashes. */
  onEnd(listener: (hashes: string[]) => Promise<void>): void {
    this.endListeners.push(listener);
  }

  private async ended(hashes: string[]): Promise<void> {
    if (!hashes.length) return;
    for (const hash of hashes) {
      this.seen.forget(hash);
      await this.store.del(this.seenKey(hash));
      await this.store.del(this.originKey(hash));
      await this.store.del(this.authKey(hash));
    }
    for (const listener of this.endListeners) await listener(hashes);
  }

  /**
   * The hot path: the session behind a cookie value, or null. Sliding mode reads and resets the TTL
   * in one `GETEX`; `maxLifetime` caps a sliding session in code (no second command). With the local
   * cache, a cached record answers without the store, and synchronously (no Promise: the request
   * can be answered in the same turn of the event loop); the TTL is pushed at most once per
   * `touchInterval` per session by this instance (a `GETEX` that also re-reads the record).
   */
  lookup(id: string): LookedUp | null | Promise<LookedUp | null> {
    if (!ID_PATTERN.test(id)) return null; // forged or truncated cookie: no store round trip
    const hash = hashSessionId(id);
    const now = this.now();
    const push = this.sliding && (this.cache?.due(hash, 'pushedAt', now, this.touchMs) ?? true);
    const cached = push ? undefined : this.cache?.get(hash, now);
    if (cached) return this.lookedUp(hash, cached, push, now);
    return this.read(hash, push, now).then((record) => this.lookedUp(hash, record, push, now));
  }

  /** `lookup`'s answer for the record read (null: no session). Ends a sliding session past its hard cap. */
  private lookedUp(hash: string, record: SessionRecord | null, pushed: boolean, now: number): LookedUp | null | Promise<null> {
    if (record === null) {
      this.forget(hash); // no session: a made-up id keeps no entry in the cache
      return null;
    }
    let expiresAt = record.expiresAt;
    if (this.sliding) {
      const hardEnd = record.createdAt + this.maxLifetimeMs;
      if (now >= hardEnd) return this.endPastHardCap(hash, record.userId);
      // The store's TTL runs from the last push: this instance's (the cache), or now (no cache).
      expiresAt = Math.min((this.cache?.pushedAt(hash) ?? now) + this.ttl * 1000, hardEnd);
    }
    this.markSeen(hash, now);
    return { session: sessionOf(record, expiresAt, hash), pushed };
  }

  private async endPastHardCap(hash: string, userId: string): Promise<null> {
    await this.destroyHash(hash, userId);
    await this.ended([hash]);
    return null;
  }

  /**
   * One store read of a session record (GETEX when `push`), kept by the local cache if it has one. A
   * push is not kept: it changes the key, so Redis announces it back and the record would be dropped
   * again at once (keeping it only made garbage that outlived the request: more heap).
   */
  private read(hash: string, push: boolean, now: number): Promise<SessionRecord | null> {
    // Chained promises rather than an async function: each await would be one more turn of the
    // microtask queue on the hot path.
    if (push) {
      return this.store.getEx(this.key(hash), this.ttl).then(parseRecord, (err: unknown) => {
        this.cache?.failed(hash, 'pushedAt');
        throw err;
      });
    }
    const token = this.cache?.begin(hash);
    const read = this.store.get(this.key(hash)).then(parseRecord);
    if (!token) return read;
    return read.then(
      (record) => {
        this.cache!.finish(hash, token, record, now);
        return record;
      },
      (err: unknown) => {
        this.cache!.finish(hash, token, null, now);
        throw err;
      },
    );
  }

  /** Amortized "last seen" (SEEN_INTERVAL_MS); a failed write is retried on a later request. */
  private markSeen(hash: string, now: number): void {
    if (!this.seen.take(hash, now)) return;
    this.store.set(this.seenKey(hash), String(now), { ttl: this.lifetime }).catch((err: Error) => {
      this.seen.forget(hash);
      this.logger.debug({ err: err.message }, 'session last-seen write failed');
    });
  }

  /** The live sessions of a user, newest first; index entries of ended sessions are pruned. */
  async list(userId: string): Promise<SessionInfo[]> {
    const hashes = await this.store.sMembers(this.indexKey(userId));
    const live: SessionInfo[] = [];
    const dead: string[] = [];
    for (const hash of hashes) {
      const session = await this.byHash(hash);
      if (!session) {
        dead.push(hash);
        continue;
      }
      const seen = Number(await this.store.get(this.seenKey(hash)));
      const origin = await this.store.get(this.originKey(hash));
      live.push({ ...session, ...(origin ? (JSON.parse(origin) as SessionOrigin) : {}), publicId: publicSessionId(hash), lastSeenAt: Math.max(seen || 0, session.createdAt) });
    }
    await this.prune(userId, dead);
    return live.sort((a, b) => b.createdAt - a.createdAt);
  }

  /** Ends the session of `userId` whose public id is `publicId`; null when it is not one of theirs. */
  async destroyByPublicId(userId: string, publicId: string): Promise<Session | null> {
    const session = (await this.list(userId)).find((s) => s.publicId === publicId);
    if (!session) return null;
    const deleted = await this.store.del(this.key(session.hash));
    this.forget(session.hash);
    if (!deleted) return null;
    await this.store.sRem(this.indexKey(userId), [session.hash]);
    await this.ended([session.hash]);
    return session;
  }

  /**
   * Ends the live sessions of `userId` that `match` picks (from what `list` sees: the record and its
   * origin); returns those that ended here.
   */
  async destroyWhere(userId: string, match: (session: SessionInfo) => boolean): Promise<Session[]> {
    const picked = (await this.list(userId)).filter(match);
    const ended: Session[] = [];
    for (const session of picked) {
      const deleted = await this.store.del(this.key(session.hash));
      this.forget(session.hash);
      if (deleted) ended.push(session);
    }
    if (picked.length) await this.store.sRem(this.indexKey(userId), picked.map((s) => s.hash));
    await this.ended(ended.map((s) => s.hash));
    return ended;
  }

  /**
   * Sliding sessions re-issue the cookie whenever a request pushed the TTL, with Max-Age = the time
   * the session has left (its TTL, or less near the hard cap): the browser keeps the cookie exactly as
   * long as the server keeps the session, and never past `maxLifetime`. Without the local cache that
   * is every authenticated request; with it, once per `touchInterval` (the cookie issued then still
   * ends with the session, which lives at least that long). Absolute sessions keep the login cookie,
   * whose Max-Age already ends with the session. Returns seconds, or null: no refresh.
   */
  cookieRefresh({ session, pushed }: LookedUp): number | null {
    if (!this.sliding || !pushed) return null;
    return Math.max(0, Math.ceil((session.expiresAt - this.now()) / 1000));
  }

  async destroy(id: string): Promise<Session | null> {
    if (!ID_PATTERN.test(id)) return null;
    const hash = hashSessionId(id);
    const raw = await this.store.getDel(this.key(hash));
    this.forget(hash);
    if (raw === null) return null;
    const record = JSON.parse(raw) as SessionRecord;
    await this.store.sRem(this.indexKey(record.userId), [hash]);
    await this.ended([hash]);
    return { ...record, hash };
  }

  /** After a session key was deleted or rewritten here: this instance's cache must not wait for Redis to say so. */
  private forget(hash: string): void {
    this.cache?.forget(hash);
  }

  private async destroyHash(hash: string, userId: string): Promise<void> {
    await this.store.del(this.key(hash));
    this.forget(hash);
    await this.store.sRem(this.indexKey(userId), [hash]);
  }

  /** Ends every session of a user, except the one whose hash is `keep`. Returns the hashes that ended. */
  async destroyAll(userId: string, keep?: string): Promise<string[]> {
    const hashes = (await this.store.sMembers(this.indexKey(userId))).filter((h) => h !== keep);
    const ended: string[] = [];
    for (const hash of hashes) {
      const deleted = await this.store.del(this.key(hash));
      this.forget(hash);
      if (deleted) ended.push(hash);
    }
    await this.store.sRem(this.indexKey(userId), hashes);
    await this.ended(ended);
    return ended;
  }

  /**
   * Rewrites what every live session of a user carries of the user (`isAdmin`, `totp`), keeping each
   * TTL (SET XX KEEPTTL): an admin change applies on the user's next request, on every instance.
   */
  async rewrite(userId: string, carried: { isAdmin: boolean; totp: boolean }): Promise<void> {
    const hashes = await this.store.sMembers(this.indexKey(userId));
    const changed: string[] = [];
    const missing: string[] = [];
    for (const hash of hashes) {
      const raw = await this.store.get(this.key(hash));
      if (raw === null) {
        missing.push(hash);
        continue;
      }
      const { totp: _, ...record } = JSON.parse(raw) as SessionRecord;
      const written = await this.store.set(this.key(hash), JSON.stringify({ ...record, isAdmin: carried.isAdmin, ...(carried.totp ? { totp: true } : {}) }), { xx: true, keepTtl: true });
      this.forget(hash);
      if (written) changed.push(hash);
    }
    await this.prune(userId, missing);
    if (changed.length) for (const listener of this.changeListeners) await listener(changed);
  }

  /** Runs after live sessions were rewritten (admin status): gets their hashes. */
  onChange(listener: (hashes: string[]) => Promise<void>): void {
    this.changeListeners.push(listener);
  }

  /**
   * Drops the index entries of `missing`, hashes whose session key a reader found missing; returns
   * those whose session has really ended. A missing key may be a session being created (`create`
   * writes the index entry first), so each is looked at again after its entry is gone, and put back if
   * it exists now; a look that came before the session's write is mended by `create`, which adds its
   * entry again after that write. Either way no live session stays out of the index, where logout-all,
   * a password change, a demotion and a deletion find sessions.
   */
  private async prune(userId: string, missing: string[]): Promise<string[]> {
    if (missing.length === 0) return [];
    await this.store.sRem(this.indexKey(userId), missing);
    const ended: string[] = [];
    const back: string[] = [];
    for (const hash of missing) ((await this.isLive(hash)) ? back : ended).push(hash);
    if (back.length) await this.store.sAdd(this.indexKey(userId), back, this.lifetime);
    return ended;
  }

  /** Drops index entries whose session expired, for the users this process touched. */
  async cleanup(): Promise<void> {
    const users = [...this.touched];
    this.touched.clear();
    for (const userId of users) {
      try {
        const hashes = await this.store.sMembers(this.indexKey(userId));
        const missing: string[] = [];
        for (const hash of hashes) if (!(await this.isLive(hash))) missing.push(hash);
        await this.ended(await this.prune(userId, missing)); // expired without a logout: their token blobs go too
      } catch (err) {
        this.touched.add(userId); // try again next round
        this.logger.warn({ err: (err as Error).message }, 'session index cleanup failed');
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.cleanupTimer);
    await this.stopTracking?.();
  }
}

/**
 * "At most once per interval per session, in this process": remembers when it last happened for the
 * `limit` most recently seen sessions (insertion order = age; the oldest is forgotten first, which
 * only makes it due again).
 */
class Throttle {
  private readonly last = new Map<string, number>();

  constructor(
    private readonly intervalMs: number,
    private readonly limit: number,
  ) {}

  /** Whether it is due; if so, counts it as done now (`forget` when it then failed). */
  take(hash: string, now: number): boolean {
    const last = this.last.get(hash);
    if (last !== undefined && now - last < this.intervalMs) return false;
    this.last.delete(hash);
    this.last.set(hash, now);
    if (this.last.size > this.limit) this.last.delete(this.last.keys().next().value!);
    return true;
  }

  forget(hash: string): void {
    this.last.delete(hash);
  }
}
