import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReadySvc, type SvcProcess } from '../support/spawn.ts';

/** Sends raw bytes on a new connection; resolves with everything the server sent until it closed. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(data));
  });
}

/** Status, content type and JSON body of the last answer in `data`. */
function lastAnswer(data: string) {
  const at = data.lastIndexOf('HTTP/1.1 ');
  const [head, body] = [data.slice(at, data.indexOf('\r\n\r\n', at)), data.slice(data.indexOf('\r\n\r\n', at) + 4)];
  return { status: Number(head.split(' ')[1]), type: /content-type: ([^\r]+)/i.exec(head)?.[1], close: /connection: close/i.test(head), body: JSON.parse(body) };
}

// Node's HTTP parser answers what it cannot read before svc sees it; errors stay JSON all the same.
describe('requests the HTTP parser refuses (the real process)', () => {
  let svc: SvcProcess;
  let port: number;
  beforeAll(async () => {
    svc = await startReadySvc();
    port = Number(new URL(svc.url).port);
  });
  afterAll(() => svc?.stop());

  it.each([
    ['a header line without a colon', 'GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n'],
    ['a Content-Length that is no number', 'POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'],
    ['a request line that is not HTTP', 'HELLO THERE\r\n\r\n'],
  ])('%s: 400 bad_request as JSON, then the connection closes', async (_what, bytes) => {
    const answer = lastAnswer(await raw(port, bytes));
    expect(answer).toMatchObject({ status: 400, type: 'application/json; charset=UTF-8', close: true });
    expect(answer.body).toEqual({ error: { code: 'bad_request', message: 'The request is not valid HTTP' } });
  });

  // Past Node's parser, @hono/node-server cannot make these a URL; Node refuses HTTP/1.1 without Host.
  it.each([
    ['a request target that is no path (GET *)', 'GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 'The request is not valid HTTP'],
    ['a backslash in the path', 'GET /a\\b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 'The request is not valid HTTP'],
    ['a Host that is no host name', 'GET /health HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n', 'The request is not valid HTTP'],
    ['no Host header in HTTP/1.1', 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n', 'The request has no Host header'],
    ['no Host header in HTTP/1.1, to socket.io (its own listener)', 'GET /socket.io/?EIO=4&transport=polling HTTP/1.1\r\nConnection: close\r\n\r\n', 'The request has no Host header'],
    ['no Host header in HTTP/1.1, to socket.io under /api', 'GET /api/socket.io/?EIO=4&transport=polling HTTP/1.1\r\nConnection: close\r\n\r\n', 'The request has no Host header'],
  ])('%s: 400 bad_request as JSON', async (_what, bytes, message) => {
    const answer = lastAnswer(await raw(port, bytes));
    expect(answer).toMatchObject({ status: 400, type: 'application/json; charset=UTF-8' });
    expect(answer.body).toEqual({ error: { code: 'bad_request', message } });
  });

  it('HTTP/1.0 needs no Host: answered as usual', async () => {
    expect((await raw(port, 'GET /health HTTP/1.0\r\n\r\n')).split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });

  it('headers over 16 KiB: 431 headers_too_large as JSON', async () => {
    const answer = lastAnswer(await raw(port, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    expect(answer.status).toBe(431);
    expect(answer.body.error.code).toBe('headers_too_large');
  });

  it.each([
    ['a chunk size that is no number', 'ZZ\r\n{}\r\n0\r\n\r\n'],
    ['a bad chunk after a good one', '2\r\n{}\r\nZZ\r\n0\r\n\r\n'],
  ])('a chunked body with %s: 400 bad_request as JSON, the service keeps serving', async (_what, body) => {
    const head = 'POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
    const answer = lastAnswer(await raw(port, head + body));
    expect(answer).toMatchObject({ status: 400, type: 'application/json; charset=UTF-8', close: true });
    expect(answer.body).toEqual({ error: { code: 'bad_request', message: 'The request is not valid HTTP' } });
    expect((await fetch(`${svc.url}/health`)).status).toBe(200);
    // The client's fault, logged as such: no error-level "unhandled error" line, and no 500 in the access log.
    await svc.waitForLog((l) => l.msg === 'request' && l.path === '/auth/login' && l.status === 400);
    expect(svc.logs().filter((l) => (l.level ?? 0) >= 50 || l.status === 500)).toEqual([]);
  });

  it('a body over the limit: 413 payload_too_large says Connection: close, as the connection then closes (the rest is not read)', async () => {
    const body = JSON.stringify({ email: 'a@example.com', pad: 'x'.repeat(1_200_000) });
    const head = `POST /auth/password/forgot HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    // A keep-alive client's next request on the same connection: it must know not to send one.
    const answer = lastAnswer(await raw(port, `${head}${body}GET /health HTTP/1.1\r\nHost: x\r\n\r\n`));
    expect(answer).toMatchObject({ status: 413, close: true, body: { error: { code: 'payload_too_large' } } });
  });

  it('a malformed request after an answered one on a keep-alive connection still gets its JSON answer', async () => {
    const data = await raw(port, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nbroken\r\n\r\n');
    expect(data.startsWith('HTTP/1.1 200 ')).toBe(true);
    expect(lastAnswer(data)).toMatchObject({ status: 400, body: { error: { code: 'bad_request' } } });
    expect((await fetch(`${svc.url}/health`)).status).toBe(200);
  });
});
