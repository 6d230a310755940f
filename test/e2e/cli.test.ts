// The operator CLI (CONTRACT section 1): `npx svc user create --email X [--admin]` with the password
// on standard input, run as an operator would (child process in the project directory), against the
// embedded database of a fresh app root. The database is opened after the CLI exited.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/auth/passwords.ts';
import { UserService, type UserDoc } from '../../src/auth/users.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createTestApp } from '../support/app.ts';

const PROJECT_DIR = fileURLToPath(new URL('../../', import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function appRoot(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-cli-'));
  dirs.push(dir);
  return dir;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The `svc` bin in the project directory, `stdin` piped in, SVC_APP_PATH = `root`: `npx svc <args>` as
 * the README shows it when `viaNpx`, else `node bin/svc.js` (the file npx runs). npm's own start-up
 * costs ~1 s idle and 5 s on a busy 2-core machine: one test goes through npx, the rest do not.
 */
function svc(root: string, args: string[], stdin: string, viaNpx = false): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_APP_PATH: root };
  for (const k of ['MONGODB_URL', 'SVC_DATA_DIR', 'CACHE_URL', 'SVC_CACHE_URL', 'SVC_ADMIN_EMAIL', 'SVC_ADMIN_PASSWORD', 'SVC_SMTP_URL']) delete env[k];
  return new Promise((resolve, reject) => {
    const [command, ...prefix] = viaNpx ? ['npx', '--no-install', 'svc'] : [process.execPath, 'bin/svc.js'];
    const child = spawn(command!, [...prefix, ...args], { cwd: PROJECT_DIR, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

/** The users in `<root>/.svc-data`, read with the database closed again afterwards. */
async function usersIn(root: string): Promise<UserDoc[]> {
  const dir = path.join(root, '.svc-data');
  if (!existsSync(dir)) return [];
  const db = new EmbeddedDatabase(dir);
  try {
    const users = await UserService.open(db);
    return await users.users.find({});
  } finally {
    await db.close();
  }
}

describe('npx svc user create', () => {
  it('creates an admin with the password from stdin (exit 0); the user has the ADMIN tag and can log in', async () => {
    const root = appRoot();
    const password = 'piped in password';
    const run = await svc(root, ['user', 'create', '--email', 'Ops@Example.com', '--admin', '--firstname', 'Op', '--lastname', 'Erator'], `${password}\n`, true);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('ops@example.com');
    expect(run.stdout + run.stderr).not.toContain(password);

    const users = await usersIn(root);
    expect(users).toHaveLength(1);
    const [user] = users;
    expect(user).toMatchObject({ email: 'ops@example.com', firstname: 'Op', lastname: 'Erator' });
    expect(user!.tags).toContain('ADMIN');
    // argon2id with OWASP's parameters, recorded in the hash (CONTRACT section 3).
    expect(user!.passwordHash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    // The trailing newline of the pipe is not part of the password.
    expect(await verifyPassword(user!.passwordHash!, password)).toBe(true);
    expect(await verifyPassword(user!.passwordHash!, `${password}\n`)).toBe(false);

    // The server, on that same database, lets the admin in.
    const db = new EmbeddedDatabase(path.join(root, '.svc-data'));
    const t = await createTestApp({ db });
    try {
      const c = t.client();
      const res = await c.login('ops@example.com', password);
      expect(res.status).toBe(200);
      expect((await res.json()).user.isAdmin).toBe(true);
      expect((await c.fetch('/auth/users')).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('without --admin the user has no ADMIN tag', async () => {
    const root = appRoot();
    const run = await svc(root, ['user', 'create', '--email', 'plain@example.com'], 'plain password');
    expect(run.code, run.stderr).toBe(0);
    const [user] = await usersIn(root);
    expect(user!.email).toBe('plain@example.com');
    expect(user!.tags).not.toContain('ADMIN');
  });

  it('works on an app root with sign-up on and no mail relay (only the service needs SVC_SMTP_URL)', async () => {
    const root = appRoot();
    writeFileSync(path.join(root, 'svc.config.json'), JSON.stringify({ auth: { signup: { enabled: true }, magicLink: { enabled: true } } }));
    const run = await svc(root, ['user', 'create', '--email', 'mailless@example.com'], 'plain password');
    expect(run.code, run.stderr).toBe(0);
    expect((await usersIn(root)).map((u) => u.email)).toEqual(['mailless@example.com']);
  });

  it('refuses --password on the command line (exit 2) and creates nobody', async () => {
    const root = appRoot();
    const run = await svc(root, ['user', 'create', '--email', 'x@example.com', '--password', 'x'], 'long enough password');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--password/);
    expect(await usersIn(root)).toEqual([]);
  });

  it('refuses a password shorter than 8 characters (exit 2)', async () => {
    const root = appRoot();
    const run = await svc(root, ['user', 'create', '--email', 'short@example.com'], '1234567\n');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/8 characters/);
    expect(await usersIn(root)).toEqual([]);
  });

  it('refuses a bad or missing email (exit 2)', async () => {
    const root = appRoot();
    for (const args of [['--email', 'not-an-email'], ['--email', 'a b@example.com'], []]) {
      const run = await svc(root, ['user', 'create', ...args], 'long enough password');
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr).toMatch(/--email/);
    }
    expect(await usersIn(root)).toEqual([]);
  });

  it('a duplicate email (any casing) fails with a clear message and leaves the first user alone', async () => {
    const root = appRoot();
    expect((await svc(root, ['user', 'create', '--email', 'dup@example.com'], 'first password')).code).toBe(0);
    for (const email of ['dup@example.com', 'DUP@example.com']) {
      const run = await svc(root, ['user', 'create', '--email', email, '--admin'], 'second password');
      expect(run.code, email).not.toBe(0);
      expect(run.stderr).toMatch(/already exists/i);
    }
    const users = await usersIn(root);
    expect(users).toHaveLength(1);
    expect(users[0]!.tags).not.toContain('ADMIN');
    expect(await verifyPassword(users[0]!.passwordHash!, 'first password')).toBe(true);
  });
});
