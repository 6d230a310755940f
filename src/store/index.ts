import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import type { StoreRole } from '../config/schema.ts';
import { MemoryStore } from './memory.ts';
import { RedisStore } from './redis.ts';
import { parseRedisUrl } from './redis-url.ts';
import type { Store } from './store.ts';

export type { Store } from './store.ts';

/**
 * The store instances of one svc process: `cache` plus one per `SVC_STORE_<NAME>_URL`, each opened
 * once per Redis db index in use. Roles (`auth.storeInstances.*`, `cache.db`, `cache.dbs`) map onto them.
 */
export class Stores {
  private constructor(
    private readonly config: Config,
    private readonly opened: Map<string, Store>,
  ) {}

  /** Store instance ids that are configured (for the cache list and health). */
  get ids(): string[] {
    return Object.keys(this.config.env.storeUrls).length ? Object.keys(this.config.env.storeUrls) : ['cache'];
  }

  /** The store behind a role, e.g. `sessions`. */
  forRole(role: StoreRole): Store {
    const db = this.config.cache.dbs[role] ?? this.config.cache.db;
    return this.get(this.config.auth.storeInstances[role], db);
  }

  /** An instance by id (default db of `cache.db`); throws for an unknown id. */
  instance(id: string, db = this.config.cache.db): Store {
    return this.get(id, db);
  }

  private get(id: string, db: number | undefined): Store {
    const store = this.opened.get(`${id}/${db ?? 'url'}`) ?? this.opened.get(`${id}/*`);
    if (!store) throw new Error(`unknown store instance "${id}" (db ${db})`);
    return store;
  }

  all(): Store[] {
    return [...new Set(this.opened.values())];
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((s) => s.close()));
  }

  /**
   * Opens every instance and db index the config uses and pings it; an unreachable Redis stops
   * start-up with a message naming the instance (password hidden). Without any URL, one embedded
   * MemoryStore serves every role and db.
   */
  static async open(config: Config, logger: Logger): Promise<Stores> {
    const opened = new Map<string, Store>();
    const urls = config.env.storeUrls;
    if (!urls.cache) {
      logger.warn('CACHE_URL is not set: using the embedded in-memory store (sessions are lost on restart, not shared between instances)');
      opened.set('cache/*', new MemoryStore());
    }
    const wanted = new Set<string>();
    for (const id of Object.keys(urls)) wanted.add(`${id}/${config.cache.db ?? 'url'}`);
    for (const role of ['sessions', 'oauthState', 'providerTokens'] as const) {
      const id = config.auth.storeInstances[role];
      if (urls[id]) wanted.add(`${id}/${config.cache.dbs[role] ?? config.cache.db ?? 'url'}`);
    }
    try {
      for (const key of wanted) {
        const [id, dbText] = key.split('/') as [string, string];
        const url = urls[id]!;
        const db = dbText === 'url' ? undefined : Number(dbText);
        if (db && parseRedisUrl(url).kind === 'cluster') {
          throw new Error(`store instance "${id}" is a Redis Cluster, which has database 0 only: remove cache.db / cache.dbs (${db})`);
        }
        const store = new RedisStore({ url, name: id, db, password: config.env.storePassword, logger });
        opened.set(key, store);
        await store.connect(url);
      }
    } catch (err) {
      await Promise.allSettled([...opened.values()].map((s) => s.close()));
      throw err;
    }
    return new Stores(config, opened);
  }
}
