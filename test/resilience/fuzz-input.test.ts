import fc from 'fast-check';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { safeReturnPath } from '../../src/auth/oauth/return-to.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { startReadySvc, stopAll } from '../support/spawn.ts';

/** Every error answer is CONTRACT section 2's JSON, never a stack trace. */
async function expectSaneAnswer(res: Response, what: string) {
  expect(res.status, what).toBeLessThan(500);
  if (res.status >= 400 && res.status !== 405) {
    expect(res.headers.get('content-type'), what).toMatch(/application\/json/);
  }
  const text = await res.text();
  expect(text, what).not.toMatch(/\n\s+at \S+ \(|node_modules|\.ts:\d+/);
  if (res.status >= 400) {
    const body = JSON.parse(text);
    expect(typeof body.error?.code, what).toBe('string');
    expect(typeof body.error?.message, what).toBe('string');
  }
}

describe('hostile input against every documented operation', () => {
  let t: TestApp;
  let admin: TestClient;
  let operations: { method: string; path: string; hasBody: boolean; params: { name: string; in: string }[] }[];

  beforeAll(async () => {
    t = await createTestApp({ config: { auth: { cookie: { secure: false } } } });
    const a = await t.createUser({ admin: true });
    admin = t.client();
    await admin.login(a.email, a.password);
    const doc = await (await t.fetch('/openapi.json')).json();
    operations = Object.entries(doc.paths as Record<string, Record<string, { requestBody?: unknown; parameters?: { name: string; in: string }[] }>>).flatMap(
      ([path, ops]) =>
        Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, hasBody: Boolean(op.requestBody), params: op.parameters ?? [] })),
    );
    expect(operations.length).toBeGreaterThan(25);
  });
  afterAll(() => t?.close());

  const hostileString = fc.oneof(fc.string({ maxLength: 60 }), fc.string({ unit: 'binary', maxLength: 30 }), fc.constantFrom('../../etc/passwd', '%00', '{}', '\u0000', 'a'.repeat(3000)));

  it('arbitrary JSON bodies, path params and query values never cause a 5xx or leak internals', async () => {
    // Logout-style operations would end the admin session mid-run: they take no input anyway.
    const targets = operations.filter((o) => (o.hasBody || o.params.length > 0) && !/logout/.test(o.path));
    expect(targets.length).toBeGreaterThan(15);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...targets),
        fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.anything({ maxDepth: 2 }).map((x) => { try { return JSON.parse(JSON.stringify(x) ?? 'null'); } catch { return null; } })),
        hostileString,
        fc.dictionary(fc.constantFrom('offset', 'limit', 'email', 'expand', 'x'), hostileString, { maxKeys: 3 }),
        async (op, body, param, query) => {
          const path = op.path.replace(/\{[^}]+\}/g, () => encodeURIComponent(param) || 'x');
          const qs = new URLSearchParams(query).toString();
          const res = await admin.fetch(`${path}${qs ? `?${qs}` : ''}`, op.hasBody ? { method: op.method, json: body } : { method: op.method });
          await expectSaneAnswer(res, `${op.method} ${path} ${JSON.stringify(body)?.slice(0, 80)}`);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('raw non-JSON bodies and wrong content types are refused cleanly', async () => {
    const targets = operations.filter((o) => o.hasBody);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets), fc.string({ maxLength: 200 }), fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', ''), async (op, raw, type) => {
        const path = op.path.replace(/\{[^}]+\}/g, 'x');
        const res = await admin.fetch(path, { method: op.method, body: raw, headers: type ? { 'content-type': type } : {} });
        await expectSaneAnswer(res, `${op.method} ${path} ${type} ${raw.slice(0, 40)}`);
      }),
      { numRuns: 200 },
    );
  });

  it('arbitrary Cookie headers never authenticate and never cause a 5xx', async () => {
    const cookieName = t.instance.config.auth.cookie.name;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 200 }),
          fc.base64String({ minLength: 43, maxLength: 44 }).map((v) => `${cookieName}=${v}`),
          fc.stringMatching(/^[A-Za-z0-9_-]{43}$/).map((v) => `${cookieName}=${v}`),
          fc.array(fc.tuple(fc.constantFrom(cookieName, 'authToken', 'x', ''), fc.string({ maxLength: 60 })), { maxLength: 20 }).map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join('; ')),
          fc.constant(`${cookieName}=${'A'.repeat(8000)}`),
        ),
        async (cookie) => {
          let res: Response;
          try {
            res = await t.fetch('/auth/session', { headers: { cookie } });
          } catch {
            return; // a header value fetch itself refuses never reaches the server
          }
          expect(res.status).toBe(401);
          await expectSaneAnswer(res, cookie.slice(0, 60));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('the return-to sanitizer', () => {
  it('turns any string into "/" or a same-site path', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.webUrl(), fc.webPath(), fc.constantFrom('//x', '/\\x', 'javascript:alert(1)', '/%2F%2Fx', '/%5Cx', '/\t/x')), (value) => {
        const out = safeReturnPath(value);
        expect(out.startsWith('/')).toBe(true);
        expect(out).not.toMatch(/^\/[/\\]/);
        // eslint-disable-next-line no-control-regex
        expect(out).not.toMatch(/[\u0000-\u001f\u007f]/);
        expect(new URL(out, 'https://app.example').origin).toBe('https://app.example');
      }),
      { numRuns: 5000 },
    );
  });

  it('keeps ordinary paths as they are', () => {
    fc.assert(
      fc.property(fc.array(fc.stringMatching(/^[a-z0-9_-]{1,12}$/), { minLength: 1, maxLength: 5 }), fc.option(fc.stringMatching(/^[a-z]{1,8}=[a-z0-9]{1,8}$/)), (segments, query) => {
        const path = `/${segments.join('/')}${query ? `?${query}` : ''}`;
        expect(safeReturnPath(path)).toBe(path);
      }),
    );
  });
});

