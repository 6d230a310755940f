// `npx tsx bench/cluster.ts [seconds]`: svc on a 3-master Redis Cluster (+3 replicas) beside svc on one
// Redis, same machine, same run (issue 22). Each svc process (`node --import tsx src/server.ts`, embedded
// database, LOG_LEVEL=warn) answers the authenticated `GET /auth/session` (one GETEX, to the master of
// the session's slot); 50 connections, 3 s warm-up, ABBA. Goal: the cluster costs at most 10% of req/s.
import autocannon from 'autocannon';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { startCluster, stopAll as stopCluster } from '../test/cluster/support/topology.ts';
import { baseEnv, freePort, PROJECT_DIR, startChild, startRedisServer, waitHealthy, type Child } from './lib/procs.ts';

const SECONDS = Number(process.argv[2] ?? 10);
const admin = { email: 'bench-admin@example.com', password: 'a long bench password 1234' };

async function startSvc(cacheUrl: string): Promise<{ child: Child; url: string; cookie: string }> {
  const appRoot = mkdtempSync(path.join(tmpdir(), 'svc-bench-cluster-'));
  writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { cookie: { secure: false } } }));
  const port = await freePort();
  const child = startChild({
    name: 'svc',
    argv: ['node', 'src/server.ts'],
    cwd: PROJECT_DIR,
    env: { ...baseEnv(), HOST: '127.0.0.1', PORT: String(port), CACHE_URL: cacheUrl, LOG_LEVEL: 'warn', SVC_APP_PATH: appRoot, SVC_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'svc-bench-data-')), SVC_ADMIN_EMAIL: admin.email, SVC_ADMIN_PASSWORD: admin.password },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(child, `${url}/health`, 60_000);
  const res = await fetch(`${url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(admin) });
  if (res.status !== 200) throw new Error(`login answered ${res.status}`);
  return { child, url, cookie: res.headers.getSetCookie()[0]!.split(';')[0]! };
}

const run = (url: string, cookie: string, seconds: number) => autocannon({ url: `${url}/auth/session`, connections: 50, duration: seconds, headers: { cookie } });

const cluster = await startCluster();
const redisPort = await freePort();
const single = startRedisServer(redisPort);
const stacks = {
  'one Redis': await startSvc(`redis://127.0.0.1:${redisPort}`),
  'Redis Cluster (3 masters)': await startSvc(cluster.url),
};
const results = new Map<string, { rps: number[]; p99: number[] }>(Object.keys(stacks).map((k) => [k, { rps: [], p99: [] }]));
try {
  for (const order of [Object.keys(stacks), Object.keys(stacks).reverse()]) {
    for (const name of order) {
      const s = stacks[name as keyof typeof stacks];
      await run(s.url, s.cookie, 3);
      const r = await run(s.url, s.cookie, SECONDS);
      if (r.non2xx || r.errors) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
      results.get(name)!.rps.push(r.requests.average);
      results.get(name)!.p99.push(r.latency.p99);
    }
  }
} finally {
  for (const s of Object.values(stacks)) await s.child.stop();
  await single.stop();
  await stopCluster();
}
const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const [one, many] = [...results.values()].map((r) => avg(r.rps));
process.stdout.write(`svc GET /auth/session, 50 connections, ${SECONDS} s x 2 (ABBA), load ${loadavg()[0]!.toFixed(1)}\n\n| store | req/s | p99 ms |\n|---|---:|---:|\n`);
for (const [name, r] of results) process.stdout.write(`| ${name} | ${avg(r.rps).toFixed(0)} | ${avg(r.p99).toFixed(1)} |\n`);
process.stdout.write(`\ncluster / one Redis: ${(many! / one!).toFixed(2)}x req/s (goal >= 0.90)\n`);
