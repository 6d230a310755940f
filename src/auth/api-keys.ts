/**
 * API keys (CONTRACT 15): `svc_` + 32 random bytes (base64url), shown once. The database keeps the
 * key's SHA-256, never the key (`svc__core-apikey`, the source of truth: listing, revocation); the store
 * keeps the record a request needs under `api-key:<sha256hex>`, read like a session record: one store
 * read, or none from the local cache (`auth.session.localCache`), which Redis key tracking keeps exact
 * (a DELETE on any instance drops the record everywhere at once). A record missing from the store (Redis
 * flushed, or its TTL passed) is read again from the database and put back.
 *
 * Each request with a key counts against the key's limit first (`INCR` of the key's counter for this
 * minute of the clock, on every instance together), then the limit is checked: 429 `rate_limited` with
 * `Retry-After`. One store round trip per request: the record and the count in one script
 * (`Store.getAndIncrWindow`), or the count alone (one `INCR`) when the record comes from the local cache.
 * `lastUsedAt` is written at most once a minute per key, after the answer.
 *
 * A well-formed key the store does not hold costs a database read, and is counted against its own limit
 * only once the database has found it: unknown keys make no per-key counters in the store (an address
 * sending random keys cannot fill Redis with them). Wrong keys (guessed, mistyped,
 * revoked and retried) are counted per client address before that read (`INCR` of the address's counter
 * for this minute, on every instance together): past `INVALID_PER_IP` in a minute, 429 `rate_limited`
 * with `Retry-After`, without the database. A key the database does know gives its count back. A valid
 * key's path (record in the store or the local cache) is untouched: still one round trip, never limited
 * by the address. Nothing caches "unknown": a new key works at once, whatever was tried before.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import type { Collection, Database } from '../db/index.ts';
import type { ApiKeyCaller, AuthUser } from '../http/env.ts';
import { AppError, validationFailed } from '../http/errors.ts';
import type { Context } from 'hono';
import type { AuditLog } from '../audit/log.ts';
import type { AppEnv } from '../http/env.ts';
import { hashSlotTag, type Store } from '../store/store.ts';
import { sha256hex } from './hash.ts';
import { epochOf, isAdmin, type UserDoc, type UserService } from './users.ts';
import { SessionCache } from './session-cache.ts';
import type { TrackedPrefix } from './sessions.ts';

export const API_KEY_COLLECTION = 'svc__core-apikey';
/** The scope that lets an admin's key reach the admin routes. */
export const ADMIN_SCOPE = 'auth:admin';
/** `svc_` and 43 base64url characters (32 bytes). */
const KEY_PATTERN = /^svc_[A-Za-z0-9_-]{43}$/;
/** `<pluginKey>:<action>`. */
export const SCOPE_PATTERN = /^[a-z0-9_]+:[a-z0-9_.-]+$/;
/** The `<action>` of a scope. */
const ACTION_PATTERN = /^[a-z0-9_.-]+$/;

/**
 * Why the plugin keyed `pluginKey` (its folder, or its npm package name) may not declare `scope`, or
 * null when it may: a plugin's scopes are `<its key>:<action>` (lowercase letters, digits, `_`, `.`,
 * `-`); `auth:admin` is svc's own, and another plugin's key is that plugin's.
 */
export function pluginScopeProblem(pluginKey: string, scope: string): string | null {
  const example = `"${pluginKey}:read"`;
  if (scope === ADMIN_SCOPE) return `it declares the scope "${ADMIN_SCOPE}", which is svc's own: a route for administrators takes authenticate({ admin: true }), which asks a key for ${ADMIN_SCOPE} itself`;
  const colon = scope.indexOf(':');
  if (colon < 0) return `it declares the scope "${scope}", which is not <pluginKey>:<action>: this plugin's scopes are "${pluginKey}:<action>", e.g. ${example}`;
  if (scope.slice(0, colon) !== pluginKey) return `it declares the scope "${scope}", which belongs to "${scope.slice(0, colon)}": this plugin's scopes are "${pluginKey}:<action>", e.g. ${example}`;
  if (!ACTION_PATTERN.test(scope.slice(colon + 1))) return `it declares the scope "${scope}": the action after "${pluginKey}:" must be lowercase letters, digits, "_", "." or "-", e.g. ${example}`;
  return null;
}
/** A key's `prefix`: what its owner sees of it in lists (`svc_` and the first 8 characters). */
const PREFIX_LENGTH = 12;
/** A never-expiring record stays in the store this long unused (it is read back from the database after). */
const STORE_TTL = 7 * 86400;
/** `lastUsedAt`: at most once per key per minute. */
const USED_INTERVAL_MS = 60_000;
const USED_MEMORY = 50_000;
/** The per-key limit counts in minutes of the clock: the counter's key names its minute. */
const RATE_WINDOW = 60;
/** A counter outlives its minute a little (instances' clocks differ by a little), then goes. */
const RATE_TTL = 2 * RATE_WINDOW;
/**
 * Unknown keys one client address may send per minute of the clock (all instances together) before 429:
 * a database read each is at most 5 a second per address. Not lower: revoked keys retried by a client, a
 * CI fleet behind one NAT address, or a test suite on 127.0.0.1 must keep getting 401 `invalid_api_key`.
 */
