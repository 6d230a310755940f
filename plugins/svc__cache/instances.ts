import { AppError, type ServerInstance } from '../../src/index.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { memoryReader } from './memory-reader.ts';
import type { CacheReader } from './reader.ts';
import { redisReader } from './redis-reader.ts';

export interface CacheInstance {
  id: string;
  label: string;
}

/**
 * The store instances the cache list can read, from what config already parsed of the environment
 * (`CACHE_URL` -> `cache`, `SVC_STORE_<NAME>_URL` -> camelCase name), `cache` first. Without
 * `CACHE_URL`, `cache` is the embedded in-memory store, shown read-only like a Redis one (its data
 * lives in this process, so it is what this process's sessions really use).
 */
export function listInstances(instance: ServerInstance): CacheInstance[] {
  const ids = Object.keys(instance.config.env.storeUrls);
  const all = ['cache', ...ids.filter((id) => id !== 'cache').sort()];
  return all.map((id) => ({ id, label: id }));
}

/** Opens a read-only view of one instance and db for one request; the caller closes it. */
export async function openReader(instance: ServerInstance, id: string, db: number): Promise<CacheReader> {
  const url = instance.config.env.storeUrls[id];
  if (url) {
    try {
      return await redisReader({ url, db, password: instance.config.env.storePassword });
    } catch (err) {
      throw unavailable(instance, id, err);
    }
  }
  if (id === 'cache') {
    const store = instance.stores.instance('cache');
    if (store instanceof MemoryStore) return memoryReader(store);
  }
  throw new AppError(404, 'unknown_instance', `No store instance "${id}"; GET /svc__cache/cacheInstances lists them`);
}

/** 503 for an instance that cannot be reached; the log line names it, never its URL (it may hold a password). */
export function unavailable(instance: ServerInstance, id: string, err: unknown): AppError {
  instance.logger.warn({ plugin: 'svc__cache', instance: id, err: (err as Error)?.message }, 'cache list: store instance unreachable');
  const error = new AppError(503, 'unavailable', `The store instance "${id}" is unavailable, try again shortly`);
  error.cause = err;
  return error;
}
