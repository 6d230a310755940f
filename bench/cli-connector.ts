// `npx tsx bench/cli-connector.ts [runs]`: what the CLI connector adds to running a program (issue 17).
// Same run, same program (/bin/true), one after another, alternating: a bare `child_process.execFile`,
// and `POST /plugin/svc/plugin-cli-connector/script/true` through a real socket to svc (session
// lookup, validation, spawn without a shell, output capture). Prints medians, p90 and the ratio
// (goal: at most 1.5x). Sends nothing beyond 127.0.0.1.
import { serve } from '@hono/node-server';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestApp } from '../test/support/app.ts';
import { freePort } from './lib/procs.ts';

const RUNS = Number(process.argv[2] ?? 300);
const PROJECT = fileURLToPath(new URL('..', import.meta.url));

const appRoot = mkdtempSync(path.join(tmpdir(), 'svc-bench-cli-'));
symlinkSync(path.join(PROJECT, 'node_modules'), path.join(appRoot, 'node_modules'), 'dir');
mkdirSync(path.join(appRoot, 'plugins', 'bench_scripts'), { recursive: true });
writeFileSync(
  path.join(appRoot, 'plugins', 'bench_scripts', 'index.ts'),
  `import { Hono } from 'hono';
import { registerScriptByConfig, setupServer } from '@svc/plugin-cli-connector';
export default (instance) => { setupServer(instance); registerScriptByConfig('true', { exe: '/bin/true' }); return new Hono(); };
`,
);
const t = await createTestApp({ env: { SVC_APP_PATH: appRoot }, config: { plugins: ['@svc/plugin-cli-connector'] } });
const port = await freePort();
const server = serve({ fetch: t.app.fetch, port, hostname: '127.0.0.1' });
const user = await t.createUser();
const login = await fetch(`http://127.0.0.1:${port}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: user.email, password: user.password }) });
const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;

const bare = () => new Promise<void>((resolve, reject) => execFile('/bin/true', [], (err) => (err ? reject(err) : resolve())));
async function viaSvc() {
  const res = await fetch(`http://127.0.0.1:${port}/plugin/svc/plugin-cli-connector/script/true`, { method: 'POST', headers: { cookie } });
  const body = (await res.json()) as { status: unknown };
  if (res.status !== 200 || body.status !== 0) throw new Error(`svc answered ${res.status} ${JSON.stringify(body)}`);
}
/** The same HTTP request and session lookup without a program: what the hop itself costs. */
async function httpOnly() {
  const res = await fetch(`http://127.0.0.1:${port}/plugin/svc/plugin-cli-connector/scripts`, { headers: { cookie } });
  if (res.status !== 200) throw new Error(`svc answered ${res.status}`);
  await res.arrayBuffer();
}
async function time(fn: () => Promise<void>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

for (let i = 0; i < 20; i++) await Promise.all([bare(), viaSvc()]); // warm-up
const results = { bare: [] as number[], svc: [] as number[], http: [] as number[] };
for (let i = 0; i < RUNS; i++) {
  // Alternate the order so neither always runs on a warmer machine.
  if (i % 2) {
    results.bare.push(await time(bare));
    results.svc.push(await time(viaSvc));
  } else {
    results.svc.push(await time(viaSvc));
    results.bare.push(await time(bare));
  }
  results.http.push(await time(httpOnly));
}
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const row = (name: string, xs: number[]) => `| ${name} | ${pct(xs, 0.5).toFixed(2)} | ${pct(xs, 0.9).toFixed(2)} |`;
process.stdout.write(
  [
    `CLI connector, /bin/true, ${RUNS} runs each, alternating (load ${(await import('node:os')).loadavg()[0]!.toFixed(1)})`,
    '',
    '| path | median ms | p90 ms |',
    '|---|---:|---:|',
    row('child_process.execFile', results.bare),
    row('POST /script/true (svc, HTTP)', results.svc),
    row('GET /scripts (the HTTP hop and session alone)', results.http),
    '',
    `ratio of medians: ${(pct(results.svc, 0.5) / pct(results.bare, 0.5)).toFixed(2)}x (goal <= 1.5x)`,
    '',
  ].join('\n'),
);
server.close();
await t.close();
