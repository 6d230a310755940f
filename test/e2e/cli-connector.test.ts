// The CLI connector (@svc/plugin-cli-connector, CONTRACT section 8) through HTTP, the way an app uses
// it: an app root OUTSIDE the repository whose node_modules is svc's lists the package in `plugins`,
// and its own plugin registers scripts with `import { setupServer, registerScriptByConfig } from
// '@svc/plugin-cli-connector'`. The programs are small node scripts (test/fixtures/cli/); the one
// that prints its argv as JSON shows exactly what a program received.

import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { PROJECT_DIR } from '../support/spawn.ts';

const PREFIX = '/plugin/svc/plugin-cli-connector';
const FIXTURES = path.join(PROJECT_DIR, 'test/fixtures/cli');
const NODE = process.execPath;

let t: TestApp;
let alice: TestClient;
let bob: TestClient;
let admin: TestClient;
let base: string;
let outside: string;

/** The app plugin that registers the scripts (written into the app root, as an app author would). */
function appPlugin(): string {
  const fx = (name: string) => JSON.stringify(path.join(FIXTURES, name));
  return `
import { Hono } from 'hono';
import { registerScriptByConfig, registerScriptByPath, setupServer } from '@svc/plugin-cli-connector';
const node = ${JSON.stringify(NODE)};
export default async function scripts(instance) {
  setupServer(instance);
  registerScriptByConfig('argv', { exe: node, args: [${fx('print-argv.mjs')}, {}] });
  registerScriptByConfig('argv-two', { exe: node, args: [${fx('print-argv.mjs')}, {}, { allow: '\\\\d+' }] });
  registerScriptByConfig('allow', { exe: node, args: [${fx('print-argv.mjs')}, { allow: '[a-z]+' }] });
  registerScriptByConfig('deny', { exe: node, args: [${fx('print-argv.mjs')}, { deny: 'secret' }] });
  registerScriptByConfig('file', { exe: node, args: [${fx('print-argv.mjs')}, { path: ${JSON.stringify(base)} }] });
  registerScriptByConfig('concat', { exe: node, args: [${fx('print-argv.mjs')}, ['--name=', { allow: '[a-z]+' }, '.txt']] });
  registerScriptByConfig('sleep', { exe: node, args: [${fx('sleep.mjs')}, { allow: '\\\\d+' }, { allow: 'ignore-term|stay' }] });
  registerScriptByConfig('flood', { exe: node, args: [${fx('flood.mjs')}, { allow: '\\\\d+' }] });
  registerScriptByConfig('missing', { exe: '/nonexistent/program' });
  await registerScriptByPath('echo', ${JSON.stringify(path.join(base, '..', 'echo.yaml'))}, ${JSON.stringify(path.join(base, '..', 'echo-hooks.mjs'))});
  return new Hono();
}
`;
}