describe('slow and oversized requests against the real server', () => {
  let url: URL;
  beforeAll(async () => {
    const svc = await startReadySvc({});
    url = new URL(svc.url);
  });
  afterAll(() => stopAll());

  /** Opens a socket, runs `feed`, resolves with ms until the server closed it (or answered). */
  function timeToClose(feed: (s: net.Socket) => void, limitMs: number): Promise<{ ms: number; data: string }> {
    return new Promise((resolve, reject) => {
      const started = Date.now();
      const socket = net.connect(Number(url.port), url.hostname);
      let data = '';
      const guard = setTimeout(() => {
        socket.destroy();
        reject(new Error(`server kept the socket open for ${limitMs} ms`));
      }, limitMs);
      socket.on('data', (d) => (data += d.toString()));
      socket.on('close', () => {
        clearTimeout(guard);
        resolve({ ms: Date.now() - started, data });
      });
      socket.on('error', () => {});
      socket.on('connect', () => feed(socket));
    });
  }

  it('slowloris headers (one byte per second) are cut off by the 10 s headers timeout', async () => {
    const timers: NodeJS.Timeout[] = [];
    const { ms } = await timeToClose((s) => {
      const head = `GET /health HTTP/1.1\r\nHost: ${url.host}\r\nX-Slow: ${'a'.repeat(100)}`;
      let i = 0;
      const tick = setInterval(() => (i < head.length && !s.destroyed ? s.write(head[i++]!) : clearInterval(tick)), 1000);
      timers.push(tick);
    }, 25_000);
    timers.forEach(clearInterval);
    console.log(`slowloris headers closed after ${ms} ms`);
    expect(ms).toBeGreaterThanOrEqual(9_000);
    expect(ms).toBeLessThan(20_000);
  }, 40_000);

  it('a slow body (Content-Length promised, bytes trickling) is cut off by the 30 s request timeout', async () => {
    const timers: NodeJS.Timeout[] = [];
    const { ms, data } = await timeToClose((s) => {
      s.write(`POST /auth/login HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`);
      const tick = setInterval(() => (!s.destroyed ? s.write(' ') : clearInterval(tick)), 1000);
      timers.push(tick);
    }, 45_000);
    timers.forEach(clearInterval);
    console.log(`slow body closed after ${ms} ms (${data.split('\r\n')[0] || 'no answer'})`);
    expect(ms).toBeLessThan(40_000);
  }, 60_000);

  it('a 100 MB body is refused with 413 before it is sent, and a chunked one once it passes the limit', async () => {
    const { data, ms } = await timeToClose((s) => {
      s.write(`POST /auth/login HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${100 * 1024 * 1024}\r\nConnection: close\r\n\r\n{"email":`);
    }, 10_000);
    console.log(`100 MB Content-Length answered in ${ms} ms: ${data.split('\r\n')[0]}`);
    expect(data).toMatch(/^HTTP\/1\.1 413/);
    expect(data).toContain('payload_too_large');

    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const chunked = await timeToClose((s) => {
      s.write(`POST /auth/login HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
      let sent = 0;
      const pump = () => {
        while (!s.destroyed && sent < 2 * 1024 * 1024) {
          sent += chunk.length;
          if (!s.write(`${chunk.length.toString(16)}\r\n`) || !s.write(chunk) || !s.write('\r\n')) return void s.once('drain', pump);
        }
      };
      pump();
    }, 15_000);
    expect(chunked.data).toMatch(/^HTTP\/1\.1 413/);
  }, 40_000);
});
