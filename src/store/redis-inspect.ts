import { Cluster, ReplyError, type Redis } from 'ioredis';
import { UnavailableError } from '../http/errors.ts';
import { COLLECTION_READ_CAP, STRING_READ_CAP, type InspectedEntry, type InspectedKey, type ScanQuery, type StoreInspector } from './inspect.ts';
import { createRedisClient, parseRedisUrl } from './redis-url.ts';

/** SCAN COUNT bounds: enough keys per round trip for a page, never a long stall of Redis. */
const MIN_SCAN_COUNT = 1000;
const MAX_SCAN_COUNT = 10_000;
/** Connecting (TCP, SELECT, CLIENT SETNAME) must finish within this, or the request answers 503. */
const CONNECT_DEADLINE_MS = 1000;

export interface RedisInspectorOptions {
  url: string;
  db: number;
  /** `SVC_STORE_PASSWORD`, used when the URL has none (as the store itself does). */
  password?: string;
}

/**
 * A client of its own for one request (never the store's: a SCAN of a big keyspace must not queue
 * behind or in front of the sessions' commands, and it may read another db). No offline queue, no retries and a short connect timeout: a Redis
 * that is down answers 503 at once instead of holding the request. The name shows it in CLIENT LIST.
 */
export function openClient(opts: RedisInspectorOptions): Redis | Cluster {
  const target = parseRedisUrl(opts.url);
  const urlHasPassword = target.kind === 'single' ? Boolean(new URL(opts.url).password) : Boolean(target.password);
  const client = createRedisClient(target, {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: CONNECT_DEADLINE_MS,
    commandTimeout: 1500,
    connectionName: 'svc__cache', // its one user, the cache list: how an operator spots it in CLIENT LIST
    disableClientInfo: true, // two CLIENT SETINFO round trips per request buy nothing here
    ...(target.kind === 'single' ? { db: opts.db } : {}),
    ...(opts.password && !urlHasPassword ? { password: opts.password } : {}),
  });
  // Failures reach the caller through the rejected command; without a listener ioredis would also print them.
  client.on('error', () => {});
  return client;
}

/** Test seam: runs between the SCAN of a page and the pipeline that reads its types and TTLs. */
export interface PageHooks {
  afterScan?: (keys: string[]) => Promise<void>;
}

/**
 * The servers whose keys make up the keyspace: the client itself, or every master of a cluster (in
 * address order, so pages stay stable). SCAN walks one server; a cluster's keys are spread over its masters.
 */
function keyspaceNodes(client: Redis | Cluster): Redis[] {
  if (!(client instanceof Cluster)) return [client];
  const address = (n: Redis) => `${n.options.host}:${String(n.options.port).padStart(5, '0')}`;
  return client.nodes('master').sort((a, b) => address(a).localeCompare(address(b)));
}

/**
 * Up to this many keys in the keyspace (DBSIZE, every master of a cluster together), a page is cut
 * from the matching keys sorted by name: SCAN walks the whole keyspace (a few rounds of COUNT
 * MAX_SCAN_COUNT) on every page. Pages then stay put when Redis grows or shrinks its hash table
 * between two requests, which reorders SCAN: after a burst of writes, pages in SCAN order showed
 * one key twice and missed another. Above it, walking everything for each page would cost a second
 * per million keys, so pages follow SCAN order and stop early.
 */
export const SORTED_KEYSPACE_LIMIT = 100_000;

/**
 * One page of keys by SCAN (never KEYS, which blocks Redis for the whole keyspace), over every master
 * of a cluster, then one pipelined round trip per server reads TYPE and TTL of the page. Sorted by
 * name up to SORTED_KEYSPACE_LIMIT keys; above it in SCAN order, stable while Redis does not resize.
 */
export async function scanPage(client: Redis | Cluster, query: ScanQuery, hooks: PageHooks = {}): Promise<{ items: InspectedKey[]; hasMore: boolean }> {
  const nodes = keyspaceNodes(client);
  const size = (await Promise.all(nodes.map((node) => node.dbsize()))).reduce((a, b) => a + b, 0);
  const { keys, hasMore } = size <= SORTED_KEYSPACE_LIMIT ? await sortedKeys(nodes, query) : await scanOrderKeys(nodes, query);
  await hooks.afterScan?.(keys.map((k) => k.key));

  const summaries = new Map<string, InspectedKey>();
  for (const node of new Set(keys.map((k) => k.node))) {
    const mine = keys.filter((k) => k.node === node).map((k) => k.key);
    const pipeline = node.pipeline();
    for (const key of mine) pipeline.type(key).ttl(key);
    const results = (await pipeline.exec()) ?? [];
    mine.forEach((key, i) => {
      const [typeErr, type] = results[2 * i] ?? [];
      const [ttlErr, ttl] = results[2 * i + 1] ?? [];
      if (typeErr) throw typeErr;
      if (ttlErr) throw ttlErr;
      // A key that expired after the scan: TYPE says "none", TTL -2.
      summaries.set(key, { key, ttl: Number(ttl), type: String(type) });
    });
  }
  return { items: keys.map((k) => summaries.get(k.key)!), hasMore };
}

type PageKeys = { keys: { key: string; node: Redis }[]; hasMore: boolean };

/** SCAN MATCH over every node in turn, one batch of keys per round trip; `count()` is asked before each. */
async function* scanBatches(nodes: Redis[], pattern: string, count: () => number): AsyncGenerator<{ node: Redis; batch: string[] }> {
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern || '*', 'COUNT', count());
      cursor = next;
      yield { node, batch };
    } while (cursor !== '0');
  }
}

