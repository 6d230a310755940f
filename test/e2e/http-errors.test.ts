// The error model of CONTRACT section 2, seen from an HTTP client: the real app (`createApp` of a
// real server instance with the embedded store and database), served by @hono/node-server on a
// loopback port, plus a few fixture routes mounted the one way routes are mounted (`mountRoutes`),
// because no core route takes a body yet.

import { serve, type ServerType } from '@hono/node-server';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import * as v from 'valibot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { MAX_JSON_DEPTH } from '../../src/http/json-depth.ts';
import { defineRoute, mountRoutes, type RouteDefinition } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { createLogger } from '../../src/logger.ts';
import { buildInstance } from '../../src/service.ts';
import { Stores } from '../../src/store/index.ts';
import { stopAll, tempDir } from '../support/spawn.ts';

const MiB = 1024 * 1024;

const itemSchema = v.object({
  name: v.pipe(v.string(), v.minLength(1)),
  count: v.number(),
  nested: v.optional(v.object({ flag: v.boolean() })),
});

const fixtureRoutes = [
  defineRoute({
    method: 'POST',
    path: '/fixture/items',
    config: { public: true },
    schema: { summary: 'fixture: validated JSON body', body: itemSchema },
    handler: (c, { body }) => c.json({ data: { name: body.name.length > 64 ? `${body.name.length} chars` : body.name, count: body.count } }, 201),
  }),
  defineRoute({
    method: 'PUT',
    path: '/fixture/items',
    config: { public: true },
    schema: { summary: 'fixture: second method on the same path', body: itemSchema },
    handler: (c) => c.json({ data: null }),
  }),
  defineRoute({
    method: 'GET',
    path: '/fixture/boom',
    config: { public: true },
    schema: { summary: 'fixture: a bug in a handler' },
    handler: () => {
      throw new TypeError('secret-internal-detail: cannot read properties of undefined');
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/fixture/boom-async',
    config: { public: true },
    schema: { summary: 'fixture: a rejected promise in a handler' },
    handler: async () => {
      await new Promise((r) => setTimeout(r, 1));
      throw new Error('secret-internal-detail: async failure');
    },
  }),
] as RouteDefinition[];

let server: ServerType;
let base: string;
let stores: Stores;
let db: EmbeddedDatabase;
let instance: ServerInstance;
const logLines: Record<string, unknown>[] = [];

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = createLogger('info', sink);
  // No CACHE_URL, no MONGODB_URL: the embedded store, and the embedded database in memory.
  const { config } = await loadConfig({ SVC_APP_PATH: tempDir('svc-app-') }, { raw: {} });
  stores = await Stores.open(config, logger);
  db = EmbeddedDatabase.inMemory();
  instance = await buildInstance(config, logger, stores, db);
  const app = createApp(instance);
  mountRoutes(app, fixtureRoutes);
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => {
    const s = server as http.Server | undefined;
    if (!s) return resolve();
    s.closeAllConnections();
    s.close(() => resolve());
  });
  instance?.auth.close();
  await stores?.close();
  await db?.close();
  await stopAll();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: unknown;
}

/**
 * One HTTP/1.1 request on its own connection. `body` chunks are written one by one; without a
 * `content-length` header Node sends them chunked. A server that answers before the upload ends
 * may close the socket: the answer still counts, a write error after it does not.
 */
function request(method: string, path: string, opts: { headers?: Record<string, string>; body?: (string | Buffer)[] } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, headers: opts.headers, agent: false });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode!, headers: res.headers, text, json });
      });
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    const write = async () => {
      for (const chunk of opts.body ?? []) {
        if (answered || req.destroyed) break;
        if (req.write(chunk)) continue;
        await new Promise<void>((r) => {
          const done = () => {
            req.off('drain', done).off('close', done);
            r();
          };
          req.on('drain', done).on('close', done);
        });
      }
      req.end();
    };
    void write();
  });
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const postJson = (path: string, body: string, headers: Record<string, string> = JSON_HEADERS) =>
  request('POST', path, { headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, body: [body] });

