// A webhook receiver on loopback (node:http) for the webhook suites: it keeps every request it gets
// (headers, raw body, time), verifies each with `standardwebhooks` as a real receiver would, and
// answers as the test says: a status, a redirect, a huge body, or not at all (until released).

import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { freePort } from './spawn.ts';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
  /** Whether `Webhook.verify` accepted it with the receiver's secret (null: no secret set yet). */
  verified: boolean | null;
  /** What the receiver answered (null: it hung). */
  answered: number | null;
}

/** How the receiver answers one request. */
export type Answer =
  | { status: number; body?: string | Buffer; headers?: Record<string, string> }
  | { hang: true }
  | { bytes: number; status?: number };

export interface Receiver {
  url: string;
  received: Received[];
  /** The answers to come to requests to a path, in order; after them, that path's fallback, else `fallback`. */
  plan(path: string, ...answers: Answer[]): void;
  /** How a path answers once its plan is used up (default: `fallback`). */
  fallbacks: Map<string, Answer>;
  fallback: Answer;
  /** Secrets to verify with, by path (`/` by default). */
  secrets: Map<string, string>;
  /** Requests with this `webhook-id` (to `path`, when given). */
  byId(id: string, path?: string): Received[];
  /** Resolves once `n` requests (to `path`, when given) arrived; rejects after `timeoutMs`. */
  waitFor(n: number, opts?: { path?: string; timeoutMs?: number }): Promise<Received[]>;
  /** Answers every hanging request now (200) and stops hanging new ones. */
  releaseHanging(): void;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const plans = new Map<string, Answer[]>();
  const waiters = new Set<() => void>();
  const receiver: Receiver = {
    url: '',
    received: [],
    plan: (path, ...answers) => void plans.set(path, [...(plans.get(path) ?? []), ...answers]),
    fallbacks: new Map(),
    fallback: { status: 200, body: 'ok' },
    secrets: new Map(),
    byId: (id, path) => receiver.received.filter((r) => r.headers['webhook-id'] === id && (path === undefined || r.path === path)),
    waitFor(n, { path, timeoutMs = 20_000 } = {}) {
      const matching = () => receiver.received.filter((r) => path === undefined || r.path === path);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (matching().length < n) return false;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(matching());
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the receiver got ${matching().length} of ${n} requests${path ? ` to ${path}` : ''} within ${timeoutMs} ms`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
      });
    },
    releaseHanging() {
      if ('hang' in receiver.fallback) receiver.fallback = { status: 200 };
      for (const [path, answer] of receiver.fallbacks) if ('hang' in answer) receiver.fallbacks.delete(path);
      for (const [path, answers] of plans) plans.set(path, answers.filter((a) => !('hang' in a)));
      for (const res of hanging) res.writeHead(200).end('late');
      hanging.clear();
    },
    close: () =>
      new Promise((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '/';
      const secret = receiver.secrets.get(path) ?? receiver.secrets.get('/');
      let verified: boolean | null = null;
      if (secret) {
        try {
          new Webhook(secret).verify(body, req.headers as Record<string, string>);
          verified = true;
        } catch {
          verified = false;
        }
      }
      const answer = plans.get(path)?.shift() ?? receiver.fallbacks.get(path) ?? receiver.fallback;
      const entry: Received = { path, headers: req.headers, body, at: Date.now(), verified, answered: 'hang' in answer ? null : (answer.status ?? 200) };
      receiver.received.push(entry);
      for (const w of [...waiters]) w();
      if ('hang' in answer) {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      if ('bytes' in answer) {
        // A large answer, written in 64 KB pieces as fast as the client takes them; a client that stops
        // reading ends the connection, which is fine.
        res.writeHead(answer.status ?? 200, { 'content-type': 'application/octet-stream', 'content-length': String(answer.bytes) });
        const piece = Buffer.alloc(64 * 1024, 'x');
        let left = answer.bytes;
        const write = () => {
          while (left > 0) {
            const n = Math.min(left, piece.length);
            left -= n;
            if (!res.write(n === piece.length ? piece : piece.subarray(0, n))) return void res.once('drain', write);
          }
          res.end();
        };
        res.on('error', () => {});
        write();
        return;
      }
      res.writeHead(answer.status, answer.headers ?? {}).end(answer.body ?? '');
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}