export const INVALID_PER_IP = 300;

/** A key in the database. */
export interface ApiKeyDoc {
  _id: string;
  userId: string;
  name: string;
  /** SHA-256 hex of the key (unique). */
  hash: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
}

/** What its owner (and an admin) sees of a key: never the key. */
export interface ApiKeyView {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
}

/** The store record of a key (`api-key:<hash>`): what a request needs. Times are epoch ms. */
interface ApiKeyRecord {
  id: string;
  userId: string;
  scopes: string[];
  createdAt: number;
  expiresAt: number | null;
}

export interface NewApiKey {
  name: string;
  scopes: string[];
  /** ISO time; absent or null: never. */
  expiresAt?: string | null;
}

const view = (d: ApiKeyDoc): ApiKeyView => ({ id: d._id, name: d.name, prefix: d.prefix, scopes: d.scopes, createdAt: d.createdAt, expiresAt: d.expiresAt, lastUsedAt: d.lastUsedAt });
/**
 * What a request with a key is given: its caller and its `authUser`, made once per record and shared by
 * the requests that carry the key (frozen: no request can change another's). Per request, no record parse
 * and no new object: the key route's CPU against the cookie route's (bench, issue 55).
 */
export interface KeyEntry {
  caller: ApiKeyCaller;
  user: AuthUser;
}

const entryOf = (record: ApiKeyRecord): KeyEntry => {
  const scopes = Object.freeze([...record.scopes]);
  const caller = Object.freeze({ ...record, scopes }) as ApiKeyCaller;
  // Admin rights go with the `auth:admin` scope, which only an admin's key holds (a demotion revokes it).
  const user = Object.freeze({ userId: record.userId, isAdmin: scopes.includes(ADMIN_SCOPE), provider: 'api_key', apiKey: Object.freeze({ id: record.id, scopes }) }) as AuthUser;
  return { caller, user };
};

/** Records as the store gave them, parsed: requests with one key read the same string again and again. */
const PARSED_MEMORY = 1000;

const recordOf = (d: ApiKeyDoc): ApiKeyRecord => ({ id: d._id, userId: d.userId, scopes: d.scopes, createdAt: Date.parse(d.createdAt), expiresAt: d.expiresAt === null ? null : Date.parse(d.expiresAt) });

export const invalidApiKey = () => new AppError(401, 'invalid_api_key', 'This API key is unknown, expired or revoked');

/**
 * The key of an `Authorization` header that carries one (`Bearer svc_...`, any case of `Bearer`), as
 * sent (maybe malformed); undefined for any other header value (a 0.1.x token keeps `legacy_token`).
 */
export function bearerApiKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const scheme = /^bearer[ \t]+/i.exec(header);
  if (!scheme) return undefined;
  const value = header.slice(scheme[0].length).trim();
  return value.startsWith('svc_') ? value : undefined;
}

/** Keys not expired at `now` (ISO). */
const live = (now: string) => ({ $or: [{ expiresAt: null }, { expiresAt: { $gt: now } }] });

export class ApiKeyService {
  private readonly cache: SessionCache<KeyEntry> | null;
  /** The entry of each record string the store gave lately (`entryFrom`). */
  private readonly parsed = new Map<string, KeyEntry>();
  /** When this instance last wrote each key's `lastUsedAt` (insertion order = age). */
  private readonly used = new Map<string, number>();
  /** Scopes the loaded routes and plugins declare: a new key may hold these (and `auth:admin`). */
  private readonly declared = new Set<string>();

