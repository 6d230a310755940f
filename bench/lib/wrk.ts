// `wrk` (a C load generator, Debian's `wrk` package) as the bench's load: one thread, the bench's
// connections and duration, its summary read back as JSON from a `done` hook. Why beside autocannon:
// pinned, autocannon's core was 87-94% busy for the fastest stacks (svc with the local cache, on Bun,
// bare Hono) in stop 82's series, so a ratio of their requests per second measured autocannon as much as
// the servers (it parses each answer in JavaScript, and svc's answer carries more headers than bare
// Hono's); with wrk -t1 -c50 the load core had a third or more left (docs/benchmarks.md, stop 79).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Percentiles } from './stats.ts';

/** What one load run gives, whichever generator made it. */
export interface LoadResult {
  requests: number;
  durationS: number;
  reqPerSec: number;
  /** Latency percentiles (ms); `count`: the answers they are of. */
  latencyMs: Percentiles;
  /** Connect, read and write errors. */
  errors: number;
  timeouts: number;
  /** Answers that were not 2xx (autocannon) or were 4xx/5xx (wrk: its `status` errors). */
  non2xx: number;
}

/** Whether `wrk` is on PATH (it prints its version and exits 1 for `-v`). */
export const wrkOnPath = (): boolean => {
  const r = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  return !r.error && /^wrk /m.test(`${r.stdout}${r.stderr}`);
};

/** wrk's `done` hook: the summary and the latency percentiles (µs) as one JSON line. */
const DONE_SCRIPT = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_JSON {"requests":%d,"durationUs":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%f,"p90":%f,"p99":%f,"max":%f}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
`;

let script: string | null = null;
const doneScript = () => {
  if (script === null) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-wrk-'));
    // Removed when the bench exits, however it ends (an exit handler must be synchronous).
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    script = path.join(dir, 'done.lua');
    writeFileSync(script, DONE_SCRIPT);
  }
  return script;
};

interface WrkSummary {
  requests: number;
  durationUs: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** `wrk -t1 -c<connections> -d<seconds>s --timeout 10s` on `url` with `headers`, on this process's CPUs. */
export function wrk(url: string, headers: Record<string, string>, connections: number, seconds: number): Promise<LoadResult> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', doneScript()];
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
  args.push(url);
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = /^WRK_JSON (.*)$/m.exec(out);
      if (code !== 0 || !line) return reject(new Error(`wrk ${args.join(' ')} exited ${code}: ${out.slice(0, 500)}`));
      const s = JSON.parse(line[1]!) as WrkSummary;
      const durationS = s.durationUs / 1e6;
      const ms = (us: number) => us / 1000;
      resolve({
        requests: s.requests,
        durationS,
        reqPerSec: s.requests / durationS,
        latencyMs: { count: s.requests, p50: ms(s.p50), p90: ms(s.p90), p99: ms(s.p99), max: ms(s.max) },
        errors: s.connect + s.read + s.write,
        timeouts: s.timeout,
        non2xx: s.status,
      });
    });
  });
}
