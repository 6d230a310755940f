import { MongoClient, MongoServerError, type Db, type Collection as MongoCollection, type Document } from 'mongodb';
import { UnavailableError } from '../http/errors.ts';
import { DuplicateKeyError, type Collection, type Database, type Doc, type Filter, type FindOptions, type UniqueIndex, type Update } from './db.ts';

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

class MongoCollectionAdapter<T extends Doc> implements Collection<T> {
  constructor(private readonly c: MongoCollection<Doc>) {}

  private async run<R>(op: () => Promise<R>): Promise<R> {
    try {
      return await op();
    } catch (err) {
      throw translate(err, this.c.collectionName);
    }
  }

  insertOne(doc: T) {
    return this.run(async () => {
      await this.c.insertOne({ ...doc });
      return doc;
    });
  }

  findOne(filter: Filter) {
    return this.run(() => this.c.findOne(filter) as Promise<T | null>);
  }

  find(filter: Filter, opts: FindOptions = {}) {
    return this.run(() => {
      let cursor = this.c.find(filter);
      if (opts.sort) cursor = cursor.sort(opts.sort);
      if (opts.skip) cursor = cursor.skip(opts.skip);
      if (opts.limit) cursor = cursor.limit(opts.limit);
      return cursor.toArray() as unknown as Promise<T[]>;
    });
  }

  count(filter: Filter) {
    return this.run(() => this.c.countDocuments(filter));
  }

  updateOne(filter: Filter, update: Update) {
    return this.run(() => this.c.findOneAndUpdate(filter, update as Document, { returnDocument: 'after' }) as Promise<T | null>);
  }

  upsert(doc: T) {
    return this.run(async () => {
      await this.c.replaceOne({ _id: doc._id } as Document, doc, { upsert: true });
    });
  }

  deleteOne(filter: Filter) {
    return this.run(async () => (await this.c.deleteOne(filter)).deletedCount > 0);
  }

  deleteMany(filter: Filter) {
    return this.run(async () => (await this.c.deleteMany(filter)).deletedCount);
  }
}

/**
 * The document database on MongoDB through the official driver. Server selection gives up after
 * 1.5 s, so a request during an outage gets 503 within 2 s; the driver reconnects by itself.
 */
export class MongoDatabase implements Database {
  readonly kind = 'mongodb';
  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
  ) {}

  static async connect(url: string): Promise<MongoDatabase> {
    let client: MongoClient;
    try {
      // Every operation, server selection included, gives up after 1.5 s (client-side operation
      // timeout), so a dead or frozen server costs a request 503 within 2 s, never a hang.
      client = new MongoClient(url, {
        timeoutMS: 1500,
        serverSelectionTimeoutMS: 1200,
        connectTimeoutMS: 2000,
        heartbeatFrequencyMS: 2000,
        ignoreUndefined: true,
      });
    } catch (err) {
      // The driver parses the URL here, synchronously: name the culprit like any start-up failure.
      throw new Error(`MONGODB_URL ${redactMongoUrl(url)} is not a valid MongoDB connection string: ${(err as Error).message}`, { cause: err });
    }
    try {
      await client.connect();
      // CONTRACT section 1: the URL's database, else `svc` (the driver alone would pick `test`).
      const name = /^mongodb(?:\+srv)?:\/\/[^/]+\/([^?]+)/.exec(url)?.[1];
      const database = new MongoDatabase(client, client.db(name ? decodeURIComponent(name) : 'svc'));
      await database.ping();
      return database;
    } catch (err) {
      await client.close().catch(() => {});
      throw new Error(`cannot reach MongoDB at ${redactMongoUrl(url)}: ${(err as Error).message}`, { cause: err });
    }
  }

  async collection<T extends Doc>(name: string, indexes: UniqueIndex[] = []): Promise<Collection<T>> {
    const c = this.db.collection<Doc>(name);
    try {
      for (const index of indexes) {
        await c.createIndex(Object.fromEntries(index.fields.map((f) => [f, 1])), { unique: true });
      }
    } catch (err) {
      throw translate(err, name);
    }
    return new MongoCollectionAdapter<T>(c);
  }

  async ping() {
    try {
      await this.db.command({ ping: 1 });
    } catch (err) {
      throw new UnavailableError('db', err);
    }
  }

  async close() {
    await this.client.close();
  }
}