  private constructor(
    readonly docs: Collection<ApiKeyDoc>,
    private readonly store: Store,
    private readonly config: Config,
    private readonly logger: Logger,
  ) {
    const { localCache, localCacheSize, localCacheMaxAge } = config.auth.session;
    this.cache = localCache && store.track ? new SessionCache<KeyEntry>(localCacheSize, localCacheMaxAge * 1000) : null;
    const prefix = config.auth.store.keyPrefix;
    this.prefixTagged = hashSlotTag(prefix) !== prefix;
    const sample = '0'.repeat(64);
    this.together = hashSlotTag(this.key(sample)) === hashSlotTag(this.rateKey(sample, 0));
  }

  /** The key prefix holds a hash tag of its own (`{svc}:`): every key under it shares one slot. */
  private readonly prefixTagged: boolean;
  /** A key's record and its counter share a slot (`rateKey`): one script may name both. */
  private readonly together: boolean;

  static async open(db: Database, store: Store, config: Config, logger: Logger): Promise<ApiKeyService> {
    const docs = await db.collection<ApiKeyDoc>(API_KEY_COLLECTION, [{ fields: ['hash'] }, { fields: ['userId'], unique: false }]);
    return new ApiKeyService(docs, store, config, logger);
  }

  private key(hash: string) {
    return `${this.config.auth.store.keyPrefix}api-key:${hash}`;
  }

  /**
   * The key's request counter for minute `window` (epoch minutes), in the Redis Cluster slot of its record,
   * so one script reads the one and counts in the other: its hash tag is the record key (or the key
   * prefix's own tag, which both keys then share). A prefix with a stray brace gives the keys different slots:
   * `together` is false then, and the two are asked for side by side.
   */
  private rateKey(hash: string, window: number) {
    const prefix = this.config.auth.store.keyPrefix;
    return this.prefixTagged ? `${prefix}api-key-rate:${hash}:${window}` : `${prefix}api-key-rate:{${this.key(hash)}}:${window}`;
  }

  /** The counter of unknown keys sent from `ip` in minute `window` (the address hashed, as other per-address counters). */
  private invalidKey(ip: string, window: number) {
    return `${this.config.auth.store.keyPrefix}api-key-invalid:${sha256hex(ip)}:${window}`;
  }

  private usedKey(hash: string) {
    return `${this.config.auth.store.keyPrefix}api-key-used:${hash}`;
  }

  /**
   * What the local cache keeps (null: no cache), for `SessionService.startLocalCache`, which tracks
   * these keys on the connection that tracks session keys: Redis tells of every write, deletion and
   * expiry of a key record, on any instance, as it does of sessions.
   */
  tracked(): TrackedPrefix | null {
    return this.cache && { prefix: this.key(''), cache: this.cache };
  }

  /** Scopes that routes declare (`authenticate({scopes})`, `defineRoute({scopes})`); while a plugin loads, checked as its own. */
  declare(scopes: Iterable<string>): void {
    for (const scope of scopes) {
      const problem = this.loading === undefined ? null : pluginScopeProblem(this.loading, scope);
      if (problem) throw new Error(problem); // thrown where the plugin asks: its file and line in the message
      this.declared.add(scope);
    }
  }

  /** The plugin whose factory runs now (`whileLoading`): what it declares must be its own scopes. */
  private loading: string | undefined;

  /** Runs a plugin's factory (the loader runs one at a time): each scope it declares meanwhile is checked (`pluginScopeProblem`). */
  async whileLoading<T>(pluginKey: string, run: () => Promise<T>): Promise<T> {
    this.loading = pluginKey;
    try {
      return await run();
    } finally {
      this.loading = undefined;
    }
  }

  /** The scopes a new key may ask for, sorted (`auth:admin` for admins). */
  knownScopes(): string[] {
    return [...this.declared].sort();
  }

  /**
   * 400 `validation_failed` for scopes no loaded route declares, and for `auth:admin` asked by a
   * non-admin. Returns them without duplicates.
   */
  checkScopes(scopes: string[], admin: boolean): string[] {
    const details = scopes.flatMap((scope, i) => {
      if (scope === ADMIN_SCOPE) return admin ? [] : [{ path: `scopes.${i}`, message: `${ADMIN_SCOPE} is for administrators only` }];
      return this.declared.has(scope) ? [] : [{ path: `scopes.${i}`, message: `no route declares the scope ${scope}` }];
    });
    if (details.length) throw validationFailed(details, details.map((d) => `${d.path}: ${d.message}`).join('; '));
    return [...new Set(scopes)];
  }