beforeAll(async () => {
  const appRoot = mkdtempSync(path.join(tmpdir(), 'svc-cli-app-'));
  // An app beside svc: its node_modules is svc's (the workspace link makes the package resolvable).
  symlinkSync(path.join(PROJECT_DIR, 'node_modules'), path.join(appRoot, 'node_modules'), 'dir');
  base = path.join(appRoot, 'files');
  outside = path.join(appRoot, 'secret');
  mkdirSync(path.join(base, 'reports'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(base, 'reports', 'q1.txt'), 'q1');
  writeFileSync(path.join(outside, 'passwd'), 'nope');
  symlinkSync(outside, path.join(base, 'escape'));
  writeFileSync(path.join(appRoot, 'echo.yaml'), `exe: ${NODE}\nargs:\n  - ${path.join(FIXTURES, 'echo-lines.mjs')}\n`);
  writeFileSync(path.join(appRoot, 'echo-hooks.mjs'), 'export function stdout(chunk, ctx) { return chunk.toUpperCase(); }\n');
  mkdirSync(path.join(appRoot, 'plugins', 'app_scripts'), { recursive: true });
  writeFileSync(path.join(appRoot, 'plugins', 'app_scripts', 'index.ts'), appPlugin());

  t = await createTestApp({
    env: { SVC_APP_PATH: appRoot },
    config: { plugins: ['@svc/plugin-cli-connector'], pluginOptions: { '@svc/plugin-cli-connector': { scriptTimeout: 1500, jobRetention: 60_000 } } },
  });
  const login = async (isAdmin = false) => {
    const u = await t.createUser({ admin: isAdmin });
    const c = t.client();
    expect((await c.login(u.email, u.password)).status).toBe(200);
    return c;
  };
  [alice, bob, admin] = [await login(), await login(), await login(true)];
});
afterAll(async () => {
  // Stop whatever is still running (as admin).
  const list = (await (await admin.fetch(`${PREFIX}/jobs`)).json()) as { id: string; done?: unknown }[];
  for (const job of list.filter((j) => j.done === undefined)) await admin.fetch(`${PREFIX}/job/${job.id}`, { method: 'POST', json: { signal: 'SIGKILL' } });
  await t?.close();
});

const script = (c: TestClient, cmd: string, body?: unknown) => c.fetch(`${PREFIX}/script/${cmd}`, body === undefined ? { method: 'POST' } : { method: 'POST', json: body });
const run = (c: TestClient, cmd: string, args: string[] = []) => c.fetch(`${PREFIX}/run/${cmd}`, { method: 'POST', json: { args } });
const job = (c: TestClient, id: string, body: Record<string, unknown> = {}) => c.fetch(`${PREFIX}/job/${id}`, { method: 'POST', json: body });
const code = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;

/** What the program received, for one runtime value. */
async function received(cmd: string, args: string[]): Promise<string[]> {
  const res = await script(alice, cmd, { args });
  expect(res.status, JSON.stringify(await res.clone().json())).toBe(200);
  const body = (await res.json()) as { stdout: string; status: number };
  expect(body.status).toBe(0);
  return JSON.parse(body.stdout) as string[];
}

async function refused(cmd: string, args: string[], rule: RegExp) {
  const res = await script(alice, cmd, { args });
  expect(res.status).toBe(400);
  const err = await code(res);
  expect(err.code).toBe('invalid_arguments');
  expect(err.message).toMatch(rule);
}

describe('POST /script/:cmd: values arrive as single literal arguments, never through a shell', () => {
  it.each([
    ['; rm -rf /'],
    ['$(id)'],
    ['`id`'],
    ['a | cat /etc/passwd'],
    ['true && reboot'],
    ['line one\nline two'],
    ['*'],
    ['~root/.ssh/*'],
    ['"quoted" \'single\''],
    [''],
  ])('%j is one argument, byte for byte', async (value) => {
    expect(await received('argv', [value])).toEqual([value]);
  });

  it('the answer: stdout, stderr and the exit status; a body is optional for a script that takes no arguments', async () => {
    const res = await script(alice, 'argv', { args: ['x'] });
    expect(await res.json()).toEqual({ stdout: '["x"]', stderr: '', status: 0 });
    expect((await script(alice, 'argv')).status).toBe(400); // no body: zero values for one placeholder
  });
});

describe('argument rules', () => {
  it('allow must match the WHOLE value: a partial match is refused', async () => {
    expect(await received('allow', ['abc'])).toEqual(['abc']);
    await refused('allow', ['abc1'], /argument 0 does not match its allow pattern/);
    await refused('allow', ['1abc'], /allow/);
    await refused('allow', ['abc\ndef'], /allow/);
  });

  it('an option cannot be injected where the template does not allow it: "-rf" fails allow, and a path turns into an absolute path', async () => {
    await refused('allow', ['-rf'], /allow/);
    expect(await received('file', ['-rf'])).toEqual([path.join(base, '-rf')]);
  });

  it('deny refuses a match anywhere in the value, also in the middle', async () => {
    expect(await received('deny', ['public'])).toEqual(['public']);
    await refused('deny', ['my-secret-file'], /argument 0 matches its deny pattern/);
  });

  it('path: inside the base (resolved); ../, absolute paths, a symlink out of the base and NUL bytes are refused', async () => {
    expect(await received('file', ['reports/q1.txt'])).toEqual([path.join(base, 'reports/q1.txt')]);
    expect(await received('file', ['reports/new.txt'])).toEqual([path.join(base, 'reports/new.txt')]);
    for (const value of ['../secret/passwd', '/etc/passwd', 'reports/../../secret/passwd', 'escape/passwd', 'escape']) {
      await refused('file', [value], /outside the allowed directory/);
    }
    await refused('file', ['reports/q1.txt\0.png'], /NUL byte/);
  });

  it('an array is one argument: static pieces and the checked value concatenated', async () => {
    expect(await received('concat', ['report'])).toEqual(['--name=report.txt']);
    await refused('concat', ['a b'], /allow/);
  });

  it('too many or too few values are 400; each value is checked at its position', async () => {
    await refused('argv', [], /takes 1 argument, 0 given/);
    await refused('argv', ['a', 'b'], /takes 1 argument, 2 given/);
    expect(await received('argv-two', ['free text', '42'])).toEqual(['free text', '42']);
    await refused('argv-two', ['free text', 'x42'], /argument 1 does not match/);
  });

  it('bad bodies: args not an array of strings, an unknown field, not JSON: 400/415', async () => {
    for (const body of [{ args: 'a' }, { args: [1] }, { args: ['a'], shell: true }]) {
      const res = await script(alice, 'argv', body);
      expect(res.status).toBe(400);
      expect((await code(res)).code).toBe('validation_failed');
    }
    const text = await alice.fetch(`${PREFIX}/script/argv`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'args=a' });
    expect(text.status).toBe(415);
  });
});

