// `GET /auth/session`'s lane writes its answer's head itself (`PresetHeadersResponse.writeOwnHead`), and
// Node adds what it owns: `Date`, the keep-alive lines or `Connection: close`, `Content-Length`. Over raw
// sockets to svc started as `npm start` starts it (startServer, the embedded defaults), the lane's answers
// must treat the connection as the app's answers do: kept open for HTTP/1.1, closed after the answer when
// the client asks (`Connection: close`), for HTTP/1.0, and once svc is shutting down.

import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PresetHeadersResponse } from '../../src/http/response-headers.ts';
import type { RunningServer } from '../../src/server.ts';
import { parseResponse } from '../support/load.ts';
import { startInstance } from '../support/realtime.ts';

const request = (method: string, path: string, headers: Record<string, string>, version = '1.1', body = '') =>
  `${method} ${path} HTTP/${version}\r\nHost: 127.0.0.1\r\n${Object.entries(headers).map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n${body}`;

/** One connection to svc: requests written as given, answers read in order, and whether svc ended it. */
function connect(port: number) {
  const socket = net.connect({ port, host: '127.0.0.1' });
  let data = Buffer.alloc(0);
  let closed = false;
  const waiting: (() => void)[] = [];
  const wake = () => {
    for (const w of waiting.splice(0)) w();
  };
  socket.on('data', (d: Buffer) => {
    data = Buffer.concat([data, d]);
    wake();
  });
  socket.on('close', () => {
    closed = true;
    wake();
  });
  socket.on('error', () => {
    // 'close' follows
  });
  const until = async <T>(ready: () => T | null, what: string): Promise<T> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const value = ready();
      if (value !== null) return value;
      if (closed || Date.now() > deadline) throw new Error(`${what}: none (${closed ? 'closed' : 'timed out'}; ${JSON.stringify(data.toString('latin1'))})`);
      await new Promise<void>((r) => {
        waiting.push(r);
        setTimeout(r, 200);
      });
    }
  };
  return {
    send: (path: string, headers: Record<string, string>, version = '1.1') => socket.write(request('GET', path, headers, version)),
    /** Bytes as given, e.g. several requests at once. */
    write: (bytes: string) => socket.write(bytes),
    /** The next answer: its head's lines as sent, its headers (lower-case names) and its body. */
    answer: () =>
      until(() => {
        const parsed = parseResponse(data, closed);
        if (!parsed) return null;
        const headEnd = data.indexOf('\r\n\r\n');
        const lines = data.subarray(0, headEnd).toString('latin1').split('\r\n');
        data = data.subarray(headEnd + 4 + Buffer.byteLength(parsed.body));
        return { ...parsed, lines };
      }, 'an answer'),
    /** Resolves once svc has ended the connection. */
    ended: () => until(() => (closed ? true : null), 'the end of the connection'),
    isOpen: () => !closed,
    destroy: () => socket.destroy(),
  };
}

/** What of an answer's head must be the same both ways: the request id, the date and the cookie aside. */
const comparable = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).filter(([n]) => !['date', 'x-request-id', 'set-cookie'].includes(n)));

