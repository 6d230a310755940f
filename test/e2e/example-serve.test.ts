// `npm run example` (examples/login/serve.ts): the example's own small server, started as
// docs/frontend-kit.md starts it. The flows themselves run in Chromium in the deployment suite
// (test/deploy/example-browser.test.ts); here, the server: the app for every page path, config.js
// naming the API, `/api/...` forwarded to svc as it came, and a path that does not decode refused
// without taking the server down.

import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, PROJECT_DIR, tempDir } from '../support/spawn.ts';

const children: ChildProcess[] = [];
afterAll(() => children.forEach((child) => child.kill('SIGKILL')));

/** The svc app root the example reads `app.name` from (never the checkout's own config). */
const appRoot = tempDir('svc-example-app-');
writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ app: { name: 'Acme Notes' } }));

/** Starts examples/login/serve.ts under tsx (what `npm run example` runs); resolves once it listens. */
async function serveExample(port: number, api: string): Promise<string> {
  // tsx as a loader in this one process: its CLI would start a second one, left running by a kill.
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/login/serve.ts'], {
    cwd: PROJECT_DIR,
    env: { ...process.env, EXAMPLE_PORT: String(port), SVC_API: api, SVC_APP_PATH: appRoot },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('svc example:')) resolve(out);
    });
    child.once('exit', (code) => reject(new Error(`npm run example exited ${code}:\n${out}`)));
  });
}

describe('npm run example: the example login UI on its own origin', () => {
  it('serves the app on every page path and config.js with the API; a path that does not decode is a 400, and it goes on', async () => {
    const port = await freePort();
    const down = await freePort();
    const banner = await serveExample(port, `http://localhost:${down}/`);
    expect(banner).toContain(`svc example: http://localhost:${port}/login  (/api goes to http://localhost:${down}; start svc with SVC_SERVER_BASE_URL=http://localhost:${port} SVC_FRONTEND_URLS=http://localhost:${port})`);
    const base = `http://127.0.0.1:${port}`;

    const loginPage = await fetch(`${base}/login`);
    expect(loginPage.status).toBe(200);
    expect(loginPage.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await loginPage.text();
    expect(html).toContain('app.js');
    expect(await (await fetch(`${base}/reset-password?token=abc`)).text()).toBe(html);
    // config.js: where the API is, and the app's name from the app root's config (app.name).
    expect(await (await fetch(`${base}/config.js`)).text()).toBe('window.SVC_API_BASE = "/api";\nwindow.SVC_APP_NAME = "Acme Notes";\n');
    expect(banner).toContain('the pages name the app "Acme Notes" (app.name)');
    expect((await fetch(`${base}/app.js`)).headers.get('content-type')).toBe('text/javascript');

    const bad = await fetch(`${base}/%E0%A4%A`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toBe('Bad request: the path does not decode\n');
    // Outside its folder: the app, never the file.
    expect(await (await fetch(`${base}/..%2f..%2fpackage.json`)).text()).toBe(html);
    expect((await fetch(`${base}/login`)).status, 'still serving').toBe(200);

    // svc not running: the app's JSON error, naming where it looked.
    const gone = await fetch(`${base}/api/auth/session`);
    expect(gone.status).toBe(502);
    expect(((await gone.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'bad_gateway', message: expect.stringContaining(`SVC_API=http://localhost:${down}`) });
  });

  it('forwards /api/... to svc as it came (method, path, headers, body) and the answer back (status, headers, body)', async () => {
    const seen: { method?: string; url?: string; headers?: http.IncomingHttpHeaders; body?: string }[] = [];
    const svc = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(201, [['Set-Cookie', 'a=1; HttpOnly'], ['Set-Cookie', 'b=2'], ['Location', '/account'], ['Connection', 'keep-alive'], ['Keep-Alive', 'timeout=99']].flat()).end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve) => svc.listen(0, '127.0.0.1', resolve));
    try {
      const port = await freePort();
      await serveExample(port, `http://127.0.0.1:${(svc.address() as { port: number }).port}`);
      const res = await fetch(`http://localhost:${port}/api/auth/login?x=1`, { method: 'POST', headers: { 'content-type': 'application/json', origin: `http://localhost:${port}`, cookie: 'sid_app=abc', 'proxy-connection': 'keep-alive', trailer: 'x-sum' }, body: '{"email":"a@b.c"}', redirect: 'manual' });
      expect(res.status).toBe(201);
      expect(res.headers.getSetCookie()).toEqual(['a=1; HttpOnly', 'b=2']);
      expect(res.headers.get('location')).toBe('/account');
      expect(await res.text()).toBe('{"ok":true}');
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ method: 'POST', url: '/api/auth/login?x=1', body: '{"email":"a@b.c"}' });
      expect(seen[0]!.headers).toMatchObject({ host: `localhost:${port}`, origin: `http://localhost:${port}`, cookie: 'sid_app=abc', 'x-forwarded-host': `localhost:${port}`, 'x-forwarded-proto': 'http' });
      // The headers of one connection stay on it, both ways.
      expect(seen[0]!.headers!['proxy-connection']).toBeUndefined();
      expect(seen[0]!.headers!.trailer).toBeUndefined();
      expect(res.headers.get('keep-alive')).not.toBe('timeout=99');
    } finally {
      svc.close();
    }
  });

  it('forwards a WebSocket handshake to /api/... (socket.io\'s websocket transport) and joins the two connections, as nginx does', async () => {
    const seen: { url?: string; headers?: http.IncomingHttpHeaders }[] = [];
    const svc = http.createServer((_req, res) => res.writeHead(400).end());
    svc.on('upgrade', (req, socket) => {
      seen.push({ url: req.url, headers: req.headers });
      if (req.url!.includes('refuse')) return void socket.end('HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{"code":"refused!!"}');
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: abc\r\n\r\n');
      socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
    });
    await new Promise<void>((resolve) => svc.listen(0, '127.0.0.1', resolve));
    const open = (port: number, path: string) =>
      new Promise<{ status: number; socket?: import('node:net').Socket; body?: string }>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, path, headers: { host: `localhost:${port}`, connection: 'Upgrade', upgrade: 'websocket', origin: `http://localhost:${port}`, cookie: 'sid_app=abc', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' } });
        req.on('upgrade', (res, socket) => resolve({ status: res.statusCode!, socket }));
        req.on('response', (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      const port = await freePort();
      await serveExample(port, `http://127.0.0.1:${(svc.address() as { port: number }).port}`);
      const ws = await open(port, '/api/socket.io/?EIO=4&transport=websocket');
      expect(ws.status).toBe(101);
      const echoed = new Promise<string>((resolve) => ws.socket!.once('data', (d: Buffer) => resolve(d.toString())));
      ws.socket!.write('ping');
      expect(await echoed).toBe('echo:ping');
      ws.socket!.destroy();
      expect(seen[0]).toMatchObject({ url: '/api/socket.io/?EIO=4&transport=websocket' });
      expect(seen[0]!.headers).toMatchObject({ upgrade: 'websocket', origin: `http://localhost:${port}`, cookie: 'sid_app=abc', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'x-forwarded-host': `localhost:${port}` });

      // svc's refusal comes back as it is; a path outside /api is not forwarded.
      expect(await open(port, '/api/socket.io/?refuse=1')).toMatchObject({ status: 403, body: '{"code":"refused!!"}' });
      expect((await open(port, '/socket.io/?EIO=4&transport=websocket')).status).toBe(404);
      expect(seen).toHaveLength(2);
    } finally {
      svc.close();
    }
  });
});
