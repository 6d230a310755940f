import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startReadySvc, type SvcProcess } from '../support/spawn.ts';

const ADMIN = { email: 'pipe@example.test', password: 'pipelining-admin-pw' };

/**
 * Answers are handed to their sockets at the end of a turn of the event loop (server.ts,
 * `ShutdownAwareResponse.end`), some ready at once (a 404), some after the store or the database.
 * HTTP/1.1 clients may send several requests on one connection without waiting: the answers must
 * still come back whole and in the order of the requests.
 */
describe('requests pipelined on one keep-alive connection (the real process)', () => {
  let svc: SvcProcess;
  afterAll(() => svc?.stop());

  it('are answered whole and in order, answers ready at once and later ones mixed', async () => {
    svc = await startReadySvc({ env: { SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password } });
    const login = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
    expect(login.status).toBe(200);
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const { port } = new URL(svc.url);
    const sent: [string, string, number][] = [
      ['/auth/session', 'one', 200],
      ['/nope', 'two', 404],
      ['/auth/session?expand=user', 'three', 200],
      ['/auth/session?expand=nope', 'four', 400],
      ['/health', 'five', 200],
      ['/auth/users', 'six', 200],
    ];
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(sent.map(([path, id]) => `GET ${path} HTTP/1.1\r\nHost: localhost\r\nCookie: ${cookie}\r\nX-Request-Id: ${id}\r\n\r\n`).join(''));
      });
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        data += chunk;
        if ((data.match(/HTTP\/1\.1 \d{3}/g) ?? []).length === sent.length && /\}$/.test(data)) {
          socket.end();
          resolve(data);
        }
      });
      socket.on('error', reject);
      setTimeout(() => reject(new Error(`only got: ${data}`)), 10_000).unref();
    });
    const answers = raw.split(/(?=HTTP\/1\.1 \d{3})/);
    expect(answers.map((a) => [Number(a.slice(9, 12)), /x-request-id: (\w+)/i.exec(a)?.[1]])).toEqual(sent.map(([, id, status]) => [status, id]));
    // Each answer is whole: its body is as long as it says.
    for (const answer of answers) {
      const [head, body] = answer.split('\r\n\r\n') as [string, string];
      expect(Buffer.byteLength(body)).toBe(Number(/content-length: (\d+)/i.exec(head)?.[1]));
    }
  });
});
