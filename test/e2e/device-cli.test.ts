// The example command-line tool (examples/device-cli, issue 55 step 4) against a real server: it
// prints the device page and code, the user approves over HTTP (signed in, step-up fresh), and the tool
// polls, gets its API key and calls the todo plugin with it. A denial ends it with a message.

import { serve, type ServerType } from '@hono/node-server';
import { spawn } from 'node:child_process';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { PROJECT_DIR } from '../support/spawn.ts';

const redisUrl = inject('redisUrl') || undefined;
const CLI = path.join(PROJECT_DIR, 'examples/device-cli/cli.mjs');

let t: TestApp;
let server: ServerType;
let base: string;
beforeAll(async () => {
  t = await createTestApp({ redisUrl });
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
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
  await t?.close();
});

/** Runs the CLI; `onCode` gets the user code once printed. Resolves with its exit code and output. */
function runCli(args: string[], onCode: (code: string, line: string) => Promise<void>): Promise<{ exit: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, '--url', base, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let seen = false;
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /enter the code ([A-Z]{4}-[A-Z]{4})/.exec(out);
      if (match && !seen) {
        seen = true;
        onCode(match[1]!, out).catch(reject);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (exit) => resolve({ exit, out, err }));
  });
}

async function signedIn(): Promise<{ client: TestClient; user: { id: string } }> {
  const user = await t.createUser();
  const client = t.client();
  expect((await client.login(user.email, user.password)).status).toBe(200);
  return { client, user };
}

describe('examples/device-cli', () => {
  it('signs in with the device login and calls the todo plugin with its key', async () => {
    const { client, user } = await signedIn();
    const result = await runCli(['--name', 'test cli', 'buy', 'milk'], async (code, printed) => {
      expect(printed).toContain(`/device?user_code=${code}`);
      const asked = await client.fetch(`/auth/device?user_code=${code}`);
      expect(await asked.json()).toMatchObject({ name: 'test cli', scopes: ['svc__todo:read', 'svc__todo:write'] });
      expect((await client.fetch('/auth/device/approve', { method: 'POST', json: { user_code: code } })).status).toBe(204);
    });
    expect(result.err).toBe('');
    expect(result.exit).toBe(0);
    expect(result.out).toMatch(/Signed in: API key svc_.{8}…/);
    expect(result.out).toContain('Added: buy milk');
    expect(result.out).toContain('Your todos (1):\n- buy milk');
    const keys = await t.instance.auth.apiKeys.list(user.id);
    expect(keys.map((k) => k.name)).toEqual(['test cli']);
    // the whole key is never printed
    expect(result.out).not.toMatch(/svc_[A-Za-z0-9_-]{43}/);
    const todos = (await (await client.fetch('/svc__todo/all')).json()) as { data: { name: string }[] };
    expect(todos.data.map((d) => d.name)).toEqual(['buy milk']);
  }, 30_000);

  it('--help prints the usage and an unknown option is refused, neither asking svc for a code (nor sent as a todo)', async () => {
    const device = t.instance.auth.device;
    const start = device.start.bind(device);
    let asked = 0;
    device.start = (...args) => (asked++, start(...args));
    const help = await runCli(['--help'], () => Promise.reject(new Error('asked for a code')));
    expect(help).toMatchObject({ exit: 0, err: '' });
    expect(help.out).toMatch(/^Usage: node examples\/device-cli\/cli\.mjs/);
    const unknown = await runCli(['--verbose', 'x'], () => Promise.reject(new Error('asked for a code')));
    expect(unknown.exit).toBe(1);
    expect(unknown.err).toMatch(/^Unknown option --verbose\nUsage:/);
    device.start = start;
    expect(asked).toBe(0);
  }, 30_000);

  it('a denial ends it with a message and exit code 1', async () => {
    const { client, user } = await signedIn();
    const result = await runCli([], async (code) => {
      expect((await client.fetch('/auth/device/deny', { method: 'POST', json: { user_code: code } })).status).toBe(204);
    });
    expect(result.exit).toBe(1);
    expect(result.err).toContain('The sign-in was denied');
    expect(await t.instance.auth.apiKeys.list(user.id)).toEqual([]);
  }, 30_000);
});