describe("the lane's answers keep or end the connection as the app's answers do (svc on the embedded defaults)", () => {
  let svc: RunningServer;
  let port: number;
  let cookie: string;
  /** Heads the lane wrote (`writeOwnHead`): which of the two answered. */
  let ownHeads = 0;
  const writeOwnHead = PresetHeadersResponse.prototype.writeOwnHead;

  beforeAll(async () => {
    PresetHeadersResponse.prototype.writeOwnHead = function (this: PresetHeadersResponse, ...args: Parameters<typeof writeOwnHead>) {
      ownHeads++;
      return writeOwnHead.apply(this, args);
    };
    // trustProxy: svc leaves idle connections to the proxy on shutdown, so the last case can send a
    // request on an open connection after the signal.
    svc = await startInstance({ config: { server: { trustProxy: 1 } } });
    port = Number(new URL(svc.url).port);
    const email = 'lane-connection@example.test';
    await svc.instance.auth.users.create({ email, password: 'correct horse battery', isAdmin: false, createdVia: 'admin' });
    const res = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'correct horse battery' }) });
    expect(res.status).toBe(200);
    cookie = res.headers.getSetCookie()[0]!.split(';')[0]!;
  });
  afterAll(async () => {
    PresetHeadersResponse.prototype.writeOwnHead = writeOwnHead;
    await svc?.close();
  });

  it('HTTP/1.1: the connection stays open; one Content-Length, the body\'s, and the app\'s headers', async () => {
    const c = connect(port);
    try {
      const before = ownHeads;
      c.send('/auth/session', { cookie });
      const lane = await c.answer();
      expect(ownHeads - before, 'the lane wrote its head').toBe(1);
      c.send('/auth/session?', { cookie });
      const app = await c.answer();
      expect(ownHeads - before, 'the app wrote its head').toBe(1);
      expect([lane.status, app.status]).toEqual([200, 200]);
      expect(comparable(lane.headers)).toEqual(comparable(app.headers));
      expect(lane.headers.connection).toBe('keep-alive');
      expect(lane.headers['keep-alive']).toBe('timeout=5');
      expect(lane.headers.date).toMatch(/ GMT$/);
      expect(lane.lines.filter((l) => /^content-length:/i.test(l))).toEqual([`Content-Length: ${Buffer.byteLength(lane.body)}`]);
      expect(lane.lines.some((l) => /^transfer-encoding:/i.test(l))).toBe(false);
      expect(JSON.parse(lane.body)).toMatchObject({ provider: 'password', isAdmin: false });
      expect(c.isOpen()).toBe(true);
    } finally {
      c.destroy();
    }
  });

  // The lane leaves its requests unread (they have no body: `bodyless`, routes/auth/session.ts); the
  // connection's next requests must still be read whole and in order, a body included.
  it('pipelined: lane answers, the app\'s, and a request with a body after them, in order on one open connection', async () => {
    const c = connect(port);
    try {
      const before = ownHeads;
      const body = JSON.stringify({ email: 'not an email' });
      c.write(
        request('GET', '/auth/session', { cookie }).repeat(20) +
          request('GET', '/auth/session?', { cookie }) +
          request('POST', '/auth/login', { origin: 'http://127.0.0.1', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }, '1.1', body) +
          request('GET', '/auth/session', { cookie }),
      );
      const answers = [];
      for (let i = 0; i < 23; i++) answers.push(await c.answer());
      expect(ownHeads - before, 'the lane wrote 21 heads').toBe(21);
      expect(answers.map((a) => a.status)).toEqual([...Array<number>(21).fill(200), 400, 200]);
      expect(JSON.parse(answers[21]!.body)).toMatchObject({ error: { code: 'validation_failed' } });
      for (const a of [...answers.slice(0, 21), answers[22]!]) expect(JSON.parse(a.body)).toMatchObject({ provider: 'password', isAdmin: false });
      expect(new Set(answers.map((a) => a.headers['x-request-id'])).size, 'a request id each').toBe(23);
      expect(c.isOpen()).toBe(true);
    } finally {
      c.destroy();
    }
  });

  for (const [label, headers, version] of [
    ['`Connection: close`', { connection: 'close' }, '1.1'],
    ['HTTP/1.0', {}, '1.0'],
  ] as const) {
    it(`${label}: the answer says \`Connection: close\` and svc ends the connection, both ways`, async () => {
      for (const path of ['/auth/session', '/auth/session?']) {
        const c = connect(port);
        const before = ownHeads;
        c.send(path, { cookie, ...headers }, version);
        const answer = await c.answer();
        expect(ownHeads - before, `${path}: the lane's (1) or the app's (0)`).toBe(path.endsWith('?') ? 0 : 1);
        expect(answer.status, path).toBe(200);
        expect(answer.headers.connection, path).toBe('close');
        expect(answer.headers['keep-alive'], path).toBeUndefined();
        expect(Number(answer.headers['content-length']), path).toBe(Buffer.byteLength(answer.body));
        expect(await c.ended()).toBe(true);
      }
    });
  }

  it('once svc is shutting down, an answer on a kept-open connection says `Connection: close` and the connection ends', async () => {
    const c = connect(port);
    c.send('/auth/session', { cookie });
    expect((await c.answer()).headers.connection).toBe('keep-alive');
    c.send('/auth/session', { cookie });
    const closing = svc.close();
    const before = ownHeads;
    const answer = await c.answer();
    expect(ownHeads - before, 'the lane wrote its head').toBe(1);
    expect(answer.status).toBe(200);
    expect(answer.headers.connection).toBe('close');
    expect(JSON.parse(answer.body)).toMatchObject({ provider: 'password' });
    expect(await c.ended()).toBe(true);
    await closing;
  });
});
