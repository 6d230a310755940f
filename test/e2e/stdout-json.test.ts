// The server's stdout is for its log collector (issue 53): in JSON mode (the default) every line on it is a
// JSON log line, from the first start's printed admin credentials to the last line of a stop; plain-text
// notes (a build first, a failed start) go to stderr. `LOG_PRETTY=1` (development) prints human lines
// through pino-pretty, a devDependency: without it installed, one JSON warning line says so, and JSON it stays.

import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCheckout } from '../support/checkout-build.ts';
import { freePort, PROJECT_DIR, sleep, startReadySvc, stopAll, tempDir } from '../support/spawn.ts';

const started: ChildProcess[] = [];
afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await stopAll();
});

/** The lines of `stdout` that are not one JSON object each. */
const notJson = (stdout: string): string[] =>
  stdout
    .split('\n')
    .filter((line) => line !== '')
    .filter((line) => {
      try {
        const parsed: unknown = JSON.parse(line);
        return typeof parsed !== 'object' || parsed === null || Array.isArray(parsed);
      } catch {
        return true;
      }
    });

/** A module that makes `import('pino-pretty')` fail as it does where devDependencies are not installed. */
function withoutPinoPretty(): string {
  const dir = tempDir('svc-no-pretty-');
  writeFileSync(
    path.join(dir, 'hooks.mjs'),
    "export async function resolve(specifier, context, next) {\n  if (specifier === 'pino-pretty') throw Object.assign(new Error(\"Cannot find package 'pino-pretty'\"), { code: 'ERR_MODULE_NOT_FOUND' });\n  return next(specifier, context);\n}\n",
  );
  writeFileSync(path.join(dir, 'register.mjs'), "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n");
  return path.join(dir, 'register.mjs');
}

describe('stdout in JSON mode', () => {
  // `svc start` (what `npm start` and an app's `"start": "svc start"` run) runs the compiled service: built unless fresh.
  beforeAll(buildCheckout, 180_000);

  it('`svc start`: a first start (printed admin credentials, .env, a secret in the environment: the worker), requests and a stop write JSON lines only', async () => {
    const appRoot = tempDir('svc-json-app-');
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ app: { name: 'Acme' } }));
    writeFileSync(path.join(appRoot, '.env'), 'LOG_LEVEL=debug\n');
    const port = await freePort();
    const child = spawn(process.execPath, [path.join(PROJECT_DIR, 'bin/svc.js'), 'start'], {
      cwd: appRoot,
      // A secret in the environment: svc runs as a worker started without it (src/secret-env.ts), whose stdout is this one.
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? appRoot, HOST: '127.0.0.1', PORT: String(port), SVC_DATA_DIR: tempDir('svc-data-'), SVC_SECRET_ENCRYPTION_KEY: 'a long random string for the test' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const output = () => `--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`;
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      expect(i < 300 && child.exitCode === null, `svc start did not answer /health\n${output()}`).toBe(true);
      if ((await fetch(`${base}/health`).catch(() => null))?.ok) break;
      await sleep(200);
    }

    // The credentials are in one JSON line, readable by whoever started svc.
    const lines = stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { msg?: string; level?: number });
    const printed = lines.find((l) => /bootstrap admin created/.test(l.msg ?? ''));
    const password = /password (\S+)/.exec(printed?.msg ?? '')?.[1];
    expect(password, output()).toBeTruthy();
    const login = await fetch(`${base}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'admin@localhost', password }) });
    expect(login.status).toBe(200);
    expect((await fetch(`${base}/no/such/route`)).status).toBe(404);

    child.kill('SIGTERM');
    expect(await exited, output()).toBe(0);
    expect(notJson(stdout), output()).toEqual([]);
    const messages = stdout.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { msg: string }).msg);
    for (const expected of [/^environment read from \.env/, /^config loaded$/, /^svc listening on /, /^request$/, /^stopped$/]) expect(messages.some((m) => expected.test(m)), `${expected}\n${output()}`).toBe(true);
  }, 120_000);

  it('LOG_PRETTY=1 where pino-pretty cannot be imported (a production install): one JSON warning line, and JSON lines after it', async () => {
    const svc = await startReadySvc({ env: { LOG_PRETTY: '1', NODE_OPTIONS: `--import=${withoutPinoPretty()}` } });
    await svc.waitForLog((l) => /^svc listening on /.test(l.msg ?? ''), 10_000);
    await svc.stop();
    expect(notJson(svc.stdout()), svc.output()).toEqual([]);
    const warned = svc.logs().filter((l) => /pino-pretty cannot be loaded/.test(l.msg ?? ''));
    expect(warned, svc.output()).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, reason: expect.stringContaining('pino-pretty') });
  }, 60_000);
});

describe('LOG_PRETTY=1 (development)', () => {
  it('prints human lines through pino-pretty, the admin credentials and the access lines among them', async () => {
    const svc = await startReadySvc({ env: { LOG_PRETTY: '1' } });
    expect((await fetch(`${svc.url}/health`)).status).toBe(200);
    await svc.stop();
    const text = svc.stdout().replace(/\x1b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: svc listening on http:\/\/127\.0\.0\.1:\d+/m);
    expect(text).toMatch(/WARN: bootstrap admin created: email admin@localhost password \S+ \(shown once/);
    expect(text).toMatch(/INFO: request\n\s+reqId: /);
    expect(text).toMatch(/INFO: stopped/);
    expect(text, 'no JSON log line in pretty mode').not.toMatch(/^\{"level"/m);
  }, 60_000);

  it('a value other than 1/true/0/false stops start-up naming the variable', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['--conditions=svc-source', '--import', 'tsx', path.join(PROJECT_DIR, 'src/server.ts')], {
      cwd: PROJECT_DIR,
      env: { PATH: process.env.PATH!, HOST: '127.0.0.1', PORT: String(port), SVC_APP_PATH: tempDir('svc-app-'), SVC_DATA_DIR: tempDir('svc-data-'), LOG_PRETTY: 'yes please' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(child);
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toContain('LOG_PRETTY must be 1 (human log lines, development) or 0, got "yes please"');
  }, 60_000);
});