describe('execution', () => {
  it('an unknown alias is 404 script_not_found; a program that cannot start is 500 execution_failed', async () => {
    const unknown = await script(alice, 'nope', {});
    expect(unknown.status).toBe(404);
    expect((await code(unknown)).code).toBe('script_not_found');
    const missing = await script(alice, 'missing', {});
    expect(missing.status).toBe(500);
    expect((await code(missing)).code).toBe('execution_failed');
  });

  it('the timeout ends a script with SIGTERM (status "SIGTERM"); one that ignores it is killed', async () => {
    const term = (await (await script(alice, 'sleep', { args: ['30', 'stay'] })).json()) as { status: unknown; stdout: string };
    expect(term).toMatchObject({ status: 'SIGTERM', stdout: 'sleeping\n' });
    const killed = (await (await script(alice, 'sleep', { args: ['30', 'ignore-term'] })).json()) as { status: unknown; stdout: string };
    expect(killed.status).toBe('SIGKILL');
    expect(killed.stdout).toContain('ignored SIGTERM');
  });

  it('input goes to stdin', async () => {
    const res = await script(alice, 'echo', { input: 'hello\nworld\n' });
    expect(await res.json()).toEqual({ stdout: 'ECHO: HELLO\nECHO: WORLD\nBYE\n', stderr: '', status: 0 });
  });

  it('50 MiB of output keeps at most the cap (1 MiB, the newest)', async () => {
    const body = (await (await script(alice, 'flood', { args: ['50'] })).json()) as { stdout: string; status: number };
    expect(body.status).toBe(0);
    expect(body.stdout.length).toBeLessThanOrEqual(1024 * 1024);
    expect(body.stdout.length).toBeGreaterThan(512 * 1024);
  });
});

