// Small numeric helpers: latency recording with sub-millisecond resolution (autocannon's own
// histogram keeps whole milliseconds), percentiles, Redis INFO commandstats parsing.
import type { Redis } from 'ioredis';

/** Latencies (ms, float) and completion times of responses, appended without per-item allocation. */
export class LatencyLog {
  private latency = new Float64Array(1 << 16);
  private doneAt = new Float64Array(1 << 16);
  length = 0;

  add(latencyMs: number, doneAtMs: number): void {
    if (this.length === this.latency.length) {
      const grow = (a: Float64Array) => {
        const b = new Float64Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.latency = grow(this.latency);
      this.doneAt = grow(this.doneAt);
    }
    this.latency[this.length] = latencyMs;
    this.doneAt[this.length] = doneAtMs;
    this.length++;
  }

  /** Latencies of the responses that completed within [from, to] (ms, performance.now() clock). */
  between(from = -Infinity, to = Infinity): Float64Array {
    const out = new Float64Array(this.length);
    let n = 0;
    for (let i = 0; i < this.length; i++) {
      const t = this.doneAt[i]!;
      if (t >= from && t <= to) out[n++] = this.latency[i]!;
    }
    return out.subarray(0, n);
  }
}

export interface Percentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentiles; sorts `values` in place. */
export function percentiles(values: Float64Array): Percentiles {
  values.sort();
  const at = (q: number) => (values.length === 0 ? NaN : values[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!);
  return { count: values.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: values.length ? values[values.length - 1]! : NaN };
}

export const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The middle value (the mean of the two middle ones for an even count); NaNs left out. */
export function median(xs: number[]): number {
  const sorted = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** `INFO commandstats` -> calls per command (lower-case, e.g. `getex`, `expire`). */
/** Redis's calls per command so far (`INFO commandstats`). */
export async function commandStats(redis: Pick<Redis, 'info'>): Promise<Record<string, number>> {
  return parseCommandStats((await redis.info('commandstats')) as string);
}

export function parseCommandStats(info: string): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m) calls[m[1]!] = Number(m[2]);
  }
  return calls;
}

/** Commands executed between two snapshots, leaving out the bench's own (`info`). */
export function commandDelta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const [cmd, n] of Object.entries(after)) {
    if (cmd === 'info') continue;
    const d = n - (before[cmd] ?? 0);
    if (d > 0) delta[cmd] = d;
  }
  return delta;
}

export const round = (x: number, digits = 2) => (Number.isFinite(x) ? Math.round(x * 10 ** digits) / 10 ** digits : x);
