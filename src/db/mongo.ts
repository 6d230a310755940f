import {
  MongoClient,
  MongoServerError,
  type Db,
  type Collection as MongoCollection,
  type Document,
  type ServerClosedEvent,
  type ServerHeartbeatFailedEvent,
  type ServerHeartbeatStartedEvent,
  type ServerHeartbeatSucceededEvent,
} from 'mongodb';
import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { UnavailableError } from '../http/errors.ts';
import { DuplicateKeyError, type Collection, type Database, type Doc, type Filter, type FindOptions, type UniqueIndex, type Update } from './db.ts';

/** How long start-up and an operation wait for a usable server (see `serverSelectionTimeoutMS` below). */
const SERVER_SELECTION_TIMEOUT_MS = 1200;

/**
 * A MongoDB URL with its password hidden. The credentials end at the last `@`, so a password with
 * an unescaped `@` or `/` (a common mistake in a pasted URL) is hidden too, not printed.
 */
export function redactMongoUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? '';
  const rest = url.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  const colon = rest.indexOf(':');
  if (at < 0 || colon < 0 || colon > at) return url;
  return `${scheme}${rest.slice(0, colon)}:***${rest.slice(at)}`;
}

/** Read duplicates by code 11000 only (some servers omit keyValue/keyPattern). */
function translate(err: unknown, collection: string): unknown {
  if (err instanceof MongoServerError) {
    return err.code === 11000 ? new DuplicateKeyError(collection, err) : err;
  }
  // Network, server selection, pool and topology errors: the server is out of reach.
  const socketGone = ['EPIPE', 'ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END'];
  if (
    err instanceof Error &&
    (/^Mongo(Network|ServerSelection|NotConnected|TopologyClosed|PoolCleared|NetworkTimeout|OperationTimeout)/.test(err.name) ||
      socketGone.includes((err as { code?: string }).code ?? ''))
  ) {
    return new UnavailableError('db', err);
  }
  return err;
}

export interface ReachabilityOptions {
  /** A check still pending after this long is stuck, whatever its connection looks like. */
  stuckAfterMs?: number;
  /** How often pending checks are looked at. */
  watchEveryMs?: number;
  /** Whether the check of the server at `address` runs on a connection whose socket is already destroyed. */
  onDeadSocket?: (address: string) => boolean;
  /** Ends a stuck check of the server at `address`; false when it found nothing to end. */
  unstick?: (address: string) => boolean;
}

/**
 * A check of the driver's monitor can hang forever (mongodb 7.9): when the server closes the
 * monitor's connection, Node destroys the socket one step before it emits 'close' (which is when the
 * driver marks the connection closed), and a check that starts in between writes to the destroyed
 * socket. `write` then returns false and reports EPIPE to its callback only, with no 'error' event;
 * the driver waits for a 'drain' or an 'error' that never come, and its monitor never checks again.
 * Seen in the resilience suite ("MongoDB stopped and restarted under load": `/health` still 503 long
 * after MongoDB was back), and reproduced with a plain socket. Handing the socket the error it
 * swallowed ends the check as failed; the monitor opens a new connection on its next check. This
 * reaches into the driver (its topology's server and monitor), so it reports whether it found them.
 */
type MonitorInternals = { topology?: { s?: { servers?: Map<string, { monitor?: { connection?: { socket?: EventEmitter & { destroyed?: boolean } } | null } }> } } };
const monitorSocket = (client: MongoClient, address: string) =>
  (client as unknown as MonitorInternals).topology?.s?.servers?.get(address)?.monitor?.connection?.socket;

/** Whether the monitor's connection to `address` sits on a destroyed socket: a check on it cannot end by itself. */
export function monitorSocketDestroyed(client: MongoClient, address: string): boolean {
  return monitorSocket(client, address)?.destroyed === true;
}

export function unstickMonitor(client: MongoClient, address: string): boolean {
  const socket = monitorSocket(client, address);
  if (!socket || socket.listenerCount('error') === 0) return false; // nobody would hear it: an 'error' without listeners throws
  socket.emit('error', Object.assign(new Error(`the driver's check of ${address} hung on a connection the server had closed`), { code: 'EPIPE' }));
  return true;
}

