// Load-test helpers for test/resilience/: timed requests that never throw (a network error is a
// result too), bounded worker loops, a per-kind tally for the report, a sampler of a process's
// resident memory (Linux /proc), and raw HTTP/1.1 over a socket for requests that fetch refuses to
// send (arbitrary header bytes, slow senders, partial bodies). Everything talks to 127.0.0.1 only.

import { readFileSync } from 'node:fs';
import net from 'node:net';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** One request as the load saw it. `status` 0: no HTTP answer (see `error`). Times: performance.now(). */
export interface Hit {
  kind: string;
  start: number;
  end: number;
  ms: number;
  status: number;
  /** `error.code` of a JSON error body. */
  code?: string;
  /** Network error (ECONNRESET, UND_ERR_SOCKET, TimeoutError...). */
  error?: string;
  json?: unknown;
  text?: string;
  /** `name=value` of the first Set-Cookie, if any. */
  cookie?: string;
}

function errorName(err: unknown): string {
  const e = err as { name?: string; message?: string; code?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.code ?? e.name ?? String(err);
}

/** `fetch` with a hard timeout, timed; the body is read in full. Never throws. */
export async function hit(kind: string, url: string, init: RequestInit = {}, timeoutMs = 5000): Promise<Hit> {
  const start = performance.now();
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    const end = performance.now();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    const code = (json as { error?: { code?: unknown } } | undefined)?.error?.code;
    return {
      kind,
      start,
      end,
      ms: end - start,
      status: res.status,
      ...(typeof code === 'string' ? { code } : {}),
      json,
      text,
      ...(res.headers.get('set-cookie') ? { cookie: res.headers.get('set-cookie')!.split(';')[0] } : {}),
    };
  } catch (err) {
    const end = performance.now();
    return { kind, start, end, ms: end - start, status: 0, error: errorName(err) };
  }
}

export const jsonInit = (method: string, body: unknown, cookie?: string): RequestInit => ({
  method,
  headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) },
  body: JSON.stringify(body),
});

/**
 * Runs `n` workers, each calling `step(worker, iteration)` until `stop()` is true, `maxIterations`
 * steps have run, or `maxMs` has passed: every loop here is bounded in count and in time.
 */
export async function runWorkers(
  n: number,
  step: (worker: number, iteration: number) => Promise<void>,
  opts: { stop: () => boolean; maxIterations: number; maxMs: number },
): Promise<void> {
  const deadline = performance.now() + opts.maxMs;
  await Promise.all(
    Array.from({ length: n }, async (_, worker) => {
      for (let i = 0; i < opts.maxIterations && !opts.stop() && performance.now() < deadline; i++) await step(worker, i);
    }),
  );
}

/** Hits grouped by kind: count, statuses, max and p99 latency. */
export function tally(hits: Hit[]): Map<string, { count: number; statuses: Record<string, number>; maxMs: number; p99Ms: number }> {
  const byKind = new Map<string, Hit[]>();
  for (const h of hits) {
    const list = byKind.get(h.kind);
    if (list) list.push(h);
    else byKind.set(h.kind, [h]);
  }
  const out = new Map<string, { count: number; statuses: Record<string, number>; maxMs: number; p99Ms: number }>();
  for (const [kind, list] of [...byKind].sort(([a], [b]) => a.localeCompare(b))) {
    const statuses: Record<string, number> = {};
    for (const h of list) {
      const key = h.status === 0 ? `ERR:${h.error}` : h.code ? `${h.status} ${h.code}` : String(h.status);
      statuses[key] = (statuses[key] ?? 0) + 1;
    }
    const sorted = list.map((h) => h.ms).sort((a, b) => a - b);
    out.set(kind, {
      count: list.length,
      statuses,
      maxMs: Math.round(sorted[sorted.length - 1] ?? 0),
      p99Ms: Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0),
    });
  }
  return out;
}

/** A tally as report lines. */
export function describeTally(hits: Hit[]): string {
  return [...tally(hits)]
    .map(([kind, t]) => `  ${kind.padEnd(16)} n=${String(t.count).padStart(6)}  max ${String(t.maxMs).padStart(5)} ms  p99 ${String(t.p99Ms).padStart(5)} ms  ${JSON.stringify(t.statuses)}`)
    .join('\n');
}

/** What a hit looked like, for assertion messages. */
export const show = (h: Hit) =>
  `${h.kind} ${h.status}${h.code ? ` ${h.code}` : ''}${h.error ? ` ${h.error}` : ''} ${Math.round(h.ms)} ms ${h.text ? h.text.slice(0, 200) : ''}`;

export const procAvailable = (() => {
  try {
    readFileSync('/proc/self/status', 'utf8');
    return true;
  } catch {
    return false;
  }
})();

/** VmRSS of a process in KiB (Linux), or null when it is gone. */
export function rssKb(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Samples a process's RSS every `everyMs` until `stop()`; `samples` holds `{ t (s since start), kb }`. */
export function sampleRss(pid: number, everyMs = 1000) {
  const started = performance.now();
  const samples: { t: number; kb: number }[] = [];
  const take = () => {
    const kb = rssKb(pid);
    if (kb !== null) samples.push({ t: Math.round((performance.now() - started) / 100) / 10, kb });
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    samples,
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

/** An HTTP/1.1 answer read off a raw socket. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** ms from the first byte written to the end of the answer (or the close). */
  ms: number;
}

/** Parses the first HTTP response in `data`, or null while it is incomplete. */
export function parseResponse(data: Buffer, closed: boolean): Omit<RawAnswer, 'ms'> | null {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd < 0) return null;
  const [statusLine, ...lines] = data.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? NaN);
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const rest = data.subarray(headEnd + 4);
  if (headers['content-length'] !== undefined) {
    const len = Number(headers['content-length']);
    if (rest.length < len) return closed ? { status, headers, body: rest.toString('utf8') } : null;
    return { status, headers, body: rest.subarray(0, len).toString('utf8') };
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    let body = Buffer.alloc(0);
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n', at);
      if (lineEnd < 0) return closed ? { status, headers, body: body.toString('utf8') } : null;
      const size = parseInt(rest.subarray(at, lineEnd).toString('latin1'), 16);
      if (size === 0) return { status, headers, body: body.toString('utf8') };
      if (rest.length < lineEnd + 2 + size + 2) return closed ? { status, headers, body: body.toString('utf8') } : null;
      body = Buffer.concat([body, rest.subarray(lineEnd + 2, lineEnd + 2 + size)]);
      at = lineEnd + 2 + size + 2;
    }
  }
  return closed || headers['connection']?.toLowerCase() !== 'close' ? { status, headers, body: rest.toString('utf8') } : null;
}

/**
 * Sends `request` (bytes as given: any header bytes, no validation) on a new connection and reads
 * one answer. Rejects when nothing parseable arrives within `timeoutMs`.
 */
export function rawRequest(port: number, request: Buffer | string, timeoutMs = 10_000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect({ port, host: '127.0.0.1' });
    let data = Buffer.alloc(0);
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      const parsed = parseResponse(data, closed);
      if (!parsed) {
        if (closed) {
          done = true;
          clearTimeout(timer);
          reject(new Error(`connection closed without an answer (${data.length} bytes: ${JSON.stringify(data.toString('latin1').slice(0, 120))})`));
        }
        return;
      }
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parsed, ms: performance.now() - started });
    };
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (d: Buffer) => {
      data = Buffer.concat([data, d]);
      finish(false);
    });
    socket.on('close', () => finish(true));
    socket.on('error', () => {
      // 'close' follows and decides
    });
    socket.on('connect', () => socket.write(request));
  });
}