  /**
   * Makes a key for `userId` (scopes checked by the caller): 409 `too_many_keys` past
   * `auth.apiKeys.maxPerUser` live keys. The count and the insert are one step per user on every
   * instance (a store lock, `SET NX`), so parallel requests cannot pass the limit together. Returns
   * the key (shown once).
   */
  async create(userId: string, input: NewApiKey): Promise<{ key: string; view: ApiKeyView }> {
    return this.withUserLock(userId, async () => {
      const nowIso = new Date().toISOString();
      await this.assertRoom(userId);
      const key = `svc_${randomBytes(32).toString('base64url')}`;
      const doc: ApiKeyDoc = {
        _id: randomUUID(),
        userId,
        name: input.name,
        hash: sha256hex(key),
        prefix: key.slice(0, PREFIX_LENGTH),
        scopes: input.scopes,
        createdAt: nowIso,
        expiresAt: input.expiresAt ?? null,
        lastUsedAt: null,
      };
      await this.docs.insertOne(doc);
      try {
        await this.putRecord(doc);
      } catch (err) {
        await this.discard(doc._id, key);
        throw err; // no key half-made: nobody holds this one
      }
      return { key, view: view(doc) };
    });
  }

  /** 409 `too_many_keys` when the user holds `auth.apiKeys.maxPerUser` live keys already. */
  async assertRoom(userId: string): Promise<void> {
    const max = this.config.auth.apiKeys.maxPerUser;
    if ((await this.docs.count({ userId, ...live(new Date().toISOString()) })) >= max) throw new AppError(409, 'too_many_keys', `A user may hold at most ${max} API keys: revoke one first`);
  }

  /**
   * Runs `change` while no other key of the user is being made, on any instance (`SET NX`, 10 s at most).
   * The lock holds a token of this call and goes only while it still holds it (compare-and-delete): a
   * change that outlasted the 10 s never deletes the lock another call took since.
   */
  private async withUserLock<T>(userId: string, change: () => Promise<T>): Promise<T> {
    const lock = `${this.config.auth.store.keyPrefix}api-key-lock:${userId}`;
    const token = randomBytes(16).toString('base64url');
    for (let attempt = 0; !(await this.store.set(lock, token, { nx: true, ttl: 10 })); attempt++) {
      if (attempt >= 100) throw new AppError(503, 'unavailable', 'Another key of this account is being made; try again');
      await new Promise((r) => setTimeout(r, 20));
    }
    try {
      return await change();
    } finally {
      await this.store.delIfValue(lock, token).catch(() => {});
    }
  }

  private async putRecord(doc: ApiKeyDoc): Promise<void> {
    const record = recordOf(doc);
    const left = record.expiresAt === null ? STORE_TTL : Math.ceil((record.expiresAt - Date.now()) / 1000);
    if (left <= 0) return;
    await this.store.set(this.key(doc.hash), JSON.stringify(record), { ttl: Math.min(left, STORE_TTL) });
  }

  async list(userId: string): Promise<ApiKeyView[]> {
    return (await this.docs.find({ userId }, { sort: { createdAt: 1, _id: 1 } })).map(view);
  }

  async get(userId: string, id: string): Promise<ApiKeyView | null> {
    const doc = await this.docs.findOne({ _id: id, userId });
    return doc && view(doc);
  }

  /**
   * Revokes one key of `userId`; false when it is not one of theirs. The store record goes before the
   * database document and again after it: a store that fails stops the revocation while the document
   * still names the key (so a retry finds it), and a request that read the document meanwhile cannot
   * leave a record behind that outlives it.
   */
  async revoke(userId: string, id: string): Promise<boolean> {
    const doc = await this.docs.findOne({ _id: id, userId });
    if (!doc) return false;
    await this.dropRecord(doc.hash);
    if (!(await this.docs.deleteOne({ _id: doc._id }))) return false;
    await this.dropRecord(doc.hash);
    return true;
  }

  /**
   * Takes back a key its maker could not hand out (nobody holds it): the database document first, then
   * the store record, each tried whatever the other did (a failing store does not keep the document).
   */
  async discard(id: string, key: string): Promise<void> {
    await this.docs.deleteOne({ _id: id }).catch((err: Error) => this.logger.warn({ err: err.message, keyId: id }, 'an API key nobody received was not deleted'));
    await this.dropRecord(sha256hex(key)).catch(() => {});
  }

