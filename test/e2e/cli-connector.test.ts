// The CLI connector (@svc/plugin-cli-connector, CONTRACT section 8) through HTTP, the way an app uses
// it: an app root OUTSIDE the repository whose node_modules is svc's lists the package in `plugins`,
// and its own plugin registers scripts with `import { setupServer, registerScriptByConfig } from
// '@svc/plugin-cli-connector'`. The programs are small node scripts (test/fixtures/cli/); the one
// that prints its argv as JSON shows exactly what a program received.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { freePort, PROJECT_DIR, startReadySvc, stopAll, svcCommand, tempDir } from '../support/spawn.ts';

const PREFIX = '/plugin/svc/plugin-cli-connector';
const FIXTURES = path.join(PROJECT_DIR, 'test/fixtures/cli');
const NODE = process.execPath;

let t: TestApp;
let alice: TestClient;
let bob: TestClient;
let admin: TestClient;
let base: string;
let outside: string;
let appRoot: string;

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
  registerScriptByConfig('sleep', { exe: node, args: [${fx('sleep.mjs')}, { allow: '\\\\d+' }, { allow: 'ignore-term|exit-on-term|stay' }] });
  registerScriptByConfig('flood', { exe: node, args: [${fx('flood.mjs')}, { allow: '\\\\d+' }] });
  registerScriptByConfig('missing', { exe: '/nonexistent/program' });
  registerScriptByConfig('count', { exe: node, args: [${fx('count-lines.mjs')}] });
  registerScriptByConfig('count-to', { exe: node, args: [${fx('count-lines.mjs')}, { allow: '\\\\d+' }] });
  registerScriptByConfig('empty-lines', { exe: node, args: [${fx('empty-lines.mjs')}, { allow: '\\\\d+' }], hooks: { stdout: (line) => line, lines: true } });
  registerScriptByConfig('admin-sleep', { exe: node, args: [${fx('sleep.mjs')}, { allow: '\\\\d+' }, { allow: 'stay' }], admin: true });
  registerScriptByConfig('parent-env', { exe: node, args: [${fx('parent-env.mjs')}], admin: true });
  registerScriptByConfig('spin-limited', { exe: node, args: [${fx('spin.mjs')}, '60'], opts: { limits: { cpuSeconds: 1 } } });
  // dd allocates its block (bs) at once: a plain measure of the memory limit (node programs need more room: V8's reservations count).
  registerScriptByConfig('alloc-limited', { exe: '/bin/dd', args: ['if=/dev/zero', 'of=/dev/null', 'count=1', ['bs=', { allow: '\\\\d+M' }]], opts: { limits: { memoryBytes: 64 * 1024 * 1024 } } });
  registerScriptByConfig('missing-limited', { exe: '/nonexistent/program', opts: { limits: { cpuSeconds: 1 } } });
  registerScriptByConfig('parent-env-nobody', { exe: node, args: [${fx('parent-env.mjs')}], opts: { runAs: { uid: 65534, gid: 65534 } }, admin: true });
  registerScriptByConfig('parent-pid', { exe: '/bin/sh', args: ['-c', 'printf %s "$PPID"'], admin: true });
  registerScriptByConfig('env', { exe: '/usr/bin/env', opts: { env: { GREETING: 'hello' } } });
  registerScriptByConfig('admin-argv', { exe: node, args: [${fx('print-argv.mjs')}, {}], admin: true });
  // A hook that chokes on what it gets (JSON.parse of a line that is not JSON): it throws.
  registerScriptByConfig('bad-hook', { exe: node, args: [${fx('echo-lines.mjs')}], hooks: { stdout: (chunk) => JSON.stringify(JSON.parse(chunk)) } });
  registerScriptByConfig('bad-stdin-hook', { exe: node, args: [${fx('echo-lines.mjs')}], hooks: { stdin: () => { throw new Error('no'); } } });
  // Prints its pid's child (a grandchild of svc) and waits for it: the timeout and signals must reach both.
  registerScriptByConfig('group', { exe: '/bin/sh', args: ['-c', 'sleep 40 & echo $!; wait $!; echo x'] });
  // Leaves its own process group (setsid) holding the output pipe: the answer cannot wait for it.
  registerScriptByConfig('escape', { exe: '/bin/sh', args: ['-c', 'setsid sleep 30 & echo $!'] });
  // A secret written in two pieces: a line-buffered hook sees it whole.
  const redact = (line) => line.replace(/secret=\\S+/, 'secret=***');
  registerScriptByConfig('split-lines', { exe: node, args: [${fx('split-secret.mjs')}], hooks: { stdout: redact, lines: true } });
  // A hook that returns a Promise (its rejection must not reach the process); an async one is refused.
  registerScriptByConfig('promise-hook', { exe: node, args: [${fx('echo-lines.mjs')}], hooks: { stdout: () => Promise.reject(new Error('late')) } });
  let asyncHook = null;
  try {
    registerScriptByConfig('async-hook', { exe: node, args: [], hooks: { stdout: async (chunk) => chunk } });
  } catch (err) {
    asyncHook = err.message;
  }
  await registerScriptByPath('echo', ${JSON.stringify(path.join(base, '..', 'echo.yaml'))}, ${JSON.stringify(path.join(base, '..', 'echo-hooks.mjs'))});
  const app = new Hono();
  // For the process tests (a real svc): what is left of the bootstrap password, and an error nothing catches.
  app.get('/async-hook', (c) => c.json({ refused: asyncHook }));
  app.get('/admin-password', (c) => c.json({ env: process.env.SVC_ADMIN_PASSWORD ?? null, config: instance.config.env.adminPassword ?? null }));
  app.post('/crash', (c) => {
    setTimeout(() => { throw new Error('a plugin timer threw'); }, 10);
    return c.json({ ok: true });
  });
  return app;
}
`;
}

beforeAll(async () => {
  appRoot = mkdtempSync(path.join(tmpdir(), 'svc-cli-app-'));
  // An app beside svc: its node_modules is svc's (the workspace link makes the package resolvable).
  symlinkSync(path.join(PROJECT_DIR, 'node_modules'), path.join(appRoot, 'node_modules'), 'dir');
  base = path.join(appRoot, 'files');
  outside = path.join(appRoot, 'secret');
  mkdirSync(path.join(base, 'reports'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(base, 'reports', 'q1.txt'), 'q1');
  writeFileSync(path.join(outside, 'passwd'), 'nope');
  symlinkSync(outside, path.join(base, 'escape'));
  symlinkSync(path.join(outside, 'new.txt'), path.join(base, 'dangling')); // outside, and nothing there yet
  symlinkSync(path.join(base, 'nothing-here'), path.join(base, 'dangling-in')); // inside, but nowhere
  symlinkSync('reports', path.join(base, 'inner')); // inside: followed
  writeFileSync(path.join(appRoot, 'echo.yaml'), `exe: ${NODE}\nargs:\n  - ${path.join(FIXTURES, 'echo-lines.mjs')}\n`);
  writeFileSync(path.join(appRoot, 'echo-hooks.mjs'), 'export function stdout(chunk, ctx) { return chunk.toUpperCase(); }\n');
  mkdirSync(path.join(appRoot, 'plugins', 'app_scripts'), { recursive: true });
  writeFileSync(path.join(appRoot, 'plugins', 'app_scripts', 'index.ts'), appPlugin());

  t = await createTestApp({
    env: { SVC_APP_PATH: appRoot },
    config: { plugins: ['@svc/plugin-cli-connector'], pluginOptions: { '@svc/plugin-cli-connector': { scriptTimeout: 1500, jobRetention: 60_000 } } },
  });
  [alice, bob, admin] = [await login(), await login(), await login(true)];
});
afterAll(async () => {
  await t?.close(); // kills whatever is still running
  await stopAll();
});

async function login(isAdmin = false): Promise<TestClient> {
  const u = await t.createUser({ admin: isAdmin });
  const c = t.client();
  expect((await c.login(u.email, u.password)).status).toBe(200);
  return c;
}

/** A process that exists and is not a zombie (PID 1 of a container may never reap orphans). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Waits until `n` processes of the `sleep 30 stay` script run (each /script call's program has started). */
async function sleepers(n: number): Promise<void> {
  const count = () =>
    readdirSync('/proc').filter((pid) => {
      try {
        return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').endsWith('sleep.mjs\u000030\u0000stay\u0000');
      } catch {
        return false; // ended meanwhile
      }
    }).length;
  await expect.poll(count, { timeout: 10_000, interval: 20 }).toBeGreaterThanOrEqual(n);
}

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

type Listed = { id: string; cmd: string; owner: string; outputBytes: number; done?: unknown };
/** The admin's view of one job (GET /jobs reads no job's output). */
async function listed(id: string): Promise<Listed | undefined> {
  const res = await admin.fetch(`${PREFIX}/jobs`);
  expect(res.status).toBe(200);
  return ((await res.json()) as Listed[]).find((j) => j.id === id);
}

/** Waits, without reading its output, until a job has ended; its `done`. */
async function endedUnread(id: string, timeout = 20_000): Promise<unknown> {
  await expect.poll(async () => (await listed(id))?.done !== undefined, { timeout, interval: 100 }).toBe(true);
  return (await listed(id))!.done;
}

/** A signed-in client and its user's id. */
async function signedIn(isAdmin = false): Promise<{ c: TestClient; id: string }> {
  const u = await t.createUser({ admin: isAdmin });
  const c = t.client();
  expect((await c.login(u.email, u.password)).status).toBe(200);
  return { c, id: u.id };
}

/** Polls a job until it has ended: its `done` and every stdout/stderr chunk read on the way. */
async function waitDone(c: TestClient, id: string) {
  const seen: string[] = [];
  const errors: string[] = [];
  for (;;) {
    const res = await job(c, id);
    const body = (await res.json()) as { done?: unknown; stdout: string[]; stderr: string[] };
    seen.push(...body.stdout);
    errors.push(...body.stderr);
    if (res.status === 200) return { done: body.done, stdout: seen, stderr: errors };
    expect(res.status).toBe(202);
    await new Promise((r) => setTimeout(r, 50));
  }
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
  it('an unknown alias is 404 not_found (a very long one too); a program that cannot start is 500 execution_failed', async () => {
    const unknown = await script(alice, 'nope', {});
    expect(unknown.status).toBe(404);
    expect((await code(unknown)).code).toBe('not_found');
    const long = await script(alice, 'x'.repeat(5000), {});
    expect(long.status).toBe(404);
    expect((await code(long)).code).toBe('not_found');
    const missing = await script(alice, 'missing', {});
    expect(missing.status).toBe(500);
    expect((await code(missing)).code).toBe('execution_failed');
  });

  it('the timeout ends a script with SIGTERM (status "SIGTERM"); one that ignores it is killed, one that exits 0 on it timed out: the status names the timeout', async () => {
    const term = (await (await script(alice, 'sleep', { args: ['30', 'stay'] })).json()) as { status: unknown; stdout: string };
    expect(term).toMatchObject({ status: 'SIGTERM', stdout: 'sleeping\n' });
    const started = Date.now();
    const killed = (await (await script(alice, 'sleep', { args: ['30', 'ignore-term'] })).json()) as { status: unknown; stdout: string };
    // Killed: answered long before the program's own 30 s (quiet: timeout + 0.5 s).
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(killed.status).toBe('SIGTERM');
    expect(killed.stdout).toContain('ignored SIGTERM');
    // One that exits 0 on it timed out all the same: not a success.
    const cleaned = (await (await script(alice, 'sleep', { args: ['30', 'exit-on-term'] })).json()) as { status: unknown; stdout: string };
    expect(cleaned).toEqual({ status: 'SIGTERM', stdout: 'sleeping\ncleaned up\n', stderr: '' });
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
    expect((await code(await job(alice, id, { signal: 'SIGKILL' }))).code).toBe('not_found');
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
    const long = await job(alice, 'y'.repeat(100));
    expect(long.status).toBe(404);
    const error = await code(long);
    expect(error.code).toBe('not_found');
    // Behind a proxy that sends requests in turn, a job's /job call may reach another instance: the
    // message says so (a walk-through behind deploy/nginx.conf read only "removed after a while").
    expect(error.message).toMatch(/instance that started it/);
  });

  it('jobs are capped per user (3) and in all (10, admins 2 more): one more is 409 too_many_jobs, and one user cannot block the others', async () => {
    const users = [alice, bob, admin, await login(), await login()];
    const started: [TestClient, string][] = [];
    const start = async (c: TestClient, status: number) => {
      const res = await run(c, 'sleep', ['30', 'stay']);
      expect(res.status).toBe(status);
      if (status === 201) started.push([c, ((await res.json()) as { id: string }).id]);
      else expect((await code(res)).code).toBe('too_many_jobs');
    };
    for (let i = 0; i < 3; i++) await start(alice, 201);
    await start(alice, 409); // alice's three are running
    await start(admin, 201); // ...and do not block the admin
    for (const c of [bob, users[3]!]) for (let i = 0; i < 3; i++) await start(c, 201);
    await start(users[4]!, 409); // ten in all
    // Admins have a reserve of two beyond the ten (issue 52 item 10): users filling the cap never lock them out.
    const admin2 = await login(true);
    await start(admin, 201);
    await start(admin2, 201);
    await start(admin2, 409); // the reserve is used up
    for (const [c, id] of started) await job(c, id, { signal: 'SIGKILL' });
    for (const [c, id] of started) await waitDone(c, id);
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

  it('a job nobody reads runs to its end (issue 52 item 9): the newest output is kept, up to the cap, the older dropped', async () => {
    // 8 MiB of numbered 1 KiB lines, then "end": more than a pipe and the cap hold, and nobody reads it.
    const started = await run(alice, 'count-to', ['8192']);
    expect(started.status, JSON.stringify(await started.clone().json())).toBe(201);
    const { id } = (await started.json()) as { id: string };
    expect(await endedUnread(id)).toBe(0);
    const res = await job(alice, id);
    expect(res.status).toBe(200);
    const text = ((await res.json()) as { stdout: string[] }).stdout.join('');
    expect(text.endsWith(`8191 ${'x'.repeat(1000)}\nend\n`)).toBe(true); // the newest...
    expect(text.startsWith('0 ')).toBe(false); // ...not the oldest
    expect(text.length).toBeLessThanOrEqual(1024 * 1024);
    expect(text.length).toBeGreaterThan(512 * 1024);
  });

  it('hooks.lines: a million empty lines keep at most outputCap / 64 entries (issue 52 item 7), the newest', async () => {
    const { id } = (await (await run(alice, 'empty-lines', ['1000000'])).json()) as { id: string };
    expect(await endedUnread(id)).toBe(0);
    const res = await job(alice, id);
    expect(res.status).toBe(200);
    const { stdout } = (await res.json()) as { stdout: string[] };
    expect(stdout.length).toBeLessThanOrEqual(1024 * 1024 / 64); // not a million entries (a 5 MB answer)
    expect(stdout.length).toBeGreaterThan(1000);
    expect(stdout.at(-1)).toBe('last\n');
    expect(new Set(stdout.slice(0, -1))).toEqual(new Set(['\n']));
  });

  it('a finished job read to its end lets go of its output; a user keeps at most 10 finished jobs, the oldest go first (issue 52 item 6)', async () => {
    const { c } = await signedIn();
    const { id: first } = (await (await run(c, 'flood', ['2'])).json()) as { id: string };
    expect(await endedUnread(first)).toBe(0);
    expect((await listed(first))!.outputBytes).toBeGreaterThan(512 * 1024); // unread: kept (up to the cap)
    const read = await job(c, first);
    expect(read.status).toBe(200);
    expect(((await read.json()) as { stdout: string[] }).stdout.join('').length).toBeGreaterThan(512 * 1024);
    expect((await listed(first))!.outputBytes).toBe(0); // read to the end: nothing kept
    expect(await (await job(c, first)).json()).toEqual({ done: 0, stdin: [], stdout: [], stderr: [] }); // still known
    // Ten more finished jobs: the first goes, the ten stay.
    const later: string[] = [];
    for (let i = 0; i < 10; i++) {
      const { id } = (await (await run(c, 'argv', [String(i)])).json()) as { id: string };
      later.push(id);
      expect(await endedUnread(id)).toBe(0);
    }
    expect((await job(c, first)).status).toBe(404);
    expect(await listed(first)).toBeUndefined();
    for (const id of later) expect(await listed(id), id).toMatchObject({ done: 0, cmd: 'argv' });
  });

  it('an admin demoted since cannot use the admin-only job they started (issue 52 item 5): 403 for output, input and signals; another admin still can', async () => {
    const former = await signedIn(true);
    const started = await run(former.c, 'admin-sleep', ['30', 'stay']);
    expect(started.status, JSON.stringify(await started.clone().json())).toBe(201);
    const { id } = (await started.json()) as { id: string };
    expect((await job(former.c, id)).status).toBe(202);
    expect((await admin.fetch(`/auth/users/${former.id}`, { method: 'PATCH', json: { isAdmin: false } })).status).toBe(200);
    for (const body of [{}, { input: 'x\n' }, { signal: 'SIGKILL' }]) {
      const res = await job(former.c, id, body);
      expect(res.status, JSON.stringify(body)).toBe(403);
      expect((await code(res)).code).toBe('forbidden');
    }
    expect((await listed(id))!.done).toBeUndefined(); // the refused signal was not sent
    await job(admin, id, { signal: 'SIGKILL' });
    expect((await waitDone(admin, id)).done).toBe('SIGKILL');
  });

  it("a user deleted through another instance (same database): their jobs on this one end too (issue 52 item 5)", async () => {
    // A second svc on the same database, as two instances behind a proxy: the deletion reaches this one
    // through the database, not through an event of its own process.
    const other = await createTestApp({ db: t.instance.db });
    try {
      const gone = await signedIn();
      const { id } = (await (await run(gone.c, 'sleep', ['30', 'stay'])).json()) as { id: string };
      const otherAdmin = await other.createUser({ admin: true });
      const c = other.client();
      expect((await c.login(otherAdmin.email, otherAdmin.password)).status).toBe(200);
      expect((await c.fetch(`/auth/users/${gone.id}`, { method: 'DELETE' })).status).toBe(204);
      expect(await endedUnread(id, 15_000)).toBe('SIGTERM');
    } finally {
      // Not other.close(): the database is this suite's.
      await other.instance.realtime.close();
      await other.instance.auth.close();
      await other.instance.stores.close();
    }
  });

  // Two instances as deployed: one Redis for sessions, one database. (Without a Redis the run has no second instance to show.)
  it.runIf(inject('redisUrl'))('two instances on one Redis: an admin demoted through one cannot use, on the other, the admin-only job they started there (issue 52 item 5)', async () => {
    const redisUrl = inject('redisUrl');
    const db = EmbeddedDatabase.inMemory();
    const runs = await createTestApp({ redisUrl, db, config: { plugins: ['@svc/plugin-cli-connector'] } });
    const other = await createTestApp({ redisUrl, db, config: { auth: { store: { keyPrefix: runs.keyPrefix } } } });
    const on = async (app: TestApp, isAdmin: boolean) => {
      const u = await app.createUser({ admin: isAdmin });
      const c = app.client();
      expect((await c.login(u.email, u.password)).status).toBe(200);
      return { c, id: u.id };
    };
    try {
      const former = await on(runs, true);
      const started = await run(former.c, 'admin-sleep', ['30', 'stay']);
      expect(started.status).toBe(201);
      const { id } = (await started.json()) as { id: string };
      expect((await job(former.c, id)).status).toBe(202);
      const demoter = await on(other, true);
      expect((await demoter.c.fetch(`/auth/users/${former.id}`, { method: 'PATCH', json: { isAdmin: false } })).status).toBe(200);
      for (const body of [{}, { input: 'x\n' }, { signal: 'SIGKILL' }]) {
        const res = await job(former.c, id, body);
        expect(res.status, JSON.stringify(body)).toBe(403);
      }
      const stopper = await on(runs, true);
      await job(stopper.c, id, { signal: 'SIGKILL' });
      expect((await waitDone(stopper.c, id)).done).toBe('SIGKILL');
    } finally {
      // The database is shared: closed once, by the second close.
      await other.instance.realtime.close();
      await other.instance.auth.close();
      await other.instance.stores.close();
      await runs.close();
    }
  });

  it("a deleted user's running jobs end (issue 52 item 5)", async () => {
    const gone = await signedIn();
    const { id } = (await (await run(gone.c, 'sleep', ['30', 'stay'])).json()) as { id: string };
    expect((await admin.fetch(`/auth/users/${gone.id}`, { method: 'DELETE' })).status).toBe(204);
    // Ended with SIGTERM long before its own 30 s (quiet: within the 2 s check).
    expect(await endedUnread(id, 15_000)).toBe('SIGTERM');
  });
});

describe('access', () => {
  it('every route needs a session (401); GET /jobs needs an admin (403); GET /scripts lists the aliases', async () => {
    const anon = t.client();
    for (const [method, p] of [['POST', '/script/argv'], ['POST', '/run/argv'], ['POST', '/job/x'], ['GET', '/jobs'], ['GET', '/scripts']] as const) {
      expect((await anon.fetch(`${PREFIX}${p}`, { method })).status, p).toBe(401);
    }
    expect((await alice.fetch(`${PREFIX}/jobs`)).status).toBe(403);
    expect(await (await alice.fetch(`${PREFIX}/scripts`)).json()).toEqual(['admin-argv', 'admin-sleep', 'alloc-limited', 'allow', 'argv', 'argv-two', 'bad-hook', 'bad-stdin-hook', 'concat', 'count', 'count-to', 'deny', 'echo', 'empty-lines', 'env', 'escape', 'file', 'flood', 'group', 'missing', 'missing-limited', 'parent-env', 'parent-env-nobody', 'parent-pid', 'promise-hook', 'sleep', 'spin-limited', 'split-lines']);
  });
});

describe('safety (CONTRACT section 8, issue 35)', () => {
  it('a stdout hook that throws ends that run with 500 execution_failed, and the service keeps serving', async () => {
    const res = await script(alice, 'bad-hook', { input: 'not json\n' });
    expect(res.status).toBe(500);
    expect(await code(res)).toMatchObject({ code: 'execution_failed', message: expect.stringMatching(/stdout hook failed/) });
    expect(await received('argv', ['still here'])).toEqual(['still here']);
  });

  it('a hook that returns a Promise (rejected, later) ends its run like one that throws; an async hook is refused when registered', async () => {
    const res = await script(alice, 'promise-hook', { input: 'x\n' });
    expect(res.status).toBe(500);
    expect(await code(res)).toMatchObject({ code: 'execution_failed', message: expect.stringMatching(/stdout hook failed/) });
    await new Promise((r) => setTimeout(r, 50)); // the rejection, had nothing caught it, would have ended the process by now
    expect(await received('argv', ['still here'])).toEqual(['still here']);
    expect(await (await alice.fetch('/app_scripts/async-hook')).json()).toEqual({ refused: 'script "async-hook": hooks.stdout is async; hooks are synchronous (return the text, or null to drop it)' });
  });

  it('a hook that throws in a job ends the job; its stderr says the hook failed (stdout and stdin hooks alike)', async () => {
    for (const cmd of ['bad-hook', 'bad-stdin-hook']) {
      const { id } = (await (await run(alice, cmd)).json()) as { id: string };
      const told = ((await (await job(alice, id, { input: 'not json\n' })).json()) as { stderr: string[] }).stderr;
      const ended = await waitDone(alice, id);
      expect(ended.done).toBe('SIGKILL');
      expect([...told, ...ended.stderr].join('')).toMatch(new RegExp(`${cmd === 'bad-hook' ? 'stdout' : 'stdin'} hook failed`));
    }
    expect(await received('argv', ['still here'])).toEqual(['still here']);
  });

  it("a script sees PATH, HOME, LANG, TZ and its own opts.env, never the service's variables", async () => {
    const planted = { SVC_ADMIN_PASSWORD: 'planted-admin-pw', SVC_SECRET_ENCRYPTION_KEY: 'planted-key', CACHE_URL: 'redis://:planted@127.0.0.1:6379', MONGODB_URL: 'mongodb://planted' };
    const before = { ...process.env };
    Object.assign(process.env, planted, { TZ: 'UTC', LANG: 'C.UTF-8' });
    try {
      const body = (await (await script(alice, 'env', {})).json()) as { stdout: string; status: number };
      expect(body.status).toBe(0);
      const env = Object.fromEntries(body.stdout.trim().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
      expect(Object.keys(env).sort()).toEqual(['GREETING', 'LANG', 'PATH', 'TZ', ...(process.env.HOME ? ['HOME'] : [])].sort());
      expect(env).toMatchObject({ GREETING: 'hello', TZ: 'UTC', PATH: process.env.PATH });
      for (const value of Object.values(planted)) expect(body.stdout).not.toContain(value);
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in before)) delete process.env[k];
      Object.assign(process.env, before);
    }
  });

  it('admin: true scripts: others get 403 forbidden on /script and /run; an admin runs them', async () => {
    for (const res of [await script(alice, 'admin-argv', { args: ['x'] }), await run(alice, 'admin-argv', ['x'])]) {
      expect(res.status).toBe(403);
      expect((await code(res)).code).toBe('forbidden');
    }
    const ok = await script(admin, 'admin-argv', { args: ['x'] });
    expect(await ok.json()).toMatchObject({ stdout: '["x"]', status: 0 });
  });

  it('path: a dangling symlink inside the base is refused (outside, or leading nowhere); one leading inside is followed', async () => {
    await refused('file', ['dangling'], /argument 0 is outside the allowed directory/);
    await refused('file', ['dangling-in'], /argument 0 is a symlink that leads nowhere/);
    expect(existsSync(path.join(outside, 'new.txt'))).toBe(false);
    expect(await received('file', ['inner/q1.txt'])).toEqual([path.join(base, 'reports/q1.txt')]);
    expect(await received('file', ['inner/new/deeper.txt'])).toEqual([path.join(base, 'reports/new/deeper.txt')]);
  });

  it("the timeout reaches the script's whole process group: no grandchild outlives it, and the answer does not wait for one", async () => {
    const started = Date.now();
    const body = (await (await script(alice, 'group', {})).json()) as { stdout: string; status: unknown };
    expect(body.status).toBe('SIGTERM');
    const grandchild = Number(body.stdout.trim());
    expect(grandchild).toBeGreaterThan(0);
    // The group got its signal before the answer; the kernel ends the grandchild a moment later (the answer
    // need not wait for that), and long before its own 40 s sleep would end.
    await expect.poll(() => alive(grandchild), { timeout: 5000, interval: 20 }).toBe(false);
    expect(Date.now() - started).toBeLessThan(10_000); // the timeout is 1.5 s; the grandchild sleeps 40 s
  });

  it('a process that left the group and holds the output pipe does not hold the answer (pipes closed after timeout + 1 s)', async () => {
    const started = Date.now();
    const body = (await (await script(alice, 'escape', {})).json()) as { stdout: string; status: unknown };
    const escaped = Number(body.stdout.trim());
    try {
      expect(body.status).toBe(0);
      expect(alive(escaped)).toBe(true); // it did escape (and still holds the pipe)...
      expect(Date.now() - started).toBeLessThan(10_000); // ...yet the answer came (it sleeps 30 s)
    } finally {
      if (escaped > 0) process.kill(escaped, 'SIGKILL');
    }
  });

  it('a signal to a job reaches its whole process group', async () => {
    const { id } = (await (await run(alice, 'group')).json()) as { id: string };
    let out = '';
    for (let i = 0; i < 200 && !out.includes('\n'); i++) {
      out += ((await (await job(alice, id)).json()) as { stdout: string[] }).stdout.join('');
      await new Promise((r) => setTimeout(r, 20));
    }
    const grandchild = Number(out.trim());
    await job(alice, id, { signal: 'SIGTERM' });
    expect((await waitDone(alice, id)).done).toBe('SIGTERM');
    await expect.poll(() => alive(grandchild), { timeout: 5000, interval: 20 }).toBe(false); // signalled; ends a moment later
  });

  it('/script calls are capped per user (3) and in all (10, admins 2 more): one more is 429 too_many_jobs', async () => {
    const slow = (c: TestClient) => script(c, 'sleep', { args: ['30', 'stay'] });
    // Every call below runs into the 1.5 s script timeout: logged in first, and each step waits for its
    // scripts' processes rather than a guess of time (on a busy machine, a guess outlasted the timeout).
    const others = [await login(), await login(), await login()];
    const admin2 = await login(true);
    const mine = [slow(alice), slow(alice), slow(alice)];
    await sleepers(3);
    const fourth = await slow(alice);
    expect(fourth.status).toBe(429);
    expect((await code(fourth)).code).toBe('too_many_jobs');
    const more = [...others.flatMap((c) => [slow(c), slow(c)]), slow(admin)]; // 3 + 7 = 10 in all
    await sleepers(10);
    const eleventh = await slow(bob);
    expect(eleventh.status).toBe(429);
    // Admins have a reserve of two beyond the ten (issue 52 item 10).
    const reserved = [slow(admin), slow(admin)];
    await sleepers(12);
    const beyond = await slow(admin2);
    expect(beyond.status).toBe(429);
    for (const res of await Promise.all([...mine, ...more, ...reserved])) expect(((await res.json()) as { status: unknown }).status).toBe('SIGTERM');
    expect(await received('argv', ['free again'])).toEqual(['free again']);
  });

  it('input: at most 1 MiB per run in all (413 payload_too_large), and it is not kept', async () => {
    const { id } = (await (await run(alice, 'echo')).json()) as { id: string };
    const half = 'x'.repeat(512 * 1024 - 1) + '\n';
    const first = (await (await job(alice, id, { input: half })).json()) as { stdin: string[] };
    expect(first.stdin).toEqual([half]); // what this call wrote...
    expect(((await (await job(alice, id)).json()) as { stdin: string[] }).stdin).toEqual([]); // ...and not kept
    expect((await job(alice, id, { input: half })).status).toBe(202);
    const over = await job(alice, id, { input: 'y' });
    expect(over.status).toBe(413);
    expect((await code(over)).code).toBe('payload_too_large');
    await job(alice, id, { signal: 'SIGKILL' });
    await waitDone(alice, id);
  });

  it('a signal that is not one of the list (a shell command after it, a number, null, an array) is 400 invalid_signal', async () => {
    const { id } = (await (await run(alice, 'sleep', ['30', 'stay'])).json()) as { id: string };
    for (const signal of ['SIGTERM; rm -rf x', 'x'.repeat(100), '', 'sigterm', 9, null, ['SIGTERM'], { name: 'SIGTERM' }]) {
      const res = await job(alice, id, { signal });
      expect(res.status).toBe(400);
      expect((await code(res)).code).toBe('invalid_signal');
    }
    await job(alice, id, { signal: 'SIGKILL' });
    await waitDone(alice, id);
  });

  it('opts.limits: a script past its CPU time ends with SIGXCPU, one past its memory cannot allocate; a missing program is still 500 (issue 52 item 10)', async () => {
    // It would spin for 60 s; one second of CPU ends it.
    const { id } = (await (await run(alice, 'spin-limited')).json()) as { id: string };
    expect(await endedUnread(id)).toBe('SIGXCPU');
    expect(await (await script(alice, 'alloc-limited', { args: ['16M'] })).json()).toMatchObject({ status: 0 });
    const over = (await (await script(alice, 'alloc-limited', { args: ['128M'] })).json()) as { stderr: string; status: unknown };
    expect(over).toMatchObject({ status: 1, stderr: expect.stringContaining('134217728') }); // "memory exhausted by input buffer of size 134217728 bytes"
    const missing = await script(alice, 'missing-limited', {});
    expect(missing.status).toBe(500);
    expect((await code(missing)).code).toBe('execution_failed');
  });

  // Only root may start a program as another user; a non-root run has nothing to show here.
  it.runIf(process.getuid?.() === 0)("opts.runAs: a script run as another user cannot read svc's environment at all (issue 52 item 8)", async () => {
    const body = (await (await script(admin, 'parent-env-nobody', {})).json()) as { stdout: string; stderr: string; status: unknown };
    expect(body.status).not.toBe(0);
    expect(body.stderr).toMatch(/EACCES: permission denied, open '\/proc\/\d+\/environ'/);
  });

  it('hooks.lines: a hook sees whole lines, so a secret written in two pieces is redacted', async () => {
    const body = (await (await script(alice, 'split-lines', {})).json()) as { stdout: string; status: number };
    expect(body).toEqual({ stdout: 'token secret=***\ndone\n', stderr: '', status: 0 });
  });
});

describe('the service process (a real svc, started as `npm start` does)', () => {
  const ADMIN = { email: 'root@example.com', password: 'correct horse battery' };
  async function startWithJob() {
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ plugins: ['@svc/plugin-cli-connector'] }));
    const svc = await startReadySvc({ appRoot, env: { SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password, LOG_LEVEL: 'warn' } });
    const login = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
    expect(login.status).toBe(200);
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const post = (p: string, body: unknown = {}) => fetch(`${svc.url}${p}`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    // A job whose shell started a grandchild (pid printed): it must not outlive the service.
    const { id } = (await (await post(`${PREFIX}/run/group`)).json()) as { id: string };
    let out = '';
    for (let i = 0; i < 200 && !out.includes('\n'); i++) {
      out += ((await (await post(`${PREFIX}/job/${id}`)).json()) as { stdout: string[] }).stdout.join('');
      await new Promise((r) => setTimeout(r, 25));
    }
    const grandchild = Number(out.trim());
    expect(alive(grandchild)).toBe(true);
    return { svc, cookie, post, grandchild };
  }

  it('a graceful stop kills every process group a script started; the bootstrap password has left the process', async () => {
    const { svc, cookie, grandchild } = await startWithJob();
    const left = await fetch(`${svc.url}/app_scripts/admin-password`, { headers: { cookie } });
    expect(await left.json()).toEqual({ env: null, config: null });
    expect(await svc.stop('SIGTERM')).toBe(0);
    await expect.poll(() => alive(grandchild), { timeout: 5000, interval: 20 }).toBe(false); // signalled; ends a moment later
    // The operator learns what the stop cut short.
    expect(svc.logs().find((l) => /killed at shutdown/.test(l.msg ?? ''))).toMatchObject({ level: 40, scripts: ['group'] });
  });

  it("a script reading its parent's environment (/proc/<svc pid>/environ) finds none of the service's secrets, which svc still uses (issue 52 item 8)", async () => {
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ plugins: ['@svc/plugin-cli-connector'] }));
    const secrets = { SVC_ADMIN_PASSWORD: ADMIN.password, SVC_SECRET_ENCRYPTION_KEY: 'planted-encryption-key-0123456789', SVC_STORE_PASSWORD: 'planted-store-password', APP_API_TOKEN: 'planted-app-token' };
    const svc = await startReadySvc({ appRoot, env: { SVC_ADMIN_EMAIL: ADMIN.email, ...secrets, LOG_LEVEL: 'warn' } });
    // The admin password from the environment still made the admin: svc got its secrets.
    const login = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
    expect(login.status).toBe(200);
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const res = await fetch(`${svc.url}${PREFIX}/script/parent-env`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: '{}' });
    const body = (await res.json()) as { stdout: string; status: number };
    expect(body.status, JSON.stringify(body)).toBe(0);
    const parent = JSON.parse(body.stdout) as { environ: string[]; cmdline: string[] };
    // It is svc's environment (the app path is there), without one secret, by name or by value.
    expect(parent.environ).toContain(`SVC_APP_PATH=${appRoot}`);
    expect(parent.cmdline.join(' ')).toMatch(/server(-bun|-deno)?\.ts/);
    for (const [name, value] of Object.entries(secrets)) {
      expect(parent.environ.filter((v) => v.startsWith(`${name}=`) || v.includes(value)), name).toEqual([]);
    }
    expect(await svc.stop('SIGTERM')).toBe(0);
  });

  it('SIGHUP stops svc as SIGTERM does: every process group a script started is killed (issue 52 item 10)', async () => {
    const { svc, grandchild } = await startWithJob();
    expect(await svc.stop('SIGHUP')).toBe(0);
    await expect.poll(() => alive(grandchild), { timeout: 5000, interval: 20 }).toBe(false);
  });

  it('a SIGKILL to the process svc was started as stops the service and its scripts (issue 52 items 8, 10)', async () => {
    // Started by hand, not by startSvc: its preload (die-with-parent) would SIGKILL the orphaned worker
    // at once, racing the stop this test is about.
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ plugins: ['@svc/plugin-cli-connector'] }));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: String(port), SVC_APP_PATH: appRoot, SVC_DATA_DIR: tempDir('svc-data-'), LOG_LEVEL: 'warn', SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password };
    const [command, args] = svcCommand({ preload: false });
    const started = spawn(command, args, { cwd: PROJECT_DIR, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    started.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    started.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    let worker = 0;
    let grandchild = 0;
    try {
      await expect.poll(() => fetch(`${url}/health`).then((r) => r.status, () => 0), { timeout: 30_000, interval: 200 }).toBe(200);
      const login = await fetch(`${url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
      const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
      const post = async (p: string) => (await fetch(`${url}${PREFIX}${p}`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: '{}' })).json();
      worker = Number(((await post('/script/parent-pid')) as { stdout: string }).stdout);
      expect(worker).not.toBe(started.pid); // secrets in its environment: svc runs as a worker of the started process
      const { id } = (await post('/run/group')) as { id: string };
      await expect.poll(async () => (grandchild ||= Number(((await post(`/job/${id}`)) as { stdout: string[] }).stdout.join('').trim())), { timeout: 10_000 }).toBeGreaterThan(0);
      started.kill('SIGKILL');
      // The worker saw its pipe to that process close and exited at once, its exit handlers ending the scripts.
      await expect.poll(() => alive(worker), { timeout: 10_000, interval: 50 }).toBe(false);
      await expect.poll(() => alive(grandchild), { timeout: 5000, interval: 20 }).toBe(false);
      expect(out).toContain('the process that started this worker is gone');
    } finally {
      for (const pid of [started.pid!, worker, grandchild]) if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });

  it('an error nothing catches is logged with its stack, the process exits non-zero, and no script outlives it', async () => {
    const { svc, post, grandchild } = await startWithJob();
    expect((await post('/app_scripts/crash')).status).toBe(200);
    expect(await svc.exited).not.toBe(0);
    const fatal = svc.logs().find((l) => /uncaught exception/.test(l.msg ?? ''));
    expect(JSON.stringify(fatal)).toMatch(/a plugin timer threw[^"]*\\n\s+at /);
    await expect.poll(() => alive(grandchild), { timeout: 5000, interval: 20 }).toBe(false); // signalled; ends a moment later
  });
});
