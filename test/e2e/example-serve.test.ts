// `npm run example` (examples/login/serve.ts): the example's own small server, started as
// docs/frontend-kit.md starts it. The flows themselves run in Chromium in the deployment suite
// (test/deploy/example-browser.test.ts); here, the server: the app for every page path, config.js
// naming the API, and a path that does not decode refused without taking the server down.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, PROJECT_DIR } from '../support/spawn.ts';

let child: ChildProcess | undefined;
afterAll(() => void child?.kill('SIGKILL'));

/** Starts `tsx examples/login/serve.ts` (what `npm run example` runs); resolves once it listens. */
async function serveExample(port: number, api: string): Promise<string> {
  child = spawn(path.join(PROJECT_DIR, 'node_modules/.bin/tsx'), ['examples/login/serve.ts'], {
    cwd: PROJECT_DIR,
    env: { ...process.env, EXAMPLE_PORT: String(port), SVC_API: api },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    child!.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('svc example:')) resolve(out);
    });
    child!.once('exit', (code) => reject(new Error(`npm run example exited ${code}:\n${out}`)));
  });
}

describe('npm run example: the example login UI on its own origin', () => {
  it('serves the app on every page path and config.js with the API; a path that does not decode is a 400, and it goes on', async () => {
    const port = await freePort();
    const banner = await serveExample(port, 'http://localhost:3999/');
    expect(banner).toContain(`svc example: http://localhost:${port}/login  (API: http://localhost:3999/api; svc needs SVC_FRONTEND_URLS=http://localhost:${port})`);
    const base = `http://127.0.0.1:${port}`;

    const loginPage = await fetch(`${base}/login`);
    expect(loginPage.status).toBe(200);
    expect(loginPage.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await loginPage.text();
    expect(html).toContain('app.js');
    expect(await (await fetch(`${base}/reset-password?token=abc`)).text()).toBe(html);
    expect(await (await fetch(`${base}/config.js`)).text()).toContain('"http://localhost:3999/api"');
    expect((await fetch(`${base}/app.js`)).headers.get('content-type')).toBe('text/javascript');

    const bad = await fetch(`${base}/%E0%A4%A`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toBe('Bad request: the path does not decode\n');
    // Outside its folder: the app, never the file.
    expect(await (await fetch(`${base}/..%2f..%2fpackage.json`)).text()).toBe(html);
    expect((await fetch(`${base}/login`)).status, 'still serving').toBe(200);
  });
});
