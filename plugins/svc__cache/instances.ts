import { AppError, UnavailableError, type ServerInstance, type StoreInspector } from '../../src/index.ts';

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

/**
 * Opens a read-only view of one instance and db for one request, through the store's own inspection
 * interface (`Store.inspect`: a Redis store opens a short-lived connection of its own, so a slow or
 * dead Redis never touches the connection the sessions use); the caller closes it.
 */
export async function openInspector(instance: ServerInstance, id: string, db: number): Promise<StoreInspector> {
  if (!listInstances(instance).some((i) => i.id === id)) {
    throw new AppError(404, 'unknown_instance', `No store instance "${id}"; GET /svc__cache/cacheInstances lists them`);
  }
  try {
    return await instance.stores.instance(id).inspect(db);
  } catch (err) {
    throw err instanceof UnavailableError ? unavailable(instance, id, err.cause) : err;
  }
}

/** 503 for an instance that cannot be reached; the log line names it, never its URL (it may hold a password). */
export function unavailable(instance: ServerInstance, id: string, err: unknown): AppError {
  instance.logger.warn({ plugin: 'svc__cache', instance: id, err: (err as Error)?.message }, 'cache list: store instance unreachable');
  const error = new AppError(503, 'unavailable', `The store instance "${id}" is unavailable, try again shortly`);
  error.cause = err;
  return error;
}
