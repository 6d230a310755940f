// `npm run bench:realtime [-- --sockets 10000 --users 1000 --workers 4]`: socket.io fan-out on one svc
// instance. svc as `npm start` runs it (compiled, Redis store on a private redis-server, so the Redis
// Streams adapter and connection state recovery are on, as in production), embedded database. Sessions
// are written straight into Redis in svc's format (CONTRACT section 3); `--workers` child processes
// (so the load generator does not starve on one event loop) open `--sockets` authenticated socket.io
// clients between them (websocket, each its own connection, `--sockets / --users` per user). Then a
// folder plugin route (`POST /bench__fanout/emit`, behind `authenticate()`) emits an event stamped with
// the server's clock, to one user's room (200 times, a random user each) and to every socket (20
// times, a second apart); each client records now - stamp. Reported: svc's RSS at rest, with every
// socket connected and after the broadcasts; latency p50/p99/max per delivery; for the broadcasts to
// all, the time until the last socket had it; svc's CPU time; the machine's load.
//
// The clients' clock is the server's (one machine: `performance.timeOrigin + now()` in every process),
// and the clients share the machine's cores with svc: on a 2-core machine the latencies include the
// clients' own event-loop delay. Compare runs on the same machine only.
import { Redis } from 'ioredis';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { baseEnv, currentRss, freePort, npmStartFlags, peakRss, PROJECT_DIR, sleep, startChild, startRedisServer, waitHealthy, writeDotEnv, type Child } from './lib/procs.ts';
import { percentiles, round } from './lib/stats.ts';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const now = () => performance.timeOrigin + performance.now();
const PLUGIN = 'bench__fanout';

if (process.argv.includes('--worker')) await worker();
else await main();

/** One load-generating process: its share of the sockets; prints JSON lines on stdout. */
async function worker(): Promise<void> {
  const { io } = await import('socket.io-client');
  const url = process.env.FANOUT_URL!;
  const cookies = JSON.parse(process.env.FANOUT_COOKIES!) as string[];
  const perUser = Number(process.env.FANOUT_PER_USER);
  const latencies: number[] = [];
  /** Per broadcast (seq): the latest delivery here. */
  const last: Record<string, number> = {};
  const reported = new Set<string>();
  const sockets = [];
  let connectedCount = 0;
  let failed = 0;
  const connectOne = (cookie: string) =>
    new Promise<void>((resolve) => {
      const socket = io(url, { path: '/socket.io', transports: ['websocket'], forceNew: true, reconnection: false, timeout: 60_000, extraHeaders: { cookie } });
      socket.on('fanout', (msg: { t?: number; seq?: number; report?: string }) => {
        if (msg.report === undefined) {
          const latency = now() - msg.t!;
          latencies.push(latency);
          if (msg.seq !== undefined) last[msg.seq] = Math.max(last[msg.seq] ?? 0, latency);
          return;
        }
        if (reported.has(msg.report)) return;
        reported.add(msg.report);
        process.stdout.write(`${JSON.stringify({ phase: msg.report, latencies: latencies.map((l) => round(l, 3)), last })}\n`);
        latencies.length = 0;
      });
      socket.once('connect', () => (connectedCount++, resolve()));
      socket.once('connect_error', () => (failed++, resolve()));
      sockets.push(socket);
    });
  const queue = cookies.flatMap((cookie) => Array.from({ length: perUser }, () => cookie));
  // 50 handshakes in flight per worker: a connection storm the size of a restart, not a SYN flood.
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (queue.length) await connectOne(queue.pop()!);
    }),
  );
  process.stdout.write(`${JSON.stringify({ ready: connectedCount, failed })}\n`);
  await new Promise(() => {}); // until the bench stops it
}

