// Breached passwords by k-anonymity (CONTRACT 14, issue 56) against a REAL range server on loopback
// (node:http) that records every request it gets: only the 5-hex SHA-1 prefix ever reaches it, with
// `Add-Padding: true`. Every place a password is set is checked (sign-up, reset, own change, admin
// create and set, `svc user create`); a range service that hangs, answers 500, HTML, garbage or 1 MB
// fails open (warn log `breach_check_unavailable`) or closed (503) as configured.

import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { UserService } from '../../src/auth/users.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { startSmtp, tokenFrom, type TestSmtp } from '../support/smtp.ts';
import { PROJECT_DIR } from '../support/spawn.ts';

const redisUrl = inject('redisUrl') || undefined;
const FRONTEND = 'http://localhost:5173';
const BREACHED = 'Tr0ub4dour&3 breached';
const CLEAN = 'a clean long password';
const sha1 = (p: string) => createHash('sha1').update(p, 'utf8').digest('hex').toUpperCase();

type Mode = 'normal' | 'hang' | 'status500' | 'html' | 'huge' | 'garbage' | 'headersThenHang';
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let server: Server;
let rangeUrl: string;
let mode: Mode = 'normal';
const seen: Seen[] = [];
const hanging = new Set<import('node:http').ServerResponse>();