/**
 * Whether MongoDB can be reached, as the driver's own server monitor last saw it, so that requests
 * fail at once while it cannot, instead of each waiting out server selection (1.2 s) for a 503.
 *
 * The monitor checks every server every `heartbeatFrequencyMS` on a connection of its own (while a
 * server is away: a TCP connect that is refused). When the last check of EVERY known server failed, the
 * database is unreachable: operations are refused at once with 503. Reads already waiting for a
 * server are answered 503 then too (abandoned: harmless for a read, which the driver then drops when
 * server selection gives up); writes are not, since the driver would still send one whose server
 * returns in time. The first successful check ends it; the driver makes its connection pool ready in
 * that same step, so this state never outlives the driver's own view of the server. In load-balanced
 * mode there are no checks (no heartbeat events): operations wait out server selection as before.
 * Exported for its unit test only.
 */
export class Reachability {
  /** The last check of each monitored server: null when it succeeded, else its failure. */
  private readonly servers = new Map<string, Error | null>();
  /** Rejecters of reads in flight, to answer them once the database is found unreachable. */
  private readonly reads = new Set<(err: unknown) => void>();
  private down: Error | null = null;
  /** Checks in progress: server address -> when it started (performance.now()). */
  private readonly checking = new Map<string, number>();
  private readonly watchdog: NodeJS.Timeout;

  constructor(client: MongoClient, logger?: Logger, opts: ReachabilityOptions = {}) {
    const {
      stuckAfterMs = 5000,
      watchEveryMs = 200,
      onDeadSocket = (address: string) => monitorSocketDestroyed(client, address),
      unstick = (address: string) => unstickMonitor(client, address),
    } = opts;
    let reachedOnce = false;
    const update = () => {
      const checks = [...this.servers.values()];
      if (checks.length === 0) {
        this.down = null; // closed: nothing is monitored, nothing to report
        return;
      }
      const failure = checks.every((c) => c !== null) ? checks[0]! : null;
      if (failure && !this.down) {
        // Before the first good check, start-up is still connecting and says itself why it gave up.
        if (reachedOnce) logger?.error({ db: 'mongodb', err: failure.message }, 'database unreachable: answering 503 until it is back');
        const err = new UnavailableError('db', failure);
        for (const reject of this.reads) reject(err);
        this.reads.clear();
      } else if (!failure && this.down && reachedOnce) {
        logger?.info({ db: 'mongodb' }, 'database reachable again');
      }
      if (!failure) reachedOnce = true;
      this.down = failure;
    };
    client.on('serverHeartbeatStarted', (e: ServerHeartbeatStartedEvent) => {
      this.checking.set(e.connectionId, performance.now());
    });
    client.on('serverHeartbeatSucceeded', (e: ServerHeartbeatSucceededEvent) => {
      this.checking.delete(e.connectionId);
      this.servers.set(e.connectionId, null);
      update();
    });
    client.on('serverHeartbeatFailed', (e: ServerHeartbeatFailedEvent) => {
      this.checking.delete(e.connectionId);
      this.servers.set(e.connectionId, e.failure);
      update();
    });
    client.on('serverClosed', (e: ServerClosedEvent) => {
      this.checking.delete(e.address);
      this.servers.delete(e.address);
      update();
    });
    // A check on a destroyed socket hangs (see unstickMonitor): it is ended at once, before operations
    // pile up behind server selection (a login reads and writes: two waits would pass CONTRACT's 2 s).
    // Any other check normally ends within 2 x connectTimeoutMS (connect, then hello); one still
    // pending after `stuckAfterMs` is ended too. Either way its server counts as unreachable (503 at
    // once) until the monitor's next good check.
    this.watchdog = setInterval(() => {
      const now = performance.now();
      for (const [address, started] of this.checking) {
        const dead = onDeadSocket(address);
        if (!dead && now - started < stuckAfterMs) continue;
        this.checking.delete(address);
        const ended = unstick(address);
        logger?.warn(
          { db: 'mongodb', server: address, pendingMs: Math.round(now - started), deadSocket: dead, ended },
          "the driver's check of the database hung: ending it so that monitoring goes on",
        );
        this.servers.set(address, new Error(`the check of ${address} ${dead ? 'runs on a closed connection' : `did not complete in ${stuckAfterMs} ms`}`));
        update();
      }
    }, watchEveryMs).unref();
  }

