// `npx tsx bench/cache-list.ts [keys]`: the cache list's paging on a private Redis with 1,000,000 keys
// (issue 18; 100,000 or fewer: the sorted listing). Times the first page of 500 and a deep page of 500
// (at offset 100,000, or halfway) through the real route
// (in-process app, admin session, one short-lived client per request as in production), beside
// `redis-cli --scan` over the same keys. Prints a markdown table; sends nothing beyond 127.0.0.1.
import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { createTestApp } from '../test/support/app.ts';
import { freePort, sleep, startRedisServer } from './lib/procs.ts';

const KEYS = Number(process.argv[2] ?? 1_000_000);
const RUNS = 7;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (ms: number) => ms.toFixed(1);

const port = await freePort();
const redis = startRedisServer(port);
const url = `redis://127.0.0.1:${port}`;
let client: Redis | undefined;
try {
  client = new Redis(url, { retryStrategy: (n) => (n > 50 ? null : 100) });
  client.on('error', () => {}); // refused until redis-server listens
  for (let i = 0; i < 50 && client.status !== 'ready'; i++) await sleep(100);
  const filled = Date.now();
  for (let i = 0; i < KEYS; i += 10_000) {
    const p = client.pipeline();
    for (let j = i; j < Math.min(KEYS, i + 10_000); j++) p.set(`bench:key:${j}`, `{"n":${j}}`);
    await p.exec();
  }
  process.stderr.write(`filled ${await client.dbsize()} keys in ${Date.now() - filled} ms\n`);

  const app = await createTestApp({ env: { SVC_STORE_BENCH_URL: url } });
  const user = await app.createUser({ admin: true });
  const admin = app.client();
  await admin.login(user.email, user.password);

  async function time(query: string): Promise<{ ms: number[]; items: number; hasMore: boolean }> {
    const ms: number[] = [];
    let last = { items: [] as unknown[], hasMore: false };
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      const res = await admin.fetch(`/svc__cache/cacheEntries?instance=bench&limit=500&${query}`);
      last = await res.json();
      ms.push(performance.now() - started);
      if (res.status !== 200) throw new Error(`${query}: ${res.status} ${JSON.stringify(last)}`);
    }
    return { ms, items: last.items.length, hasMore: last.hasMore };
  }
  const scanCalls = async () => Number(/cmdstat_scan:calls=(\d+)/.exec(await client!.info('commandstats'))?.[1] ?? 0);

  const rows: string[] = [];
  // A deep page: at offset 100,000, or halfway on a smaller keyspace (a keyspace of up to 100,000 keys is
  // listed sorted, and every page walks all of it).
  const deep = Math.min(100_000, Math.floor(KEYS / 2));
  const at = deep.toLocaleString('en');
  for (const [label, query] of [
    ['first page of 500', 'offset=0'],
    [`page of 500 at offset ${at}`, `offset=${deep}`],
    [`page of 500 at offset ${at}, pattern bench:key:1*`, `offset=${deep}&pattern=bench:key:1*`],
  ] as const) {
    await client.config('RESETSTAT');
    const r = await time(query);
    const calls = (await scanCalls()) / RUNS;
    rows.push(`| ${label} | ${fmt(median(r.ms))} | ${fmt(Math.min(...r.ms))} | ${fmt(Math.max(...r.ms))} | ${calls} | ${r.items}${r.hasMore ? ', hasMore' : ''} |`);
  }
  await app.close();

  // The floor for the same work: a bare ioredis SCAN loop (COUNT 1000, an open connection) to the
  // keys the deep page needs, without TYPE/TTL, HTTP or a fresh connection.
  for (const [label, upTo] of [['bare ioredis SCAN COUNT 1000 loop to 501 keys', 501], [`bare ioredis SCAN COUNT 1000 loop to ${(deep + 501).toLocaleString('en')} keys`, deep + 501]] as const) {
    const ms: number[] = [];
    let calls = 0;
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      let cursor = '0';
      let seen = 0;
      calls = 0;
      do {
        const [next, keys] = await client.scan(cursor, 'COUNT', 1000);
        calls++;
        cursor = next;
        seen += keys.length;
      } while (cursor !== '0' && seen < upTo);
      ms.push(performance.now() - started);
    }
    rows.push(`| ${label} | ${fmt(median(ms))} | ${fmt(Math.min(...ms))} | ${fmt(Math.max(...ms))} | ${calls} | - |`);
  }

  // redis-cli 7.0 has no --count: its --scan walks with SCAN's default COUNT 10.
  for (const [label, args] of [['`redis-cli --scan`, all keys', ['--scan']]] as const) {
    const ms: number[] = [];
    let lines = 0;
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const out = spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
      ms.push(performance.now() - started);
      lines = out.stdout.split('\n').filter(Boolean).length;
    }
    rows.push(`| ${label} | ${fmt(median(ms))} | ${fmt(Math.min(...ms))} | ${fmt(Math.max(...ms))} | - | ${lines} keys |`);
  }

  console.log(`\nCache list paging, ${KEYS.toLocaleString('en')} keys in a private Redis, ${RUNS} runs each (redis-cli: 3)\n`);
  console.log('| what | median ms | min ms | max ms | SCAN calls / request | result |');
  console.log('|---|---:|---:|---:|---:|---|');
  for (const row of rows) console.log(row);
} finally {
  client?.disconnect();
  await redis.stop();
}