describe('jobs', () => {
  async function waitDone(c: TestClient, id: string) {
    const seen: string[] = [];
    for (;;) {
      const res = await job(c, id);
      const body = (await res.json()) as { done?: unknown; stdout: string[] };
      seen.push(...body.stdout);
      if (res.status === 200) return { done: body.done, stdout: seen };
      expect(res.status).toBe(202);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('run, talk to it through stdin, read only what is new each time (hooks applied), end it', async () => {
    const started = await run(alice, 'echo');
    expect(started.status).toBe(201);
    const { id } = (await started.json()) as { id: string };
    expect(id).toMatch(/^[a-z0-9]+-[0-9a-f]{12}$/);
    expect((await job(alice, id, { input: 'one\n' })).status).toBe(202);
    let out: string[] = [];
    for (let i = 0; i < 200 && !out.join('').includes('ECHO: ONE'); i++) {
      out = out.concat(((await (await job(alice, id)).json()) as { stdout: string[] }).stdout);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(out.join('')).toBe('ECHO: ONE\n');
    const again = (await (await job(alice, id)).json()) as { stdin: string[]; stdout: string[] };
    expect(again.stdout).toEqual([]); // nothing new since the last read
    const end = await job(alice, id, { signal: 'SIGTERM' });
    expect([200, 202]).toContain(end.status);
    expect((await waitDone(alice, id)).done).toBe('SIGTERM');
  });

  it("another user's job is 404; an admin sees it in GET /jobs and can stop it after its owner logged out", async () => {
    const { id } = (await (await run(bob, 'sleep', ['30', 'stay'])).json()) as { id: string };
    expect((await job(alice, id)).status).toBe(404);
    expect((await code(await job(alice, id, { signal: 'SIGKILL' }))).code).toBe('job_not_found');
    expect((await bob.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
    const list = (await (await admin.fetch(`${PREFIX}/jobs`)).json()) as { id: string; cmd: string; argv: string[] }[];
    expect(list.find((j) => j.id === id)).toMatchObject({ cmd: 'sleep', argv: [path.join(FIXTURES, 'sleep.mjs'), '30', 'stay'] });
    await job(admin, id, { signal: 'SIGKILL' });
    expect((await waitDone(admin, id)).done).toBe('SIGKILL');
    const b = await t.createUser();
    bob = t.client();
    expect((await bob.login(b.email, b.password)).status).toBe(200);
  });

  it('a signal outside the list is 400 invalid_signal; an unknown job is 404', async () => {
    const { id } = (await (await run(alice, 'sleep', ['30', 'stay'])).json()) as { id: string };
    const res = await job(alice, id, { signal: 'SIGSTOP' });
    expect(res.status).toBe(400);
    expect((await code(res)).code).toBe('invalid_signal');
    await job(alice, id, { signal: 'SIGKILL' });
    expect((await waitDone(alice, id)).done).toBe('SIGKILL');
    expect((await job(alice, 'nope-000000000000')).status).toBe(404);
  });

  it('11 jobs at once with the default limit: the 11th is 409 too_many_jobs', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await run(alice, 'sleep', ['30', 'stay']);
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as { id: string }).id);
    }
    const eleventh = await run(alice, 'sleep', ['30', 'stay']);
    expect(eleventh.status).toBe(409);
    expect((await code(eleventh)).code).toBe('too_many_jobs');
    for (const id of ids) await job(alice, id, { signal: 'SIGKILL' });
    for (const id of ids) await waitDone(alice, id);
    expect((await run(alice, 'argv', ['x'])).status).toBe(201);
  });

  it('a job that writes 50 MiB keeps at most the cap: no read ever returns more, older chunks are dropped', async () => {
    const { id } = (await (await run(alice, 'flood', ['50'])).json()) as { id: string };
    let largest = 0;
    let total = 0;
    for (;;) {
      const res = await job(alice, id);
      const body = (await res.json()) as { done?: unknown; stdout: string[] };
      const size = body.stdout.join('').length;
      [largest, total] = [Math.max(largest, size), total + size];
      if (res.status === 200) {
        expect(body.done).toBe(0);
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(largest).toBeLessThanOrEqual(1024 * 1024);
    expect(total).toBeLessThan(50 * 1024 * 1024);
  });
});

describe('access', () => {
  it('every route needs a session (401); GET /jobs needs an admin (403); GET /scripts lists the aliases', async () => {
    const anon = t.client();
    for (const [method, p] of [['POST', '/script/argv'], ['POST', '/run/argv'], ['POST', '/job/x'], ['GET', '/jobs'], ['GET', '/scripts']] as const) {
      expect((await anon.fetch(`${PREFIX}${p}`, { method })).status, p).toBe(401);
    }
    expect((await alice.fetch(`${PREFIX}/jobs`)).status).toBe(403);
    expect(await (await alice.fetch(`${PREFIX}/scripts`)).json()).toEqual(['allow', 'argv', 'argv-two', 'concat', 'deny', 'echo', 'file', 'flood', 'missing', 'sleep']);
  });
});
