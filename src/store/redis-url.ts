/**
 * Store URLs (CACHE_URL, SVC_STORE_<NAME>_URL) for the three shapes of Redis users run, each through
 * ioredis' own client for it:
 *
 *   redis://[user:pass@]host:port[/db]                 one server       -> `new Redis(url)`
 *   redis+cluster://[user:pass@]host:port[,host:port]  Redis Cluster    -> `new Cluster(nodes)` (any reachable
 *                                                                          nodes; the rest are discovered)
 *   redis+sentinel://[user:pass@]host:port[,host:port]/<masterName>[/<db>]
 *                                                      Sentinel         -> `new Redis({ sentinels, name })`
 *
 * `rediss...` turns on TLS. The credentials are the data nodes'; Sentinels are asked with the same ones.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

export type RedisTarget =
  | { kind: 'single'; url: string; tls: boolean }
  | { kind: 'cluster'; nodes: { host: string; port: number }[]; username?: string; password?: string; tls: boolean }
  | { kind: 'sentinel'; sentinels: { host: string; port: number }[]; masterName: string; db?: number; username?: string; password?: string; tls: boolean };

const MULTI = /^(rediss?)\+(cluster|sentinel):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/@]+)(?:\/([^/]*))?(?:\/([^/]*))?\/?$/;

function hostPorts(list: string, what: string): { host: string; port: number }[] {
  return list.split(',').map((part) => {
    const m = /^(\[[0-9a-fA-F:]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(part.trim());
    const port = Number(m?.[2] ?? (what === 'sentinel' ? 26379 : 6379));
    if (!m || port < 1 || port > 65535) throw new Error(`"${part.trim()}" is not host:port`);
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
  });
}

/** The database of a URL's path (`/3`): undefined when there is none; 0..15, as Redis has by default. */
function databaseOf(part: string | undefined): number | undefined {
  if (part === undefined || part === '') return undefined;
  const db = /^\d{1,2}$/.test(part) ? Number(part) : NaN;
  if (!(db <= 15)) throw new Error(`the database "${part.slice(0, 20)}" is not 0..15`);
  return db;
}

const decode = (part: string | undefined) => (part ? decodeURIComponent(part) : undefined);

/** Parses a store URL; throws an Error whose message says what is wrong (never repeating a password). */
export function parseRedisUrl(url: string): RedisTarget {
  if (/^rediss?:\/\//.test(url)) {
    // The Redis client parses it the same way; fail here with a reason rather than a bare "Invalid URL".
    if (!URL.canParse(url)) throw new Error('the URL is not valid (percent-encode special characters in the password, e.g. / as %2F)');
    // ioredis would SELECT "NaN" (an unhandled rejection) or, out of range, stay on database 0 unnoticed.
    databaseOf(new URL(url).pathname.replace(/^\/|\/$/g, ''));
    return { kind: 'single', url, tls: url.startsWith('rediss:') };
  }
  const m = MULTI.exec(url);
  if (!m) {
    throw new Error('the URL must be redis://host:port, redis+cluster://host:port[,host:port...] or redis+sentinel://host:port[,host:port...]/<masterName>[/<db>] (rediss... for TLS)');
  }
  const [, scheme, kind, user, pass, hosts, first, second] = m;
  let username: string | undefined;
  let password: string | undefined;
  try {
    [username, password] = [decode(user), decode(pass)];
  } catch {
    throw new Error('the password is not valid percent-encoding (encode special characters, e.g. / as %2F)');
  }
  const creds = { ...(username ? { username } : {}), ...(password ? { password } : {}) };
  const tls = scheme === 'rediss';
  if (kind === 'cluster') {
    if (first) throw new Error('a cluster URL takes no path: Redis Cluster has database 0 only');
    return { kind: 'cluster', nodes: hostPorts(hosts!, 'cluster'), tls, ...creds };
  }
  if (!first) throw new Error('a sentinel URL needs the master name: redis+sentinel://host:port/<masterName>');
  const db = databaseOf(second);
  return { kind: 'sentinel', sentinels: hostPorts(hosts!, 'sentinel'), masterName: decodeURIComponent(first), tls, ...(db !== undefined ? { db } : {}), ...creds };
}

function withDb(url: string, db: number): string {
  const parsed = new URL(url);
  parsed.pathname = `/${db}`;
  return parsed.toString();
}

/** The client for a target: `options` are svc's connection settings (timeouts, retries, db, password). */
export function createRedisClient(target: RedisTarget, options: RedisOptions): Redis | Cluster {
  // A database given in `options` (`cache.db`/`cache.dbs`, the cache list's `db`) wins over the URL's:
  // ioredis itself would keep the URL's, so a request for db 5 on `redis://host/10` read db 10.
  if (target.kind === 'single') return new Redis(options.db === undefined ? target.url : withDb(target.url, options.db), options);
  const creds = { ...(target.username ? { username: target.username } : {}), ...(target.password ? { password: target.password } : {}) };
  const tls = target.tls ? { tls: {} } : {};
  if (target.kind === 'sentinel') {
    return new Redis({
      ...options,
      ...creds,
      ...tls,
      sentinels: target.sentinels,
      name: target.masterName,
      ...(options.db === undefined && target.db !== undefined ? { db: target.db } : {}),
      // The Sentinels take the same credentials (and TLS) as the data nodes.
      ...(target.password ? { sentinelPassword: target.password } : {}),
      ...(target.username ? { sentinelUsername: target.username } : {}),
      ...(target.tls ? { sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
    });
  }
  const { lazyConnect, enableOfflineQueue, maxRetriesPerRequest, retryStrategy, ...nodeOptions } = options;
  const clusterOptions: ClusterOptions = {
    lazyConnect,
    enableOfflineQueue,
    // A moved slot or a failover answers MOVED/TRYAGAIN/CLUSTERDOWN for a moment: a few quick retries
    // ride it out; anything longer is an outage (503), like a down single server.
    maxRedirections: 16,
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    clusterRetryStrategy: retryStrategy as ClusterOptions['clusterRetryStrategy'],
    redisOptions: { ...nodeOptions, maxRetriesPerRequest, ...creds, ...tls },
  };
  return new Cluster(target.nodes, clusterOptions);
}
