import nedb from '@seald-io/nedb';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { appendThroughOpenFile } from './embedded-append.ts';
import { DuplicateKeyError, type Collection, type Database, type Doc, type Filter, type FindOptions, type UniqueIndex, type Update } from './db.ts';

// nedb is CommonJS whose typings declare an ES default export: at run time the default import is
// the class itself, for the type checker it is the module. Bridge the two once, here.
const Datastore = nedb as unknown as typeof nedb.default;
type Datastore<T> = nedb.default<T>;

function translate(err: unknown, collection: string): unknown {
  return (err as { errorType?: string }).errorType === 'uniqueViolated' ? new DuplicateKeyError(collection, err) : err;
}

class NedbCollection<T extends Doc> implements Collection<T> {
  constructor(
    private readonly ds: Datastore<T>,
    private readonly name: string,
  ) {}

  async insertOne(doc: T) {
    try {
      return (await this.ds.insertAsync(doc)) as T;
    } catch (err) {
      throw translate(err, this.name);
    }
  }

  async insertMany(docs: T[]) {
    if (!docs.length) return;
    try {
      await this.ds.insertAsync(docs);
    } catch (err) {
      throw translate(err, this.name);
    }
  }

  findOne(filter: Filter) {
    return this.ds.findOneAsync(filter) as Promise<T | null>;
  }

  async find(filter: Filter, opts: FindOptions = {}) {
    let cursor = this.ds.findAsync(filter);
    if (opts.sort) cursor = cursor.sort(opts.sort);
    if (opts.skip) cursor = cursor.skip(opts.skip);
    if (opts.limit) cursor = cursor.limit(opts.limit);
    return (await cursor) as T[];
  }

  count(filter: Filter) {
    return this.ds.countAsync(filter) as Promise<number>;
  }

  async updateOne(filter: Filter, update: Update) {
    try {
      const { affectedDocuments } = await this.ds.updateAsync(filter, update, { returnUpdatedDocs: true, multi: false });
      return (affectedDocuments as T | null) ?? null;
    } catch (err) {
      throw translate(err, this.name);
    }
  }

  async upsert(doc: T) {
    try {
      await this.ds.updateAsync({ _id: doc._id }, doc, { upsert: true });
    } catch (err) {
      throw translate(err, this.name);
    }
  }

  async deleteOne(filter: Filter) {
    return (await this.ds.removeAsync(filter, { multi: false })) > 0;
  }

  deleteMany(filter: Filter) {
    return this.ds.removeAsync(filter, { multi: true });
  }
}

/**
 * The folder and its files hold password hashes, TOTP secrets and provider secrets: the service's user
 * only. nedb's own defaults are 0755 / 0644, and a mode given at creation passes through the umask.
 */
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
const modes = { dirMode: DIR_MODE, fileMode: FILE_MODE };

/**
 * Tightens a folder that may predate these modes (an older svc, a checkout's `.svc-data/`, a folder the
 * operator made): the folder itself and every file in it, with chmod, which no umask touches. Symbolic
 * links are left alone (chmod would change what they point to).
 */
function tighten(dir: string): void {
  chmodSync(dir, DIR_MODE);
  for (const name of readdirSync(dir)) {
    const file = path.join(dir, name);
    if (lstatSync(file).isFile()) chmodSync(file, FILE_MODE);
  }
}

/**
 * The embedded document database: `@seald-io/nedb` files under `SVC_DATA_DIR`, one per collection,
 * so a first `npm start` keeps its users across restarts. A lock file keeps a second process out
 * (two writers would corrupt the append-only files). `inMemory` is for tests.
 */
export class EmbeddedDatabase implements Database {
  readonly kind = 'embedded';
  /**
   * One datastore per collection, as the promise of its load: two callers that open a collection at the
   * same moment (instances' start-up work, parallel requests) must get the same store, not one each
   * (the second would write into a store nobody reads).
   */
  private readonly stores = new Map<string, Promise<Datastore<Doc>>>();
  private readonly lockFile?: string;

  constructor(private readonly dir: string | null) {
    if (!dir) return;
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
    tighten(dir);
    this.lockFile = path.join(dir, 'LOCK');
    try {
      writeFileSync(this.lockFile, String(process.pid), { flag: 'wx', mode: FILE_MODE });
    } catch {
      const pid = Number(readFileSync(this.lockFile, 'utf8'));
      if (pid && pid !== process.pid && isAlive(pid)) {
        throw new Error(`the embedded database in ${dir} is in use by process ${pid}; stop it, or set SVC_DATA_DIR or MONGODB_URL`);
      }
      writeFileSync(this.lockFile, String(process.pid), { mode: FILE_MODE }); // a stale lock left by a crash
    }
  }

  static inMemory(): EmbeddedDatabase {
    return new EmbeddedDatabase(null);
  }

  async collection<T extends Doc>(name: string, indexes: UniqueIndex[] = []): Promise<Collection<T>> {
    let loading = this.stores.get(name);
    if (!loading) {
      const store = new Datastore<Doc>(this.dir ? { filename: path.join(this.dir, `${name}.db`), modes } : { inMemoryOnly: true });
      appendThroughOpenFile(store);
      loading = store.loadDatabaseAsync().then(() => {
        if (this.dir) store.setAutocompactionInterval(10 * 60 * 1000);
        return store;
      });
      loading.catch(() => this.stores.delete(name)); // a failed load is tried again by the next caller
      this.stores.set(name, loading);
    }
    const ds = (await loading) as unknown as Datastore<T>;
    for (const index of indexes) {
      try {
        await ds.ensureIndexAsync({ fieldName: index.fields.length === 1 ? index.fields[0]! : index.fields, unique: index.unique ?? true });
      } catch (err) {
        throw translate(err, name);
      }
    }
    return new NedbCollection<T>(ds, name);
  }

  async ping() {}

  async close() {
    for (const loading of this.stores.values()) {
      const ds = await loading.catch(() => null);
      if (!ds) continue;
      ds.stopAutocompaction();
      await ds.compactDatafileAsync().catch(() => {});
    }
    this.stores.clear();
    if (this.lockFile) rmSync(this.lockFile, { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie holds no lock: a crashed svc whose parent died too (the first process of
  // src/secret-env.ts, killed) waits to be reaped by PID 1, which some inits do only every second or two.
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return !existsSync('/proc/self/stat'); // gone meanwhile; or no /proc (not Linux): kill(pid, 0) is all there is
  }
}