  /** Stops the watchdog (the client is closing). */
  close(): void {
    clearInterval(this.watchdog);
  }

  /** Runs a write, unless the database is known to be unreachable (then 503 at once). */
  write<R>(op: () => Promise<R>): Promise<R> {
    return this.down ? Promise.reject(new UnavailableError('db', this.down)) : op();
  }

  /** Runs a read, unless the database is known to be unreachable; 503 as soon as it becomes so. */
  read<R>(op: () => Promise<R>): Promise<R> {
    if (this.down) return Promise.reject(new UnavailableError('db', this.down));
    return new Promise<R>((resolve, reject) => {
      this.reads.add(reject);
      const settle = () => this.reads.delete(reject);
      let pending: Promise<R>;
      try {
        pending = op();
      } catch (err) {
        settle();
        reject(err);
        return;
      }
      // An abandoned read ends later in the driver: its result is handled here and dropped.
      pending.then(
        (value) => {
          settle();
          resolve(value);
        },
        (err: unknown) => {
          settle();
          reject(err);
        },
      );
    });
  }
}

class MongoCollectionAdapter<T extends Doc> implements Collection<T> {
  constructor(
    private readonly c: MongoCollection<Doc>,
    private readonly reach: Reachability,
  ) {}

  private async run<R>(kind: 'read' | 'write', op: () => Promise<R>): Promise<R> {
    try {
      return await this.reach[kind](op);
    } catch (err) {
      throw translate(err, this.c.collectionName);
    }
  }

  insertOne(doc: T) {
    return this.run('write', async () => {
      await this.c.insertOne({ ...doc });
      return doc;
    });
  }

  async insertMany(docs: T[]) {
    if (!docs.length) return;
    await this.run('write', async () => {
      await this.c.insertMany(docs.map((doc) => ({ ...doc })));
    });
  }

  findOne(filter: Filter) {
    return this.run('read', () => this.c.findOne(filter) as Promise<T | null>);
  }

  find(filter: Filter, opts: FindOptions = {}) {
    return this.run('read', () => {
      let cursor = this.c.find(filter);
      if (opts.sort) cursor = cursor.sort(opts.sort);
      if (opts.skip) cursor = cursor.skip(opts.skip);
      if (opts.limit) cursor = cursor.limit(opts.limit);
      return cursor.toArray() as unknown as Promise<T[]>;
    });
  }

  count(filter: Filter) {
    return this.run('read', () => this.c.countDocuments(filter));
  }

  updateOne(filter: Filter, update: Update) {
    return this.run('write', () => this.c.findOneAndUpdate(filter, update as Document, { returnDocument: 'after' }) as Promise<T | null>);
  }

  upsert(doc: T) {
    return this.run('write', async () => {
      await this.c.replaceOne({ _id: doc._id } as Document, doc, { upsert: true });
    });
  }

  deleteOne(filter: Filter) {
    return this.run('write', async () => (await this.c.deleteOne(filter)).deletedCount > 0);
  }

  deleteMany(filter: Filter) {
    return this.run('write', async () => (await this.c.deleteMany(filter)).deletedCount);
  }
}

/**
 * The document database on MongoDB through the official driver. While the driver's monitor cannot
 * reach the server, every operation is answered 503 at once (see Reachability); the monitor keeps
 * checking every 500 ms, and svc recovers by itself within about that once MongoDB is back.
 */
