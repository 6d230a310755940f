// `npx tsx bench/webhooks-cpu.ts <svc dir> [<svc dir> ...]` (env N: events per round, 600; PROF=<dir>: a CPU
// profile of each svc): what one webhook delivery costs svc's CPU, without the noise of password hashing
// (issue 54). For each checkout given (e.g. two `git archive` copies, before and after a change), one svc
// as `npm start` runs it (built in that directory), on CPU 0, embedded database, a private Redis (the
// delivery queue); this process (the load and a loopback receiver answering 204) on CPU 1. N `PATCH
// /auth/users/:id` (a `user.updated` each) over 8 connections per round, ABBA rounds of no endpoint
// against two endpoints subscribed to `user.*` (a round with endpoints ends when all 2N deliveries
// arrived). Prints server CPU ms per event of each round, the medians, and (two - none) / 2: the CPU per
// delivery. svc's CPU is read from /proc, so other processes on the machine move it less than rates.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { baseEnv, cpuSeconds, freePort, npmStartFlags, pinSelf, sleep, startChild, startRedisServer, waitHealthy, writeDotEnv } from './lib/procs.ts';

const dirs = process.argv.slice(2);
const N = Number(process.env.N ?? 600);
pinSelf('1');
let received = 0;
const rx = createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(204).end(); received++; }); });
const rxPort = await freePort();
await new Promise<void>((r) => rx.listen(rxPort, '127.0.0.1', r));
const redisPort = await freePort();
const redis = startRedisServer(redisPort);
await sleep(500);
const ADMIN = { email: 'a@example.com', password: randomBytes(12).toString('base64url') };
async function call(base: string, cookie: string, method: string, p: string, json?: unknown) {
  const r = await fetch(base + p, { method, headers: { ...(cookie ? { cookie } : {}), ...(json ? { 'content-type': 'application/json' } : {}) }, ...(json ? { body: JSON.stringify(json) } : {}) });
  const t = await r.text();
  return { status: r.status, body: t ? JSON.parse(t) : null, cookie: r.headers.getSetCookie().map((l) => l.split(';')[0]).join('; ') };
}
async function pool(n: number, k: number, fn: (i: number) => Promise<void>) { let i = 0; await Promise.all(Array.from({ length: k }, async () => { while (i < n) await fn(i++); })); }
for (const [di, dir] of dirs.entries()) {
  const appRoot = mkdtempSync(path.join(os.tmpdir(), 'wh-micro-'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'wh-micro-data-'));
  writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { cookie: { secure: false }, store: { keyPrefix: `m${di}:` } } }));
  writeDotEnv(appRoot, { CACHE_URL: `redis://127.0.0.1:${redisPort}`, SVC_ADMIN_PASSWORD: ADMIN.password });
  const port = await freePort();
  const child = startChild({ name: 'svc', cwd: dir, cpus: '0', argv: ['node-js', ...npmStartFlags(), ...(process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.PROF] : []), 'bin/start.js'], env: { ...baseEnv(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', SVC_APP_PATH: appRoot, SVC_DATA_DIR: dataDir, SVC_ADMIN_EMAIL: ADMIN.email, SVC_ALLOW_INSECURE_WEBHOOK_URLS: '1' } });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(child, `${url}/health`, 180_000);
  const { cookie } = await call(url, '', 'POST', '/auth/login', ADMIN);
  const users: string[] = [];
  for (let i = 0; i < 8; i++) users.push((await call(url, cookie, 'POST', '/auth/users', { email: `u${i}@example.com`, password: 'correct horse battery' })).body.id);
  const fire = async (tag: string) => { await pool(N, 8, async (i) => { await call(url, cookie, 'PATCH', `/auth/users/${users[i % 8]}`, { firstname: `${tag}${i}` }); }); };
  await fire('warm');
  const res = { none: [] as number[], two: [] as number[] };
  for (const cond of ['none', 'two', 'two', 'none', 'none', 'two', 'two', 'none'] as const) {
    const ids: string[] = [];
    if (cond === 'two') for (const p of ['a', 'b']) ids.push((await call(url, cookie, 'POST', '/auth/webhooks', { url: `http://127.0.0.1:${rxPort}/${p}`, events: ['user.*'] })).body.id);
    await sleep(300);
    const before = received;
    const c0 = cpuSeconds(child.pid)!;
    await fire(cond);
    if (cond === 'two') { const until = Date.now() + 60_000; while (received - before < 2 * N && Date.now() < until) await sleep(20); }
    const c1 = cpuSeconds(child.pid)!;
    res[cond].push(((c1 - c0) * 1000) / N);
    for (const id of ids) await call(url, cookie, 'DELETE', `/auth/webhooks/${id}`);
    await sleep(300);
  }
  const med = (a: number[]) => {
    const s = [...a].sort((x, y) => x - y);
    return (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  console.log(`${dir}: CPU ms/event none ${res.none.map((x) => x.toFixed(2)).join(' ')} | two ${res.two.map((x) => x.toFixed(2)).join(' ')} | medians ${med(res.none).toFixed(2)} / ${med(res.two).toFixed(2)} -> per delivery ${((med(res.two) - med(res.none)) / 2).toFixed(3)} ms  (load ${os.loadavg()[0]!.toFixed(1)})`);
  await child.stop();
}
await redis.stop();
rx.close();
process.exit(0);