  /** Revokes every key of a user, or those holding `scope`; returns the ids revoked. */
  async revokeAll(userId: string, scope?: string): Promise<string[]> {
    const docs = (await this.docs.find({ userId })).filter((d) => scope === undefined || d.scopes.includes(scope));
    const revoked: string[] = [];
    for (const doc of docs) {
      await this.dropRecord(doc.hash); // as `revoke`: the store, the database, the store again
      if (await this.docs.deleteOne({ _id: doc._id })) revoked.push(doc._id);
      await this.dropRecord(doc.hash);
    }
    return revoked;
  }

  private async dropRecord(hash: string): Promise<void> {
    await this.store.del(this.key(hash));
    this.cache?.forget(hash);
  }

  /**
   * The caller behind a key (CONTRACT 15): 401 `invalid_api_key` for a malformed, unknown, expired or
   * revoked key; 429 `rate_limited` past `auth.apiKeys.rateLimit` requests in this minute, and for a key
   * the store does not hold when its address (`clientIp`, asked only then) sent `INVALID_PER_IP` such keys
   * this minute. One store round trip for a valid key: the record and the count in one script, or, with
   * the record in the local cache, the count alone (one `INCR`). Counted before the check, on every
   * instance together.
   */
  authenticate(key: string, clientIp: () => string = () => 'unknown'): Promise<KeyEntry> {
    if (!KEY_PATTERN.test(key)) return Promise.reject(invalidApiKey());
    const hash = sha256hex(key);
    const now = Date.now();
    const window = Math.floor(now / (RATE_WINDOW * 1000));
    const counter = this.rateKey(hash, window);
    const cached = this.cache?.get(hash, now);
    if (cached) return this.store.incrWindow(counter, RATE_TTL).then((count) => this.admit(hash, cached, count, now, window));
    // Not in the local cache: from the store, with the count (one script), else from the database
    // (`readUnknown`: the address counted first). What the store gave is kept in the local cache unless
    // Redis said the key changed meanwhile (`SessionCache.begin`).
    const token = this.cache?.begin(hash);
    const read: Promise<[string | null, number]> = this.together
      ? this.store.getAndIncrWindow(this.key(hash), counter, RATE_TTL)
      : this.store.get(this.key(hash)).then((raw) => (raw === null ? [null, 0] : this.store.incrWindow(counter, RATE_TTL).then((n): [string, number] => [raw, n])));
    return read.then(
      ([raw, count]) => {
        const entry = raw === null ? null : this.entryFrom(raw);
        if (token) this.cache!.finish(hash, token, entry, now);
        if (entry) return this.admit(hash, entry, count, now, window);
        // Not counted yet (the store counts only keys it holds): counted once the database knows the key.
        return this.readUnknown(hash, clientIp(), now).then((found) =>
          found ? this.store.incrWindow(counter, RATE_TTL).then((n) => this.admit(hash, found, n, now, window)) : this.admit(hash, null, 0, now, window),
        );
      },
      (err: unknown) => {
        if (token) this.cache!.finish(hash, token, null, now);
        throw err;
      },
    );
  }

  /** The entry of a record string from the store: parsed once, then shared while the store gives the same string. */
  private entryFrom(raw: string): KeyEntry {
    let entry = this.parsed.get(raw);
    if (entry === undefined) {
      if (this.parsed.size >= PARSED_MEMORY) this.parsed.clear();
      entry = entryOf(JSON.parse(raw) as ApiKeyRecord);
      this.parsed.set(raw, entry);
    }
    return entry;
  }

  /** The caller, once the record is found and the request counted: or 401, or 429 past the limit. */
  private admit(hash: string, entry: KeyEntry | null, count: number, now: number, window: number): KeyEntry {
    if (!entry || (entry.caller.expiresAt !== null && entry.caller.expiresAt <= now)) throw invalidApiKey();
    const limit = this.config.auth.apiKeys.rateLimit;
    if (count > limit) {
      const retryAfter = String(Math.max(1, Math.ceil(((window + 1) * RATE_WINDOW * 1000 - now) / 1000)));
      throw new AppError(429, 'rate_limited', `This API key made more than ${limit} requests this minute; try again in ${retryAfter} s`, undefined, { 'Retry-After': retryAfter });
    }
    this.markUsed(entry.caller.id, hash, now);
    return entry;
  }

