import { defineRoute, notFound, UnavailableError, type PluginInstance, type StoreInspector } from '../../src/index.ts';
import { listInstances, openInspector, unavailable } from './instances.ts';
import { presentEntry } from './present.ts';
import { entriesQuery, entryQuery } from './schemas.ts';

const tags = ['svc__cache'];

/**
 * Runs `work` with an inspector opened for this request and closes it whatever happens. The store
 * being unreachable (refused, timed out, closed) is 503 naming the instance; anything else (a Redis
 * reply error) stays an error (500).
 */
async function withInspector<T>(instance: PluginInstance, id: string, db: number, work: (r: StoreInspector) => Promise<T>): Promise<T> {
  const inspector = await openInspector(instance, id, db);
  try {
    return await work(inspector);
  } catch (err) {
    throw err instanceof UnavailableError ? unavailable(instance, id, err.cause) : err;
  } finally {
    inspector.close();
  }
}

/** The cache list routes (SPEC.md "Cache list endpoints", CONTRACT section 9): admin only, read only. */
export function cacheRoutes(instance: PluginInstance) {
  const adminOnly = instance.auth.authenticate({ admin: true });
  const hideSecrets = instance.config.env.hideSecrets;
  return [
    defineRoute({
      method: 'GET',
      path: '/cacheInstances',
      onRequest: adminOnly,
      config: { type: 'dataList' },
      schema: { summary: 'Store instances', description: '`cache` (CACHE_URL, else the embedded store) and one per SVC_STORE_<NAME>_URL.', tags },
      handler: (c) => c.json(listInstances(instance)),
    }),
    defineRoute({
      method: 'GET',
      path: '/cacheEntries',
      onRequest: adminOnly,
      config: { type: 'dataList' },
      schema: { summary: 'A page of keys', description: 'SCAN with MATCH (keys sorted by name on a keyspace of up to 100,000 keys, in SCAN order above), then TYPE and TTL of the page in one pipelined round trip.', tags, query: entriesQuery },
      handler: async (c, { query }) => {
        const { items, hasMore } = await withInspector(instance, query.instance, query.db, (r) => r.scan(query));
        return c.json({ items, offset: query.offset, limit: query.limit, hasMore });
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/cacheEntry',
      onRequest: adminOnly,
      config: { type: 'dataRead' },
      schema: { summary: 'One key', description: 'Value cut at 16 KiB; JSON parsed, secrets redacted unless HIDE_SECRETS=false.', tags, query: entryQuery },
      handler: async (c, { query }) => {
        const raw = await withInspector(instance, query.instance, query.db, (r) => r.read(query.key));
        if (!raw) throw notFound('No such key (it may have expired)');
        return c.json(presentEntry(query.key, raw, hideSecrets));
      },
    }),
  ];
}