export class MongoDatabase implements Database {
  readonly kind = 'mongodb';
  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
    private readonly reach: Reachability,
  ) {}

  static async connect(url: string, logger?: Logger): Promise<MongoDatabase> {
    let client: MongoClient;
    try {
      client = new MongoClient(url, {
        // How soon svc notices that MongoDB is back: the monitor checks each server this often. The
        // driver's default, 10 s, suits a fleet of thousands of clients; svc runs a few instances, and
        // a check is one `hello` on the monitor's own connection (while the server is away: one
        // refused TCP connect). At 500 ms a returning MongoDB serves svc again within ~0.5 s of
        // accepting connections, not up to 10 s later.
        heartbeatFrequencyMS: 500,
        // How soon svc notices that MongoDB went away: an operation that finds its connection gone
        // asks the monitor for a check at once, but no sooner than this after the previous check
        // (driver default 500 ms). Operations that start in that window wait for a server; at 100 ms
        // few do, and the rest are answered 503 at once (Reachability).
        minHeartbeatFrequencyMS: 100,
        // Opening a connection (TCP connect + handshake), and the monitor's check: longer than this is
        // a server that does not answer. 2 s, not less: the monitor's check on a healthy server that is
        // merely slow (a busy machine, a server just started: measured up to ~1.1 s for the first
        // `hello` of the test server under load) must not count as an outage, since a failed check
        // clears the connection pool and interrupts operations in progress.
        connectTimeoutMS: 2000,
        // How long an operation waits for a usable server before 503: the writes that start in the
        // window above (reads are answered when the check fails), and start-up. 1.2 s keeps them
        // within the 2 s of CONTRACT section 2 with room for a busy event loop. (A server that stops
        // answering on open connections, frozen or cut off, fails the monitor's check after
        // connectTimeoutMS; the driver then interrupts the operations waiting on it: 503 within ~2.5 s.)
        serverSelectionTimeoutMS: SERVER_SELECTION_TIMEOUT_MS,
        // On a replica set (docs/scaling.md "Scaling out"): a write interrupted by a primary election is retried
        // once on the new primary (user, provider and link writes are single-document, safe to retry),
        // and is acknowledged by a majority, so a failover cannot roll back an account change. Reads go
        // to the primary: svc reads users right after writing them (login, account changes), and a
        // secondary may lag. Set in code, these take precedence over the same options in MONGODB_URL.
        retryWrites: true,
        retryReads: true,
        writeConcern: { w: 'majority' },
        readPreference: 'primary',
        ignoreUndefined: true,
        // Not `timeoutMS`: driver 7 ignores it (deprecated, "has no effect") and only warns.
      });
    } catch (err) {
      // The driver parses the URL here, synchronously: name the culprit like any start-up failure.
      throw new Error(`MONGODB_URL ${redactMongoUrl(url)} is not a valid MongoDB connection string: ${(err as Error).message}`, { cause: err });
    }
    // Before connecting: the first heartbeats are part of the connect.
    const reach = new Reachability(client, logger);
    try {
      await client.connect();
      // CONTRACT section 1: the URL's database, else `svc` (the driver alone would pick `test`).
      const name = /^mongodb(?:\+srv)?:\/\/[^/]+\/([^?]+)/.exec(url)?.[1];
      const database = new MongoDatabase(client, client.db(name ? decodeURIComponent(name) : 'svc'), reach);
      await database.ping();
      return database;
    } catch (err) {
      reach.close();
      await client.close().catch(() => {});
      // The deadline in the message: an operator (and the tests) can tell a refused connection that
      // ended start-up at once from one that waited for the driver's default 30 s.
      throw new Error(`cannot reach MongoDB at ${redactMongoUrl(url)} (server selection timeout ${SERVER_SELECTION_TIMEOUT_MS / 1000} s): ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  async collection<T extends Doc>(name: string, indexes: UniqueIndex[] = []): Promise<Collection<T>> {
    const c = this.db.collection<Doc>(name);
    try {
      for (const index of indexes) {
        const options = { unique: index.unique ?? true, ...(index.expireAfterSeconds !== undefined ? { expireAfterSeconds: index.expireAfterSeconds } : {}) };
        await this.reach.write(() => c.createIndex(Object.fromEntries(index.fields.map((f) => [f, 1])), options));
      }
    } catch (err) {
      throw translate(err, name);
    }
    return new MongoCollectionAdapter<T>(c, this.reach);
  }

  async ping() {
    try {
      await this.reach.read(() => this.db.command({ ping: 1 }));
    } catch (err) {
      throw new UnavailableError('db', err);
    }
  }

  async close() {
    this.reach.close();
    await this.client.close();
  }
}