/** A padded range answer: ~800 lines, padding with count 0, the breached password's suffix with a count, and the clean one's only as padding. */
function rangeBody(prefix: string): string {
  const lines: string[] = [];
  for (let i = 0; i < 800; i++) lines.push(`${createHash('sha1').update(`${prefix}${i}`).digest('hex').toUpperCase().slice(5)}:${i % 3 === 0 ? 0 : i + 1}`);
  if (sha1(BREACHED).startsWith(prefix)) lines.splice(400, 0, `${sha1(BREACHED).slice(5)}:52`);
  if (sha1(CLEAN).startsWith(prefix)) lines.splice(100, 0, `${sha1(CLEAN).slice(5)}:0`); // padding: never a match
  return lines.join('\r\n');
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const prefix = /^\/range\/([0-9A-F]{5})$/.exec(req.url!)?.[1];
      if (mode === 'hang') return void hanging.add(res);
      if (mode === 'status500') return void res.writeHead(500, { 'content-type': 'text/plain' }).end('oops');
      if (mode === 'html') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><html><body>Login to your captive portal</body></html>');
      if (mode === 'garbage') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('not:a:range\nat all');
      if (mode === 'huge') {
        // 1 MB of valid-looking lines, streamed without a Content-Length.
        res.writeHead(200, { 'content-type': 'text/plain' });
        const line = `${'A'.repeat(35)}:0\r\n`;
        for (let i = 0; i < (1024 * 1024) / line.length; i++) res.write(line);
        return void res.end();
      }
      if (mode === 'headersThenHang') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write(`${'B'.repeat(35)}:0\r\n`);
        return void hanging.add(res);
      }
      if (!prefix) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'text/plain' }).end(rangeBody(prefix));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  rangeUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/range/`;
});

afterAll(async () => {
  for (const res of hanging) res.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  mode = 'normal';
  for (const res of hanging) res.destroy();
  hanging.clear();
});

/** Every request the range server got asked for one 5-hex prefix and carried nothing else of the password. */
function assertOnlyPrefixesSent(passwords: string[]): void {
  expect(seen.length).toBeGreaterThan(0);
  for (const s of seen) {
    expect(s.method).toBe('GET');
    expect(s.url).toMatch(/^\/range\/[0-9A-F]{5}$/);
    expect(s.headers['add-padding']).toBe('true');
    expect(s.body).toBe('');
    const all = `${s.url} ${JSON.stringify(s.headers)}`;
    for (const p of passwords) {
      expect(all).not.toContain(p);
      expect(all.toUpperCase()).not.toContain(sha1(p).slice(0, 6));
    }
  }
}

const codeOf = async (res: Response) => ((await res.json()) as { error?: { code: string } }).error?.code;
const newEmail = () => `b${randomUUID().slice(0, 8)}@example.com`;
let lastIp = 0;
function browser(a: TestApp): TestClient {
  const ip = `10.56.${(++lastIp >> 8) & 255}.${lastIp & 255}`;
  const c = a.client();
  const raw = c.fetch.bind(c);
  c.fetch = (p, init = {}) => raw(p, { ...init, headers: { 'x-forwarded-for': ip, ...(init.headers as Record<string, string>) } });
  c.login = (email, password) => c.fetch('/auth/login', { method: 'POST', json: { email, password } });
  return c;
}
const post = (c: TestClient, p: string, json: unknown) => c.fetch(p, { method: 'POST', json });

describe('breached passwords (auth.passwords.breachCheck)', () => {
  let smtp: TestSmtp;
  const apps: TestApp[] = [];
  const lines: string[] = [];

  async function app(breachCheck: Record<string, unknown>): Promise<TestApp> {
    const a = await createTestApp({
      redisUrl,
      env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: FRONTEND },
      config: { auth: { signup: { enabled: true, requireVerifiedEmail: false }, passwords: { breachCheck: { enabled: true, rangeUrl, ...breachCheck } } }, server: { trustProxy: 1 } },
      logger: createLogger('info', { write: (line: string) => void lines.push(line) }),
    });
    apps.push(a);
    return a;
  }

  beforeAll(async () => {
    smtp = await startSmtp();
  });
  afterAll(async () => {
    for (const a of apps) await a.close();
    await smtp?.close();
  });
  beforeEach(() => {
    seen.length = 0;
    lines.length = 0;
  });

  it('sign-up: a breached password is 400 password_compromised, a clean one (only as padding) passes; only the prefix was sent', async () => {
    const a = await app({});
    const bad = await post(browser(a), '/auth/signup', { email: newEmail(), password: BREACHED });
    expect(bad.status).toBe(400);
    expect(await codeOf(bad)).toBe('password_compromised');
    expect((await post(browser(a), '/auth/signup', { email: newEmail(), password: CLEAN })).status).toBe(202);
    expect(seen.map((s) => s.url)).toEqual([`/range/${sha1(BREACHED).slice(0, 5)}`, `/range/${sha1(CLEAN).slice(0, 5)}`]);
    assertOnlyPrefixesSent([BREACHED, CLEAN]);
  });

  it('reset: a breached password is refused and the token stays usable', async () => {
    const a = await app({});
    const user = await a.createUser();
    await post(browser(a), '/auth/password/forgot', { email: user.email });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
    const bad = await post(browser(a), '/auth/password/reset', { token, newPassword: BREACHED });
    expect(bad.status).toBe(400);
    expect(await codeOf(bad)).toBe('password_compromised');
    expect((await post(browser(a), '/auth/password/reset', { token, newPassword: CLEAN })).status).toBe(204);
    expect((await browser(a).login(user.email, CLEAN)).status).toBe(200);
    assertOnlyPrefixesSent([BREACHED, CLEAN]);
    // A dead token is invalid_token whatever the password, and asks the range service nothing.
    const asked = seen.length;
    for (const dead of [token, 'made-up-token']) {
      const res = await post(browser(a), '/auth/password/reset', { token: dead, newPassword: BREACHED });
      expect(res.status).toBe(400);
      expect(await codeOf(res)).toBe('invalid_token');
    }
    expect(seen.length).toBe(asked);
  });

  it('own change, admin create and admin set: a breached password is refused and nothing changes', async () => {
    const a = await app({});
    const user = await a.createUser();
    const c = browser(a);
    expect((await c.login(user.email, user.password)).status).toBe(200);
    const change = await post(c, '/auth/password', { currentPassword: user.password, newPassword: BREACHED });
    expect(change.status).toBe(400);
    expect(await codeOf(change)).toBe('password_compromised');
    expect((await browser(a).login(user.email, user.password)).status).toBe(200);
    expect((await post(c, '/auth/password', { currentPassword: user.password, newPassword: CLEAN })).status).toBe(204);

    const admin = await a.createUser({ admin: true });
    const ac = browser(a);
    expect((await ac.login(admin.email, admin.password)).status).toBe(200);
    const email = newEmail();
    const create = await post(ac, '/auth/users', { email, password: BREACHED });
    expect(create.status).toBe(400);
    expect(await codeOf(create)).toBe('password_compromised');
    expect(((await (await ac.fetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { total: number }).total).toBe(0);
    const set = await ac.fetch(`/auth/users/${user.id}`, { method: 'PATCH', json: { password: BREACHED } });
    expect(set.status).toBe(400);
    expect(await codeOf(set)).toBe('password_compromised');
    expect((await browser(a).login(user.email, CLEAN)).status).toBe(200);
    expect((await ac.fetch(`/auth/users/${user.id}`, { method: 'PATCH', json: { password: `${CLEAN} 2` } })).status).toBe(200);
    assertOnlyPrefixesSent([BREACHED, CLEAN, `${CLEAN} 2`]);
  });

  it('logins are never checked (no range request)', async () => {
    const a = await app({});
    const user = await a.createUser({ password: BREACHED });
    expect((await browser(a).login(user.email, BREACHED)).status).toBe(200);
    expect(seen).toHaveLength(0);
  });

  for (const fault of ['hang', 'headersThenHang', 'status500', 'html', 'huge', 'garbage'] as const) {
    it(`a range service that ${fault === 'huge' ? 'answers 1 MB' : fault}: failOpen accepts with a warn log, failOpen false is 503 breach_check_unavailable`, async () => {
      mode = fault;
      const open = await app({ timeoutMs: 300 });
      const started = Date.now();
      expect((await post(browser(open), '/auth/signup', { email: newEmail(), password: BREACHED })).status).toBe(202);
      expect(Date.now() - started).toBeLessThan(3000);
      const warn = lines.map((l) => JSON.parse(l) as { level: number; msg: string }).find((l) => l.msg.includes('breach_check_unavailable'));
      expect(warn?.level).toBe(40);
      expect(lines.join('\n')).not.toContain(BREACHED);

      const closed = await app({ timeoutMs: 300, failOpen: false });
      const email = newEmail();
      const res = await post(browser(closed), '/auth/signup', { email, password: BREACHED });
      expect(res.status).toBe(503);
      expect(await codeOf(res)).toBe('breach_check_unavailable');
      expect(await closed.instance.auth.users.findByEmail(email)).toBeNull();
      assertOnlyPrefixesSent([BREACHED]);
    });
  }

  it('off (the default): no range request at all', async () => {
    const a = await createTestApp({ redisUrl, env: { SVC_SMTP_URL: smtp.url, SVC_FRONTEND_URLS: FRONTEND }, config: { auth: { signup: { enabled: true } } } });
    apps.push(a);
    expect((await post(browser(a), '/auth/signup', { email: newEmail(), password: BREACHED })).status).toBe(202);
    expect(seen).toHaveLength(0);
  });
});

describe('svc user create checks the password too', () => {
  function run(root: string, args: string[], stdin: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const env: NodeJS.ProcessEnv = { ...process.env, SVC_APP_PATH: root };
    for (const k of ['MONGODB_URL', 'SVC_DATA_DIR', 'CACHE_URL', 'SVC_CACHE_URL', 'SVC_ADMIN_EMAIL', 'SVC_ADMIN_PASSWORD', 'SVC_SMTP_URL']) delete env[k];
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['bin/svc.js', ...args], { cwd: PROJECT_DIR, env, stdio: ['pipe', 'pipe', 'pipe'] });
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

  async function emailsIn(root: string): Promise<string[]> {
    const dir = path.join(root, '.svc-data');
    if (!existsSync(dir)) return [];
    const db = new EmbeddedDatabase(dir);
    try {
      return (await (await UserService.open(db)).users.find({})).map((u) => u.email);
    } finally {
      await db.close();
    }
  }

  it('a breached password: exit 2, password_compromised, nobody created; a clean one: created', async () => {
    seen.length = 0;
    const root = mkdtempSync(path.join(tmpdir(), 'svc-breach-cli-'));
    writeFileSync(path.join(root, 'svc.config.json'), JSON.stringify({ auth: { passwords: { breachCheck: { enabled: true, rangeUrl } } } }));
    const bad = await run(root, ['user', 'create', '--email', 'ops@example.com'], `${BREACHED}\n`);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('password_compromised');
    expect(await emailsIn(root)).toEqual([]);
    const good = await run(root, ['user', 'create', '--email', 'ops@example.com'], `${CLEAN}\n`);
    expect(good.code, good.stderr).toBe(0);
    expect(await emailsIn(root)).toEqual(['ops@example.com']);
    assertOnlyPrefixesSent([BREACHED, CLEAN]);
  });
});