  /**
   * A key the store does not hold, from `ip`: counted against the address first (on every instance
   * together), then the database decides; past `INVALID_PER_IP` this minute, 429 `rate_limited` without
   * asking it. A key the database knows (its record had left the store) gives the count back.
   */
  private async readUnknown(hash: string, ip: string, now: number): Promise<KeyEntry | null> {
    const window = Math.floor(now / (RATE_WINDOW * 1000));
    const counter = this.invalidKey(ip, window);
    if ((await this.store.incrWindow(counter, RATE_TTL)) > INVALID_PER_IP) {
      const retryAfter = String(Math.max(1, Math.ceil(((window + 1) * RATE_WINDOW * 1000 - now) / 1000)));
      throw new AppError(429, 'rate_limited', `Too many unknown API keys from this address this minute; try again in ${retryAfter} s`, undefined, { 'Retry-After': retryAfter });
    }
    const entry = await this.readBack(hash);
    if (entry) await this.store.decr(counter).catch(() => {});
    return entry;
  }

  /**
   * A key the store does not hold: the database decides. Put back in the store, then looked for again in
   * the database: a revocation that deleted the document meanwhile either is seen here (and the record
   * goes again) or deletes the record after this write.
   */
  private async readBack(hash: string): Promise<KeyEntry | null> {
    const doc = await this.docs.findOne({ hash });
    if (!doc || (doc.expiresAt !== null && Date.parse(doc.expiresAt) <= Date.now())) return null;
    await this.putRecord(doc);
    if (!(await this.docs.findOne({ _id: doc._id }))) {
      await this.dropRecord(hash);
      return null;
    }
    return entryOf(recordOf(doc));
  }

  /** `lastUsedAt`, at most once a minute per key (this instance remembers, the store decides across instances), after the answer. */
  private markUsed(id: string, hash: string, now: number): void {
    const last = this.used.get(hash);
    if (last !== undefined && now - last < USED_INTERVAL_MS) return;
    this.used.delete(hash);
    this.used.set(hash, now);
    if (this.used.size > USED_MEMORY) this.used.delete(this.used.keys().next().value!);
    void this.store
      .set(this.usedKey(hash), '1', { nx: true, ttl: RATE_WINDOW })
      .then((first) => (first ? this.docs.updateOne({ _id: id }, { $set: { lastUsedAt: new Date(now).toISOString() } }) : null))
      .catch((err: Error) => {
        this.used.delete(hash);
        this.logger.warn({ err: err.message }, 'API key lastUsedAt not written');
      });
  }

}

/** What `issueApiKey` uses of `Auth` (declared here so the two modules do not import each other). */
export interface KeyIssuer {
  readonly apiKeys: ApiKeyService;
  readonly users: UserService;
  readonly audit: AuditLog;
}

/**
 * Makes a key for a user, as `POST /auth/api-keys` and an approved device login do: the scopes checked
 * (400), the limit (409), the `api_key.created` record. A lifecycle event of the user while the key
 * was made (a reset, a deletion, a demotion that takes `auth:admin` away) takes the key back (see
 * `Auth.login` for the order: write, then read the user again): 409 `account_changed`. `confirm` runs
 * once the key is made and before it is recorded (the device login takes its code there); whatever
 * fails after the key was made (the user's read, the check, `confirm`) takes it back: nothing half-made.
 */
export async function issueApiKey(
  auth: KeyIssuer,
  c: Context<AppEnv> | null,
  user: UserDoc,
  input: NewApiKey,
  confirm?: () => Promise<void>,
): Promise<{ key: string; view: ApiKeyView }> {
  const scopes = auth.apiKeys.checkScopes(input.scopes, isAdmin(user));
  const created = await auth.apiKeys.create(user._id, { ...input, scopes });
  try {
    const fresh = await auth.users.findById(user._id);
    if (!fresh || epochOf(fresh) !== epochOf(user) || (scopes.includes(ADMIN_SCOPE) && !isAdmin(fresh))) {
      throw new AppError(409, 'account_changed', 'The account changed while the key was made: try again');
    }
    await confirm?.();
  } catch (err) {
    await auth.apiKeys.discard(created.view.id, created.key);
    throw err;
  }
  await auth.audit.record(c, { type: 'api_key.created', actor: { type: 'user', id: user._id }, subject: { userId: user._id, email: user.email }, details: { keyId: created.view.id, name: created.view.name, scopes } });
  return created;
}
