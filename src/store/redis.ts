import { createHash } from 'node:crypto';
import { ReplyError, type Cluster, type Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { UnavailableError } from '../http/errors.ts';
import type { StoreInspector } from './inspect.ts';
import { redisInspector } from './redis-inspect.ts';
import { GetExConnection } from './getex-connection.ts';
import { createRedisClient, parseRedisUrl } from './redis-url.ts';
import type { SetOptions, Store, Subscription, TrackingListener } from './store.ts';

/** Where Redis sends the names of tracked keys to a RESP2 connection that redirects to itself. */
const INVALIDATE_CHANNEL = '__redis__:invalidate';
/** Opening a connection: longer than this is a Redis that does not answer. */
const CONNECT_TIMEOUT_MS = 2000;
/** A reply later than this is an outage (the request is answered 503). */
const COMMAND_TIMEOUT_MS = 1500;
/** How long start-up waits for a store in all (several Sentinels, each up to CONNECT_TIMEOUT_MS). */
const START_DEADLINE_MS = 10_000;

/** A Redis URL with its password hidden, safe for log lines and error messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(invalid URL)';
  }
}

/** A failed command as the store reports it: a Redis reply error as is (a bug), anything else as an outage. */
const storeError = (err: unknown): unknown => (err instanceof ReplyError ? err : new UnavailableError('store', err));
const rethrowAsStoreError = (err: unknown): never => {
  throw storeError(err);
};

export interface RedisStoreOptions {
  url: string;
  name: string;
  db?: number;
  password?: string;
  logger?: Logger;
}

/** `decr`: an existing counter only; one back at 0 or below goes (Store.decr). */
const DECR_SCRIPT = "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end local n = redis.call('DECR', KEYS[1]) if n <= 0 then redis.call('DEL', KEYS[1]) end return n";
/**
 * A counter and its window in one atomic step: the first increment starts the window. One EVALSHA
 * where MULTI/INCR/EXPIRE NX/EXEC sent four commands (an API key's per-request rate count: the
 * transaction's parsing was 13% of a key request's CPU in a profile). Atomic, so a crash cannot leave
 * a counter without its expiry.
 */
const INCR_SCRIPT = "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n";
/**
 * `getAndIncrWindow`: a record and the count of its use in one atomic step, one round trip (an API key
 * request: its record and its per-key rate count). KEYS[1] the record, KEYS[2] the counter (one hash slot),
 * counted only when the record exists. One string back, `<count> <record>` or empty: no array reply to decode. Sent by hash without
 * ioredis' `defineCommand`, whose per-call wrapping (a subclassed command, two more promises) was a
 * tenth of what a key request cost beyond a cookie request in a profile (bench, issue 55).
 */
const GET_INCR_SCRIPT =
  "local v = redis.call('GET', KEYS[1]) if not v then return '' end local n = redis.call('INCR', KEYS[2]) if n == 1 then redis.call('EXPIRE', KEYS[2], ARGV[1]) end return n .. ' ' .. v";
const GET_INCR_SHA = createHash('sha1').update(GET_INCR_SCRIPT).digest('hex');
const getIncrReply = (reply: unknown): [string | null, number] => {
  const text = String(reply);
  const space = text.indexOf(' ');
  return space < 0 ? [null, 0] : [text.slice(space + 1), Number(text.slice(0, space))];
};
/** `delIfValue`: compare-and-delete of one key (a lock let go by its owner only). */
const DEL_IF_SCRIPT = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/** The scripts, sent once and then called by hash (ioredis `defineCommand`: EVALSHA, EVAL when not cached). */
interface Scripts {
  svcIncr(key: string, ttl: number): Promise<number>;
  svcDecr(key: string): Promise<number>;
  svcDelIf(key: string, value: string): Promise<number>;
}

/**
 * The store on Redis through ioredis: one server, a Cluster or Sentinel (`redis-url.ts`). Every command
 * touches one key (a transaction or script only ever names that key), so each works on a Cluster as
 * is; the one exception, `getAndIncrWindow`, names two keys its caller puts in one hash slot. Tuned to fail fast instead of queueing: with no offline queue
 * and a 1.5 s command timeout, a request during an outage gets 503 within 2 s, and ioredis keeps
 * reconnecting in the background so svc recovers by itself when Redis returns.
 */
export class RedisStore implements Store {
  readonly name: string;
  readonly client: Redis | Cluster;
  /** Starts true: errors before the first connection are reported by `connect`, not logged. */
  private down = true;
  private lastError?: Error;
  private readonly logger?: Logger;
  /** The connection in subscriber mode (Redis allows nothing else on it), opened on the first `subscribe`. */
  private subscriber?: Promise<Redis | Cluster>;
  private readonly subscriptions = new Map<string, Set<{ onMessage: (message: string) => void; onResume?: () => void }>>();
  /** Where `inspect` connects: this store's server (URL and SVC_STORE_PASSWORD), any db. */
  private readonly server: { url: string; password?: string };
  /** The session lookup's GETEX on a connection of its own, on a plain single server (getex-connection.ts). */
  private readonly getExConnection?: GetExConnection;

  constructor(opts: RedisStoreOptions) {
    this.server = { url: opts.url, password: opts.password };
    this.name = opts.db ? `${opts.name}/db${opts.db}` : opts.name;
    const options: RedisOptions = {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: CONNECT_TIMEOUT_MS,
      commandTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy: (times) => Math.min(100 * times, 1000),
      ...(opts.db !== undefined ? { db: opts.db } : {}),
    };
    const target = parseRedisUrl(opts.url);
    const urlHasPassword = target.kind === 'single' ? Boolean(new URL(opts.url).password) : Boolean(target.password);
    if (opts.password && !urlHasPassword) options.password = opts.password;
    this.client = createRedisClient(target, options);
    if (target.kind === 'single' && !target.tls) {
      const { host, port, path, username, password, db } = (this.client as Redis).options;
      this.getExConnection = new GetExConnection({
        host,
        port,
        path,
        username,
        password,
        db,
        timeoutMs: COMMAND_TIMEOUT_MS,
        onRefused: (message) => opts.logger?.warn({ store: this.name, err: message }, 'the store refused to set up the session lookups\' own connection (AUTH or SELECT): they go on the shared one'),
      });
    }
    this.client.defineCommand('svcIncr', { numberOfKeys: 1, lua: INCR_SCRIPT });
    this.client.defineCommand('svcDecr', { numberOfKeys: 1, lua: DECR_SCRIPT });
    this.client.defineCommand('svcDelIf', { numberOfKeys: 1, lua: DEL_IF_SCRIPT });
    const log = opts.logger;
    this.logger = log;
    let connectedOnce = false;
    this.client.on('error', (err: Error) => {
      this.lastError = err;
      if (!this.down) log?.error({ store: this.name, err: err.message }, 'store connection lost; retrying in the background');
      this.down = true;
    });
    this.client.on('close', () => {
      if (!this.down) log?.error({ store: this.name, err: this.lastError?.message }, 'store connection lost; retrying in the background');
      this.down = true;
    });
    this.client.on('ready', () => {
      if (connectedOnce && this.down) log?.info({ store: this.name }, 'store connection restored');
      connectedOnce = true;
      this.down = false;
    });
  }

  inspect(db: number): Promise<StoreInspector> {
    return redisInspector({ ...this.server, db });
  }

  /**
   * Connects at start-up; a store that cannot be reached stops start-up with a clear message. A single
   * server or a cluster fails on its first refused attempt; a Sentinel setup would ask its Sentinels
   * again for ever (ioredis), so start-up as a whole gives up after START_DEADLINE_MS.
   */
  async connect(url: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${START_DEADLINE_MS / 1000} s`)), START_DEADLINE_MS);
    });
    try {
      await Promise.race([this.client.connect().then(() => this.client.ping()), deadline]);
      this.getExConnection?.open();
    } catch (err) {
      this.client.disconnect();
      // ioredis reports "Connection is closed"; the socket's own error (ECONNREFUSED...) says why.
      const reasons = new Set([(err as Error).message, this.lastError?.message].filter((m): m is string => Boolean(m)));
      if (reasons.size > 1) reasons.delete('Connection is closed.');
      // The deadlines in the message: start-up gives up, never retries for ever.
      throw new Error(`cannot reach store "${this.name}" at ${redactUrl(url)} (connect timeout ${CONNECT_TIMEOUT_MS / 1000} s, start-up deadline ${START_DEADLINE_MS / 1000} s): ${[...reasons].join(': ')}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Runs a command; connection problems become UnavailableError, Redis reply errors stay bugs. A
   * `catch` on the command's promise, not an async wrapper: on the hot path (GETEX), each await is
   * one more turn of the microtask queue per request.
   */
  private run<T>(command: () => Promise<T>): Promise<T> {
    this.batchWrites();
    try {
      return command().catch(rethrowAsStoreError);
    } catch (err) {
      return Promise.reject(storeError(err));
    }
  }

  /** Whether the connection's writes are held until the end of this turn of the event loop. */
  private corked = false;

  /**
   * Holds the connection's writes (`cork`) until the I/O callbacks of this turn of the event loop have
   * run (`setImmediate`), then sends them in one system call: the GETEXes of all the requests that one
   * read of the sockets brought go to Redis in one write, and Redis answers them in one write too.
   * Commands keep their order (one connection, one stream) and are late by less than a turn.
   * Measured on GET /auth/session (autocannon -c 50): 20-22k -> 28-29k requests/s, server CPU per
   * request 28-32 -> 25-26 µs user and 17 -> 9 µs system. ioredis's own `enableAutoPipelining` also
   * batches, but builds a Pipeline per batch and keeps one batch in flight at a time: it cost more user
   * CPU than it saved (34 µs), and its longer-lived objects took peak RSS from 107 to 158 MB.
   * A Cluster has a connection per node and is left as it is.
   */
  private batchWrites(): void {
    if (this.corked) return;
    const stream = (this.client as Partial<Pick<Redis, 'stream'>>).stream;
    if (!stream?.writable) return;
    stream.cork();
    this.corked = true;
    setImmediate(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  get(key: string) {
    return this.run(() => this.client.get(key));
  }

  getEx(key: string, ttl: number) {
    if (this.getExConnection?.ready) return this.getExConnection.getEx(key, ttl).catch(rethrowAsStoreError);
    return this.run(() => this.client.getex(key, 'EX', ttl));
  }

  set(key: string, value: string, opts: SetOptions = {}) {
    return this.run(async () => {
      const args: (string | number)[] = [];
      if (opts.ttl) args.push('EX', opts.ttl);
      else if (opts.keepTtl) args.push('KEEPTTL');
      if (opts.nx) args.push('NX');
      if (opts.xx) args.push('XX');
      // ioredis' overloads do not cover a spread of optional flags; `call` sends them as given.
      const reply = await this.client.call('SET', key, value, ...args);
      return reply === 'OK';
    });
  }

  getDel(key: string) {
    return this.run(() => this.client.getdel(key));
  }

  del(key: string) {
    return this.run(async () => (await this.client.del(key)) > 0);
  }

  delIfValue(key: string, value: string) {
    return this.run(async () => (await (this.client as unknown as Scripts).svcDelIf(key, value)) === 1);
  }

  expire(key: string, ttl: number) {
    return this.run(async () => (await this.client.expire(key, ttl)) === 1);
  }

  ttl(key: string) {
    return this.run(() => this.client.ttl(key));
  }

  incr(key: string, ttl: number) {
    return this.run(async () => Number(await (this.client as unknown as Scripts).svcIncr(key, ttl)));
  }

  incrWindow(key: string, ttl: number) {
    // A plain INCR (one command, no script): the key names its window, so the EXPIRE need not be atomic with it.
    return this.run(() =>
      this.client.incr(key).then((n) => {
        if (n === 1) this.client.expire(key, ttl).catch(() => {}); // an idle key at worst (Store.incrWindow)
        return n;
      }),
    );
  }

  getAndIncrWindow(key: string, counter: string, ttl: number) {
    return this.run(() =>
      this.client.evalsha(GET_INCR_SHA, 2, key, counter, ttl).then(getIncrReply, (err: Error) => {
        if (!err.message.startsWith('NOSCRIPT')) throw err;
        return this.client.eval(GET_INCR_SCRIPT, 2, key, counter, ttl).then(getIncrReply); // a server that had not seen it (or flushed its scripts)
      }),
    );
  }

  decr(key: string) {
    // One key, atomic: DECR alone would create a counter without TTL when the key just expired, and a
    // DEL sent after it could remove another instance's increment made in between.
    return this.run(async () => Number(await (this.client as unknown as Scripts).svcDecr(key)));
  }

  sAdd(key: string, members: string[], ttl?: number) {
    return this.run(async () => {
      if (members.length === 0) return;
      if (!ttl) {
        await this.client.sadd(key, ...members);
        return;
      }
      const results = await this.client.multi().sadd(key, ...members).expire(key, ttl).exec();
      const failed = results?.find(([err]) => err);
      if (failed) throw failed[0];
    });
  }

  sRem(key: string, members: string[]) {
    return this.run(async () => {
      if (members.length > 0) await this.client.srem(key, ...members);
    });
  }

  sMembers(key: string) {
    return this.run(() => this.client.smembers(key));
  }

  publish(channel: string, message: string) {
    return this.run(async () => {
      await this.client.publish(channel, message);
    });
  }

  /**
   * A connection of its own for a long-running consumer (the socket.io adapter's blocking stream
   * reads and its subscriber): no command timeout (a blocking XREAD waits 5 s by design) and commands
   * wait for a reconnect instead of failing at once (a reader that failed at once would spin).
   */
  dedicatedConnection(): Redis | Cluster {
    const overrides = { commandTimeout: undefined, enableOfflineQueue: true, maxRetriesPerRequest: null, lazyConnect: false };
    if ((this.client as Cluster).isCluster) {
      const cluster = this.client as Cluster;
      return cluster.duplicate(undefined, { lazyConnect: false, enableOfflineQueue: true, redisOptions: { ...cluster.options.redisOptions, ...overrides } });
    }
    return (this.client as Redis).duplicate(overrides);
  }

  /**
   * Opens the subscriber connection once. ioredis re-subscribes by itself after a reconnect; what
   * was published while it was away is lost, so every subscription's `onResume` runs then.
   */
  private openSubscriber(): Promise<Redis | Cluster> {
    this.subscriber ??= (async () => {
      // A cluster's subscriber connects to one node; classic pub/sub reaches every node of a cluster.
      const sub: Redis | Cluster = (this.client as Redis).duplicate();
      let lost = false;
      sub.on('error', (err: Error) => {
        if (!lost && !this.closing) this.logger?.error({ store: this.name, err: err.message }, 'store subscriber connection lost; retrying in the background');
        lost = true;
      });
      sub.on('close', () => {
        lost = true;
      });
      sub.on('ready', () => {
        if (!lost) return;
        lost = false;
        this.logger?.info({ store: this.name }, 'store subscriber connection restored');
        for (const set of this.subscriptions.values()) for (const s of set) s.onResume?.();
      });
      sub.on('message', (channel: string, message: string) => {
        for (const s of this.subscriptions.get(channel) ?? []) s.onMessage(message);
      });
      try {
        await sub.connect();
      } catch (err) {
        sub.disconnect();
        this.subscriber = undefined;
        throw new UnavailableError('store', err);
      }
      return sub;
    })();
    return this.subscriber;
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onResume?: () => void): Promise<Subscription> {
    const sub = await this.openSubscriber();
    const entry = { onMessage, onResume };
    let set = this.subscriptions.get(channel);
    if (!set) {
      this.subscriptions.set(channel, (set = new Set()));
      try {
        await this.run(() => sub.subscribe(channel));
      } catch (err) {
        this.subscriptions.delete(channel);
        throw err;
      }
    }
    set.add(entry);
    return {
      unsubscribe: async () => {
        set.delete(entry);
        if (set.size > 0 || this.subscriptions.get(channel) !== set) return;
        this.subscriptions.delete(channel);
        await this.run(() => sub.unsubscribe(channel)).catch(() => {}); // gone with the connection anyway
      },
    };
  }

  /**
   * One connection per tracked prefix, in RESP2 (ioredis 6 speaks RESP3 and drops `invalidate` pushes):
   * `CLIENT TRACKING ON REDIRECT <its own id> BCAST PREFIX <prefix>`, then `SUBSCRIBE __redis__:invalidate`.
   * Redis then sends the name of every key under the prefix that any client writes, deletes, or that
   * expires, to this connection. Tracking lives and dies with the connection: `live(false)` on close,
   * and the set-up runs again (then `live(true)`) on every reconnect. A server that refuses the set-up
   * (Redis before 6, a proxy) leaves tracking off for good, with one warning.
   */
  async track(prefix: string | string[], listener: TrackingListener): Promise<() => Promise<void>> {
    if ((this.client as Cluster).isCluster) throw new Error('a Redis Cluster cannot track keys for a local cache (tracking is per node)');
    const conn = (this.client as Redis).duplicate({ protocol: 2, autoResubscribe: false, enableReadyCheck: true });
    let stopped = false;
    let refused = false;
    const setUp = async () => {
      try {
        const id = await conn.client('ID');
        await conn.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(id), 'BCAST', ...[prefix].flat().flatMap((p) => ['PREFIX', p]));
        await conn.subscribe(INVALIDATE_CHANNEL);
        if (conn.status === 'ready') listener.live(true);
      } catch (err) {
        if (!(err instanceof ReplyError)) return; // the connection went meanwhile: the next 'ready' tries again
        refused = true;
        this.logger?.warn({ store: this.name, err: (err as Error).message }, 'the store refused key tracking (CLIENT TRACKING needs Redis 6 or later, reached directly): the local session cache stays off');
        conn.disconnect();
      }
    };
    conn.on('ready', () => void setUp());
    conn.on('close', () => listener.live(false));
    conn.on('error', () => {}); // the store's own connection reports outages
    conn.on('messageBuffer', (channel: Buffer, keys: Buffer[] | null) => {
      if (channel.toString() !== INVALIDATE_CHANNEL) return;
      listener.invalidate(Array.isArray(keys) ? keys.map(String) : null);
    });
    await conn.connect().catch(() => {}); // down now: ioredis keeps trying, tracking starts when it is back
    return async () => {
      if (stopped) return;
      stopped = true;
      listener.live(false);
      if (refused) return;
      await conn.quit().catch(() => conn.disconnect());
    };
  }

  ping() {
    return this.run(async () => {
      await this.client.ping();
    });
  }

  private closing = false;

  async close() {
    this.down = true; // a deliberate close is not an outage: nothing to log
    this.closing = true;
    this.getExConnection?.close();
    const sub = await this.subscriber?.catch(() => undefined);
    for (const client of [this.client, sub]) {
      if (!client) continue;
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    }
  }
}