async function main(): Promise<void> {
  const SOCKETS = arg('sockets', 10_000);
  const USERS = arg('users', 1000);
  const WORKERS = arg('workers', 4);
  const USER_EMITS = 200;
  const ALL_EMITS = 20;
  const MB = 1024 * 1024;
  const perUser = Math.ceil(SOCKETS / USERS);

  const redisPort = await freePort();
  const redisServer = startRedisServer(redisPort);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const appRoot = mkdtempSync(path.join(tmpdir(), 'svc-bench-fanout-'));
  writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ auth: { cookie: { secure: false } } }));
  writeEmitPlugin(appRoot);
  writeDotEnv(appRoot, { CACHE_URL: redisUrl });
  const port = await freePort();
  const svc = startChild({
    name: 'svc',
    argv: ['node-js', ...npmStartFlags(), 'bin/start.js'],
    cwd: PROJECT_DIR,
    env: { ...baseEnv(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', SVC_APP_PATH: appRoot, SVC_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'svc-bench-data-')) },
  });
  const url = `http://127.0.0.1:${port}`;
  const workers: Child[] = [];
  try {
    await waitHealthy(svc, `${url}/health`, 120_000);
    const redis = new Redis(redisUrl);
    const ids: string[] = [];
    const at = Date.now();
    const batch = redis.pipeline();
    for (let u = 0; u < USERS; u++) {
      const id = randomBytes(32).toString('base64url');
      ids.push(id);
      const record = { userId: `user-${u}`, isAdmin: false, provider: 'password', createdAt: at, expiresAt: at + 86_400_000 };
      batch.set(`auth:session:${createHash('sha256').update(id).digest('hex')}`, JSON.stringify(record), 'EX', 86_400);
    }
    await batch.exec();
    redis.disconnect();
    await sleep(2000);
    const rssIdle = currentRss(svc.pid)! / MB;

    // The workers, each with its share of the users; their JSON lines are collected per worker.
    const lines: Record<string, unknown>[] = [];
    const connectStarted = performance.now();
    for (let w = 0; w < WORKERS; w++) {
      const mine = ids.filter((_, i) => i % WORKERS === w).map((id) => `sid_app=${id}`);
      const child = startChild({
        name: `clients-${w}`,
        argv: ['node', fileURLToPath(import.meta.url), '--worker'],
        env: { ...baseEnv(), FANOUT_URL: url, FANOUT_COOKIES: JSON.stringify(mine), FANOUT_PER_USER: String(perUser) },
      });
      let buffer = '';
      child.process.stdout!.on('data', (d: Buffer) => {
        buffer += d.toString('utf8');
        const parts = buffer.split('\n');
        buffer = parts.pop()!;
        for (const p of parts) if (p.startsWith('{')) lines.push(JSON.parse(p) as Record<string, unknown>);
      });
      workers.push(child);
    }
    const until = async (what: string, done: () => boolean, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms\n${workers.map((w) => w.output()).join('\n')}`);
        for (const w of workers) if (!w.running) throw new Error(`${w.name} exited:\n${w.output()}`);
        await sleep(200);
      }
    };
    await until('every worker connected', () => lines.filter((l) => 'ready' in l).length === WORKERS, 600_000);
    const connectSeconds = (performance.now() - connectStarted) / 1000;
    const connected = lines.reduce((n, l) => n + Number(l.ready ?? 0), 0);
    const failed = lines.reduce((n, l) => n + Number(l.failed ?? 0), 0);
    await sleep(3000);
    const rssConnected = currentRss(svc.pid)! / MB;

    const emit = async (body: Record<string, unknown>) => {
      const res = await fetch(`${url}/${PLUGIN}/emit`, { method: 'POST', headers: { cookie: `sid_app=${ids[0]}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (res.status !== 200) throw new Error(`emit: ${res.status} ${await res.text()}`);
    };
    const collect = async (phase: string) => {
      await emit({ report: phase });
      await until(`${phase} reports`, () => lines.filter((l) => l.phase === phase).length === WORKERS, 60_000);
      return lines.filter((l) => l.phase === phase).flatMap((l) => l.latencies as number[]);
    };

    const cpu0 = cpuSeconds(svc.pid);
    const load0 = loadavg()[0]!;
    for (let i = 0; i < USER_EMITS; i++) {
      await emit({ user: `user-${Math.floor(Math.random() * USERS)}` });
      await sleep(20);
    }
    await sleep(1000);
    const userLatencies = await collect('user');
    const cpu1 = cpuSeconds(svc.pid);
    for (let i = 0; i < ALL_EMITS; i++) {
      await emit({ seq: i });
      await sleep(1000);
    }
    const allLatencies = await collect('all');
    const cpu2 = cpuSeconds(svc.pid);
    const rssAfter = currentRss(svc.pid)! / MB;
    const peak = peakRss(svc.pid)! / MB;

    const p = (xs: number[]) => percentiles(Float64Array.from(xs));
    const user = p(userLatencies);
    const all = p(allLatencies);
    // Deliveries of one broadcast to all arrive in one burst; its last one is the broadcast's full time.
    // A broadcast to all is done when its last socket has it: the latest delivery over every worker.
    const done = new Map<string, number>();
    for (const l of lines.filter((x) => x.phase === 'all')) for (const [seq, ms] of Object.entries(l.last as Record<string, number>)) done.set(seq, Math.max(done.get(seq) ?? 0, ms));
    const full = p([...done.values()]);
    const row = (name: string, n: number, q: ReturnType<typeof p>) => `| ${name} | ${n} | ${round(q.p50, 2)} | ${round(q.p99, 2)} | ${round(q.max, 2)} |`;
    const out = [
      `# Realtime fan-out, ${new Date().toISOString()}`,
      '',
      `svc as \`npm start\` runs it, Redis Streams adapter + connection state recovery, one private redis-server; ${WORKERS} client processes; ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), Node ${process.version}.`,
      '',
      `- sockets: ${connected} connected (${failed} refused) for ${USERS} users (${perUser} each), in ${round(connectSeconds, 1)} s`,
      `- svc RSS: ${round(rssIdle, 0)} MB at rest, ${round(rssConnected, 0)} MB with every socket connected (${round(((rssConnected - rssIdle) * 1024) / Math.max(connected, 1), 1)} KB per socket), ${round(rssAfter, 0)} MB after the broadcasts, peak ${round(peak, 0)} MB`,
      `- svc CPU: ${round(cpu1 - cpu0, 2)} s for the ${USER_EMITS} emits to one user, ${round(cpu2 - cpu1, 2)} s for the ${ALL_EMITS} broadcasts to all (${round(((cpu2 - cpu1) / ALL_EMITS) * 1000, 0)} ms each); load average (1 min) ${round(load0, 2)} before, ${round(loadavg()[0]!, 2)} after`,
      '',
      '| emit | deliveries | p50 ms | p99 ms | max ms |',
      '|---|---:|---:|---:|---:|',
      row(`to one user's room (${perUser} sockets), ${USER_EMITS}x`, userLatencies.length, user),
      row(`to all ${connected} sockets, ${ALL_EMITS}x`, allLatencies.length, all),
      row(`to all: until the last socket has it`, done.size, full),
      '',
    ].join('\n');
    process.stdout.write(`${out}\n`);
    const results = path.join(PROJECT_DIR, 'bench', 'results');
    mkdirSync(results, { recursive: true });
    const file = path.join(results, `${new Date().toISOString().slice(0, 19).replace(/:/g, '-')}-realtime-fanout.md`);
    writeFileSync(file, out);
    process.stdout.write(`written to ${path.relative(PROJECT_DIR, file)}\n`);
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await svc.stop();
    await redisServer.stop();
  }
}

/** user + system CPU seconds of a process so far (/proc/<pid>/stat, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The folder plugin whose route emits `fanout` {t: server clock} to a user's room or to all. */
function writeEmitPlugin(appRoot: string): void {
  const folder = path.join(appRoot, 'plugins', PLUGIN);
  mkdirSync(folder, { recursive: true });
  const hono = pathToFileURL(path.join(PROJECT_DIR, 'node_modules', 'hono', 'dist', 'index.js')).href;
  writeFileSync(
    path.join(folder, 'index.js'),
    [
      `import { Hono } from ${JSON.stringify(hono)};`,
      'export default function fanout(instance) {',
      '  const app = new Hono();',
      "  app.post('/emit', instance.auth.authenticate(), async (c) => {",
      '    const body = await c.req.json();',
      '    const { io } = instance.realtime;',
      "    if (typeof body.report === 'string') io.emit('fanout', { report: body.report });",
      "    else if (typeof body.user === 'string') io.to(`user:${body.user}`).emit('fanout', { t: performance.timeOrigin + performance.now() });",
      "    else io.emit('fanout', { t: performance.timeOrigin + performance.now(), seq: body.seq });",
      '    return c.json({ ok: true });',
      '  });',
      '  return app;',
      '}',
      '',
    ].join('\n'),
  );
}
