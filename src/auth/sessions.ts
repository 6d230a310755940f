import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import type { AuthUser } from '../http/env.ts';
import type { Store } from '../store/store.ts';

/** What the store keeps under `auth:session:<sha256hex>` (CONTRACT section 3). Times are epoch ms. */
export interface SessionRecord extends AuthUser {
  createdAt: number;
  expiresAt: number;
}

export interface Session extends SessionRecord {
  /** SHA-256 hex of the id: the store key's suffix and the `sid` given to plugins. */
  hash: string;
}

const ID_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export function hashSessionId(id: string): string {
  return createHash('sha256').update(id).digest('hex');
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
  }

  private key(hash: string) {
    return `${this.prefix}session:${hash}`;
  }

  private indexKey(userId: string) {
    return `${this.prefix}user-sessions:${userId}`;
  }

  /** Longest a session can live: the index lives as long. */
  private get lifetime(): number {
    return this.sliding ? Math.ceil(this.maxLifetimeMs / 1000) : this.ttl;
  }

  /**
   * Creates a session; returns the id for the cookie. Two single-key writes (Cluster-safe), the
   * index first: a session that logout-all and password changes cannot find must never exist. When
   * the second write fails, the index holds a hash with no session, which readers prune.
   */
  async create(user: AuthUser): Promise<{ id: string; session: Session }> {
    const id = randomBytes(32).toString('base64url');
    const hash = hashSessionId(id);
    const createdAt = this.now();
    const record: SessionRecord = { userId: user.userId, isAdmin: user.isAdmin, provider: user.provider, createdAt, expiresAt: createdAt + this.ttl * 1000 };
    await this.store.sAdd(this.indexKey(user.userId), [hash], this.lifetime);
    this.touched.add(user.userId);
    await this.store.set(this.key(hash), JSON.stringify(record), { ttl: this.ttl });
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
    if (hashes.length) for (const listener of this.endListeners) await listener(hashes);
  }

  /**
   * The hot path: the session behind a cookie value, or null. Sliding mode reads and resets the TTL
   * in one `GETEX`; `maxLifetime` caps a sliding session in code (no second command).
   */
  async lookup(id: string): Promise<Session | null> {
    if (!ID_PATTERN.test(id)) return null; // forged or truncated cookie: no store round trip
    const hash = hashSessionId(id);
    const raw = this.sliding ? await this.store.getEx(this.key(hash), this.ttl) : await this.store.get(this.key(hash));
    if (raw === null) return null;
    const record = JSON.parse(raw) as SessionRecord;
    const now = this.now();
    if (this.sliding) {
      const hardEnd = record.createdAt + this.maxLifetimeMs;
      if (now >= hardEnd) {
        await this.destroyHash(hash, record.userId);
        await this.ended([hash]);
        return null;
      }
      record.expiresAt = Math.min(now + this.ttl * 1000, hardEnd);
    }
    return { ...record, hash };
  }

  /**
   * Sliding sessions re-issue the cookie on every authenticated request with Max-Age = the time the
   * session has left (its TTL, or less near the hard cap): the browser keeps the cookie exactly as
   * long as the server keeps the session, and never past `maxLifetime`. Absolute sessions keep the
   * login cookie, whose Max-Age already ends with the session. Returns seconds, or null: no refresh.
   */
  cookieRefresh(session: Session): number | null {
    if (!this.sliding) return null;
    return Math.max(0, Math.ceil((session.expiresAt - this.now()) / 1000));
  }

  async destroy(id: string): Promise<Session | null> {
    if (!ID_PATTERN.test(id)) return null;
    const hash = hashSessionId(id);
    const raw = await this.store.getDel(this.key(hash));
    if (raw === null) return null;
    const record = JSON.parse(raw) as SessionRecord;
    await this.store.sRem(this.indexKey(record.userId), [hash]);
    await this.ended([hash]);
    return { ...record, hash };
  }

  private async destroyHash(hash: string, userId: string): Promise<void> {
    await this.store.del(this.key(hash));
    await this.store.sRem(this.indexKey(userId), [hash]);
  }

  /** Ends every session of a user, except the one whose hash is `keep`. Returns the hashes that ended. */
  async destroyAll(userId: string, keep?: string): Promise<string[]> {
    const hashes = (await this.store.sMembers(this.indexKey(userId))).filter((h) => h !== keep);
    const ended: string[] = [];
    for (const hash of hashes) {
      if (await this.store.del(this.key(hash))) ended.push(hash);
    }
    await this.store.sRem(this.indexKey(userId), hashes);
    await this.ended(ended);
    return ended;
  }

  /** Rewrites `isAdmin` in every live session of a user, keeping each TTL (SET XX KEEPTTL). */
  async setAdmin(userId: string, isAdmin: boolean): Promise<void> {
    const hashes = await this.store.sMembers(this.indexKey(userId));
    const changed: string[] = [];
    for (const hash of hashes) {
      const raw = await this.store.get(this.key(hash));
      if (raw === null) {
        await this.store.sRem(this.indexKey(userId), [hash]);
        continue;
      }
      const record = JSON.parse(raw) as SessionRecord;
      if (await this.store.set(this.key(hash), JSON.stringify({ ...record, isAdmin }), { xx: true, keepTtl: true })) changed.push(hash);
    }
    if (changed.length) for (const listener of this.changeListeners) await listener(changed);
  }

  /** Runs after live sessions were rewritten (admin status): gets their hashes. */
  onChange(listener: (hashes: string[]) => Promise<void>): void {
    this.changeListeners.push(listener);
  }

  /** Drops index entries whose session expired, for the users this process touched. */
  async cleanup(): Promise<void> {
    const users = [...this.touched];
    this.touched.clear();
    for (const userId of users) {
      try {
        const hashes = await this.store.sMembers(this.indexKey(userId));
        const dead: string[] = [];
        for (const hash of hashes) if ((await this.store.ttl(this.key(hash))) === -2) dead.push(hash);
        await this.store.sRem(this.indexKey(userId), dead);
        await this.ended(dead); // expired without a logout: their token blobs go too
      } catch (err) {
        this.touched.add(userId); // try again next round
        this.logger.warn({ err: (err as Error).message }, 'session index cleanup failed');
      }
    }
  }

  close(): void {
    clearInterval(this.cleanupTimer);
  }
}