/** Every error: JSON content type, a request id, and exactly `{"error":{"code","message"[,"details"]}}`. */
function expectError(res: Answer, status: number, code: string, details?: unknown) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json\b/);
  expect(res.headers['x-request-id']).toMatch(/^[\w=-]{8,}$/);
  const error: Record<string, unknown> = { code, message: expect.stringMatching(/\S/) };
  if (details !== undefined) error.details = details;
  expect(res.json).toStrictEqual({ error });
}

const validItem = JSON.stringify({ name: 'pen', count: 2 });

describe.each([
  ['at the backend path', ''],
  ['with the /api prefix', '/api'],
])('HTTP errors %s', (_label, prefix) => {
  const items = `${prefix}/fixture/items`;

  it('a valid JSON body reaches the handler (control for the cases below)', async () => {
    const res = await postJson(items, validItem);
    expect(res.status, res.text).toBe(201);
    expect(res.json).toEqual({ data: { name: 'pen', count: 2 } });
    const charset = await postJson(items, validItem, { 'content-type': 'application/json; charset=utf-8' });
    expect(charset.status, charset.text).toBe(201);
  });

  it('malformed JSON -> 400 invalid_json', async () => {
    expectError(await postJson(items, '{"name": "pen", "count": '), 400, 'invalid_json');
    expectError(await postJson(items, "{name: 'pen'}"), 400, 'invalid_json');
  });

  it(`JSON nested deeper than ${MAX_JSON_DEPTH} levels -> 400 invalid_json, refused before it is parsed; brackets inside strings do not count`, async () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    expectError(await postJson(items, deep(520_000)), 400, 'invalid_json');
    expectError(await postJson(items, `{"name":"pen","count":2,"x":${deep(MAX_JSON_DEPTH)}}`), 400, 'invalid_json');
    // At the limit it is JSON like any other, and "[[[" in a string is text.
    expect((await postJson(items, `{"name":"pen","count":2,"x":${deep(MAX_JSON_DEPTH - 1)}}`)).status).toBe(201);
    const text = await postJson(items, JSON.stringify({ name: `a "quoted" [${'['.repeat(100)} \\`, count: 2 }));
    expect(text.status, text.text).toBe(201);
  });

  it('an empty body declared as JSON -> 400 invalid_json', async () => {
    expectError(await postJson(items, ''), 400, 'invalid_json');
  });

  it('a 2 MiB body with Content-Length -> 413 payload_too_large', async () => {
    const body = JSON.stringify({ name: 'x'.repeat(2 * MiB), count: 1 });
    expectError(await postJson(items, body), 413, 'payload_too_large');
  });

  it('a 2 MiB chunked body without Content-Length -> 413 payload_too_large', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const chunks: Buffer[] = [Buffer.from('{"count":1,"name":"'), ...Array.from({ length: 32 }, () => chunk), Buffer.from('"}')];
    const res = await request('POST', items, { headers: { ...JSON_HEADERS, 'transfer-encoding': 'chunked' }, body: chunks });
    expectError(res, 413, 'payload_too_large');
  });

  it('the default limit is 1 MiB: exactly 1 MiB passes, one byte more does not', async () => {
    const make = (size: number) => {
      const shell = JSON.stringify({ count: 1, name: '' });
      return JSON.stringify({ count: 1, name: 'y'.repeat(size - shell.length) });
    };
    expect(Buffer.byteLength(make(MiB))).toBe(MiB);
    const atLimit = await postJson(items, make(MiB));
    expect(atLimit.status, atLimit.text).toBe(201);
    expectError(await postJson(items, make(MiB + 1)), 413, 'payload_too_large');
    // Chunked, so only the bytes count, not a header.
    const chunked = await request('POST', items, { headers: { ...JSON_HEADERS, 'transfer-encoding': 'chunked' }, body: [make(MiB)] });
    expect(chunked.status, chunked.text).toBe(201);
  });

  it('a body that is not JSON -> 415 unsupported_media_type', async () => {
    expectError(await postJson(items, validItem, { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
    expectError(await postJson(items, 'name=pen&count=2', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type');
    expectError(await postJson(items, validItem, {}), 415, 'unsupported_media_type'); // no content type at all
  });

  it('a missing field -> 400 validation_failed naming the field', async () => {
    const res = await postJson(items, JSON.stringify({ name: 'pen' }));
    expectError(res, 400, 'validation_failed', [{ path: 'count', message: expect.stringMatching(/\S/) }]);
  });

  it('a wrong-typed field -> 400 validation_failed naming the field, nested fields by dotted path', async () => {
    expectError(await postJson(items, JSON.stringify({ name: 'pen', count: 'two' })), 400, 'validation_failed', [
      { path: 'count', message: expect.stringMatching(/\S/) },
    ]);
    expectError(await postJson(items, JSON.stringify({ name: 'pen', count: 1, nested: { flag: 'yes' } })), 400, 'validation_failed', [
      { path: 'nested.flag', message: expect.stringMatching(/\S/) },
    ]);
    // Every problem is reported, not just the first.
    const both = await postJson(items, JSON.stringify({ name: 7 }));
    expect(both.status).toBe(400);
    const paths = ((both.json as { error: { details: { path: string }[] } }).error.details ?? []).map((d) => d.path).sort();
    expect(paths).toEqual(['count', 'name']);
  });

  it('JSON that is not an object -> 400 validation_failed, not a crash', async () => {
    for (const body of ['null', '[1,2]', '"text"', '42']) {
      const res = await postJson(items, body);
      expect(res.status, `${body}: ${res.text}`).toBe(400);
      expect((res.json as { error: { code: string } }).error.code).toBe('validation_failed');
    }
  });

  it('an unknown route -> 404 not_found', async () => {
    expectError(await request('GET', `${prefix}/no/such/route`), 404, 'not_found');
    expectError(await postJson(`${prefix}/no/such/route`, validItem), 404, 'not_found');
  });

  it('a wrong method -> 405 method_not_allowed with an Allow header', async () => {
    const health = await request('DELETE', `${prefix}/health`);
    expectError(health, 405, 'method_not_allowed');
    expect(health.headers.allow?.split(/,\s*/).sort()).toEqual(['GET', 'HEAD']);
    const fixture = await request('GET', items);
    expectError(fixture, 405, 'method_not_allowed');
    expect(fixture.headers.allow?.split(/,\s*/).sort()).toEqual(['POST', 'PUT']);
  });

  it('a thrown non-AppError -> 500 internal_error, without stack or message of the bug', async () => {
    for (const path of [`${prefix}/fixture/boom`, `${prefix}/fixture/boom-async`]) {
      const res = await request('GET', path);
      expectError(res, 500, 'internal_error');
      expect(res.text).not.toMatch(/secret-internal-detail|TypeError|\bat \S+:\d+|\.ts\b|node_modules|\/work\//);
      // ...but the operator finds it in the log, under the same request id.
      const logged = logLines.find((l) => l.reqId === res.headers['x-request-id']);
      expect(logged?.level).toBeGreaterThanOrEqual(50);
      expect(JSON.stringify(logged)).toContain('secret-internal-detail');
    }
  });
});

describe('HTTP basics', () => {
  it('/api alone and look-alike prefixes are not routes', async () => {
    expectError(await request('GET', '/api'), 404, 'not_found');
    expectError(await request('GET', '/apihealth'), 404, 'not_found');
    expectError(await request('GET', '/api/api/health'), 404, 'not_found');
  });

  it('every response carries its own X-Request-Id', async () => {
    const a = await request('GET', '/health');
    const b = await request('GET', '/api/health');
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(a.headers['x-request-id']).toBeTruthy();
    expect(b.headers['x-request-id']).toBeTruthy();
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
  });

  it('HEAD, listed in Allow, is answered', async () => {
    const res = await request('HEAD', '/health');
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
  });
});