/** Every matching key of every node (a Map: SCAN may return a key twice while Redis rehashes), sorted, then the page. */
async function sortedKeys(nodes: Redis[], { pattern, offset, limit }: ScanQuery): Promise<PageKeys> {
  const found = new Map<string, Redis>();
  for await (const { node, batch } of scanBatches(nodes, pattern, () => MAX_SCAN_COUNT)) {
    for (const key of batch) found.set(key, node);
  }
  const names = [...found.keys()].sort();
  const page = names.slice(offset, offset + limit).map((key) => ({ key, node: found.get(key)! }));
  return { keys: page, hasMore: names.length > offset + limit };
}

/**
 * SCAN order, node after node (masters in address order): the order of SCAN does not depend on COUNT,
 * so skipping `offset` keys gives the same pages on every call while the hash tables keep their size.
 * Stops one key after the page (which says whether there is a next one).
 */
async function scanOrderKeys(nodes: Redis[], { pattern, offset, limit }: ScanQuery): Promise<PageKeys> {
  const wanted = offset + limit + 1;
  const keys: { key: string; node: Redis }[] = [];
  const onPage = new Set<string>(); // SCAN may return a key twice while Redis rehashes
  let seen = 0;
  for await (const { node, batch } of scanBatches(nodes, pattern, () => Math.min(MAX_SCAN_COUNT, Math.max(MIN_SCAN_COUNT, wanted - seen)))) {
    for (const key of batch) {
      if (seen >= offset && seen < offset + limit) {
        if (onPage.has(key)) continue;
        onPage.add(key);
        keys.push({ key, node });
      }
      seen++;
    }
    if (seen >= wanted) break;
  }
  return { keys, hasMore: seen > offset + limit };
}

type Reply = [Error | null, unknown][];

function values(results: Reply | null): unknown[] {
  return (results ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

/**
 * One key in two round trips: TYPE and TTL, then size and contents by type. Reads are bounded (a
 * prefix of a huge string, the first elements of a huge collection) so one key cannot stall Redis.
 * A key that disappears between the two is reported missing.
 */
export async function readEntry(client: Redis | Cluster, key: string): Promise<InspectedEntry | null> {
  const [type, ttlReply] = values(await client.pipeline().type(key).ttl(key).exec()) as [string, number];
  if (type === 'none') return null;
  const ttl = Number(ttlReply);
  const p = client.pipeline().exists(key);
  switch (type) {
    case 'string': {
      const [exists, size, text] = values(await p.strlen(key).getrange(key, 0, STRING_READ_CAP - 1).exec()) as [number, number, string];
      return exists ? { type, ttl, size, text, cut: size > STRING_READ_CAP } : null;
    }
    case 'hash': {
      const [exists, size, [, flat]] = values(await p.hlen(key).hscan(key, '0', 'COUNT', COLLECTION_READ_CAP).exec()) as [number, number, [string, string[]]];
      const pairs: [string, string][] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([flat[i]!, flat[i + 1]!]);
      const fields = Object.fromEntries(pairs); // fromEntries: a field named __proto__ stays a field
      return exists ? { type, ttl, size, fields, cut: Object.keys(fields).length < size } : null;
    }
    case 'list': {
      const [exists, size, members] = values(await p.llen(key).lrange(key, 0, COLLECTION_READ_CAP - 1).exec()) as [number, number, string[]];
      return exists ? { type, ttl, size, members, cut: members.length < size } : null;
    }
    case 'set': {
      const [exists, size, [, members]] = values(await p.scard(key).sscan(key, '0', 'COUNT', COLLECTION_READ_CAP).exec()) as [number, number, [string, string[]]];
      const unique = [...new Set(members)].sort(); // sets have no order: sorted reads better and stays stable
      return exists ? { type, ttl, size, members: unique, cut: unique.length < size } : null;
    }
    case 'zset': {
      const [exists, size, flat] = values(await p.zcard(key).zrange(key, '0', String(COLLECTION_READ_CAP - 1), 'WITHSCORES').exec()) as [number, number, string[]];
      const members: { member: string; score: number }[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) members.push({ member: flat[i]!, score: Number(flat[i + 1]) });
      return exists ? { type, ttl, size, members, cut: members.length < size } : null;
    }
    default: {
      const [exists] = values(await p.exec()) as [number];
      return exists ? { type, ttl, size: 0, unsupported: true } : null;
    }
  }
}

/** A failure as the store reports it: a Redis reply error as is, anything else (connection, timeout) as an outage. */
const storeError = (err: unknown): never => {
  throw err instanceof ReplyError ? err : new UnavailableError('store', err);
};

/**
 * The inspector of one request on a Redis instance (`RedisStore.inspect`); connects before the first
 * command. An unreachable Redis, at the connect or later, is an `UnavailableError`.
 */
export async function redisInspector(opts: RedisInspectorOptions): Promise<StoreInspector> {
  const client = openClient(opts);
  // One deadline for the whole handshake: ioredis sends SELECT and CLIENT SETNAME after the TCP
  // connect, and on a Redis that accepts but never answers each would wait out the command timeout.
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_DEADLINE_MS} ms`)), CONNECT_DEADLINE_MS);
  });
  try {
    await Promise.race([client.connect(), deadline]);
  } catch (err) {
    client.disconnect();
    throw new UnavailableError('store', err); // whatever stopped the handshake (a refused SELECT included)
  } finally {
    clearTimeout(timer);
  }
  return {
    scan: (q) => scanPage(client, q).catch(storeError),
    read: (key) => readEntry(client, key).catch(storeError),
    // disconnect, not QUIT: closes at once, also when Redis no longer answers.
    close: () => client.disconnect(),
  };
}
