// deploy/nginx.conf keeps "errors are always JSON" (issue 37): nginx lets bodies over svc's
// `server.bodyLimit` through, so svc answers its own 413; what nginx refuses or cannot forward itself
// (a body over client_max_body_size, svc unreachable) is JSON with svc's error shape too. Only nginx
// and one svc instance: no browser needed.

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDoc } from '../support/docs.ts';
import { PROJECT_DIR, startReadySvc, stopAll, tempDir, type SvcProcess } from '../support/spawn.ts';
import { deploySite, missingPrograms, pickPort, startNginx, NGINX_BIN, type Nginx } from './support/deployment.ts';

const noNginx = missingPrograms().some((p) => p.startsWith('nginx'));
if (noNginx && process.env.CI === 'true') throw new Error('CI=true but nginx (nginx-light) is missing');

describe.skipIf(noNginx)('nginx in front of svc: errors are JSON', () => {
  let svc: SvcProcess;
  let nginx: Nginx;
  let app: string;
  let unreachable: string;

  beforeAll(async () => {
    svc = await startReadySvc();
    const [appPort, otherPort, deadPort] = await Promise.all([pickPort(), pickPort(), pickPort()]);
    // Both of the app's upstreams are the one svc; the workbench's svc is not running.
    const site = deploySite({ app: [svc.port, svc.port], workbench: deadPort, appPort, workbenchPort: otherPort });
    app = `http://127.0.0.1:${appPort}`;
    unreachable = `http://127.0.0.1:${otherPort}`;
    nginx = await startNginx(site, [`${app}/config.js`, `${unreachable}/config.js`]);
  });
  afterAll(async () => {
    await nginx?.stop();
    await stopAll();
  });

  const post = (base: string, bytes: number) =>
    fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'a@example.com', password: 'x'.repeat(bytes) }) });

  async function expectJsonError(res: Response, status: number, code: string) {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe(code);
    expect(body.error.message).toMatch(/\S/);
  }

  it("a body over svc's bodyLimit (1 MiB) but under nginx's limit reaches svc: svc's own 413", async () => {
    const res = await post(app, 1.5 * 1024 * 1024);
    expect(res.headers.get('x-request-id'), 'answered by svc (its request id)').toBeTruthy();
    await expectJsonError(res, 413, 'payload_too_large');
  });

  it("a body over nginx's client_max_body_size: nginx's 413, as JSON", async () => {
    const res = await post(app, 3 * 1024 * 1024);
    expect(res.headers.get('x-request-id'), 'answered by nginx').toBeNull();
    await expectJsonError(res, 413, 'payload_too_large');
  });

  it('svc unreachable: 502 as JSON, not nginx\'s HTML page', async () => {
    await expectJsonError(await fetch(`${unreachable}/api/health`), 502, 'unavailable');
  });

  // Found in a walk-through: nginx's own answers to what it cannot read were its HTML pages.
  it("headers over nginx's buffers (494): 431 headers_too_large as JSON, as svc answers over its own limit", async () => {
    const res = await fetch(`${app}/api/auth/session`, { headers: { 'x-big': 'a'.repeat(20_000) } });
    expect(res.headers.get('x-request-id'), 'answered by nginx').toBeNull();
    await expectJsonError(res, 431, 'headers_too_large');
  });

  it("a request line over nginx's buffers (414): 431 headers_too_large as JSON", async () => {
    await expectJsonError(await fetch(`${app}/api/auth/session?${'a'.repeat(9000)}`), 431, 'headers_too_large');
  });

  // Issue 52 item 11: nginx's default log format wrote reset, verification, magic-link and asset tokens.
  it('the access log has each request without its query string, asset token or Referer', async () => {
    const asset = 'A'.repeat(40) + 'tk1';
    const requests: [string, RequestInit?][] = [
      [`${app}/reset-password?token=SECRET-RESET`, { headers: { referer: `${app}/verify?token=SECRET-REFERER` } }],
      [`${app}/api/auth/asset/${asset}`],
      [`${app}/api/auth/session-asset/${asset}?download=SECRET-QUERY`],
      [`${app}/api/auth/email/verify?token=SECRET-VERIFY`],
    ];
    for (const [url, init] of requests) await (await fetch(url, init)).arrayBuffer();
    // nginx writes a request's line once it has answered it, unbuffered: present by now, or soon.
    let log = '';
    for (let i = 0; i < 50 && !log.includes('/email/verify '); i++) {
      await new Promise((r) => setTimeout(r, 100));
      log = nginx.accessLog();
    }
    expect(log).toContain('"GET /reset-password HTTP/1.1" 200');
    expect(log).toContain('"GET /api/auth/asset/*** HTTP/1.1" 404');
    expect(log).toContain('"GET /api/auth/session-asset/*** HTTP/1.1" 404');
    expect(log).toMatch(/"GET \/api\/auth\/email\/verify HTTP\/1\.1" \d{3}/);
    expect(log).not.toMatch(/SECRET|tk1/);
  });

  it('a request nginx cannot read: 400 bad_request as JSON', async () => {
    const { port } = new URL(app);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => socket.end('GARBAGE\r\n\r\n'));
      let text = '';
      socket.on('data', (d) => (text += d.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/content-type: application\/json/i);
    expect(answer).toContain('"code":"bad_request"');
  });
});

describe.skipIf(noNginx)("the operator's guide's nginx.conf for a trial (docs/operations.md)", () => {
  it('with deploy/nginx.conf as svc.conf, nginx -t accepts it as written (only its folders changed: the trial\'s, and the access log\'s)', () => {
    const block = /For a trial of your own[\s\S]*?```\n([\s\S]*?)```/.exec(readDoc('docs/operations.md'))?.[1];
    expect(block).toBeDefined();
    const dir = tempDir('svc-ngx-');
    mkdirSync(dir, { recursive: true });
    const conf = block!.replace(/^ {2}/gm, '').replaceAll('/tmp/ngx', dir);
    writeFileSync(path.join(dir, 'nginx.conf'), conf);
    writeFileSync(path.join(dir, 'svc.conf'), readFileSync(path.join(PROJECT_DIR, 'deploy/nginx.conf'), 'utf8').replaceAll('/var/log/nginx/', `${dir}/`));
    const run = spawnSync(NGINX_BIN, ['-t', '-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain('test is successful');
  });
});
