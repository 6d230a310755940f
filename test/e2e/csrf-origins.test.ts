// Which browser origins may send state-changing requests (CSRF) and read responses (CORS), and what
// an operator learns when one is refused. Security review, issue 24: finding 6 (`Origin: null`) and
// finding 14 (`http://localhost:$PORT` allowed whatever the listen address); operator issue 26 §6
// (`csrf_failed` said nothing about why). In-process where the answer is all that matters; the real
// process where start-up, the listen address or log lines are the point.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { startReadySvc, startSvc, stopAll, type LogLine, type SvcProcess } from '../support/spawn.ts';

afterAll(stopAll);

const NO_WEB_ORIGIN = ['capacitor://localhost', 'tauri://localhost', 'app://x', 'file:///x'];
const appRoot = () => mkdtempSync(path.join(tmpdir(), 'svc-app-'));

async function configError(env: NodeJS.ProcessEnv): Promise<string> {
  try {
    await loadConfig({ SVC_APP_PATH: appRoot(), ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

/** POST with a JSON body and extra headers, through the real socket. */
async function post(url: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

const errorOf = async (res: Response) => ((await res.clone().json()) as { error: { code: string; message: string } }).error;

describe('finding 6: Origin null', () => {
  it('finding 6: loadConfig refuses SVC_FRONTEND_URLS entries without a web origin, naming each', async () => {
    for (const entry of NO_WEB_ORIGIN) {
      const message = await configError({ SVC_FRONTEND_URLS: `http://app.example.test, ${entry}` });
      expect(message).toContain('SVC_FRONTEND_URLS');
      expect(message).toContain(`"${entry}" has no web origin`);
    }
  });

  it('finding 6: SVC_SERVER_BASE_URL and AUTH_CALLBACK_BASE_URL without a web origin are refused too', async () => {
    expect(await configError({ SVC_SERVER_BASE_URL: 'app://x' })).toContain('SVC_SERVER_BASE_URL: "app://x" has no web origin');
    expect(await configError({ AUTH_CALLBACK_BASE_URL: 'tauri://localhost' })).toContain('AUTH_CALLBACK_BASE_URL: "tauri://localhost" has no web origin');
  });

  it('finding 6: a real process with such an entry exits non-zero, naming it', async () => {
    const svc = await startSvc({ env: { SVC_FRONTEND_URLS: 'http://app.example.test,capacitor://localhost' } });
    if (svc.running) await svc.stop('SIGKILL'); // it started: the assertions below say so
    expect(svc.ready, svc.output()).toBe(false);
    expect(svc.exitCode, svc.output()).not.toBe(0);
    expect(svc.exitCode, svc.output()).not.toBeNull();
    expect(svc.stderr()).toContain('"capacitor://localhost" has no web origin');
  });

  it('finding 6: Origin null on a mutating route is 403 csrf_failed under every configuration (or the configuration is refused)', async () => {
    const configurations: { env?: Record<string, string>; config?: Record<string, unknown> }[] = [
      {},
      { env: { SVC_FRONTEND_URLS: 'http://app.example.test' } },
      ...NO_WEB_ORIGIN.map((u) => ({ env: { SVC_FRONTEND_URLS: `http://app.example.test,${u}` } })),
      { env: { SVC_SERVER_BASE_URL: 'app://x' } },
      { env: { AUTH_CALLBACK_BASE_URL: 'capacitor://localhost' } },
      { env: { SVC_SERVER_BASE_URL: 'https://svc.example.test', SVC_FRONTEND_URLS: 'https://app.example.test' }, config: { server: { trustProxy: 1 } } },
    ];
    for (const configuration of configurations) {
      const what = JSON.stringify(configuration);
      let t: TestApp;
      try {
        t = await createTestApp(configuration);
      } catch (err) {
        expect(err, what).toBeInstanceOf(ConfigError); // refused at start-up: fine
        continue;
      }
      try {
        const admin = await t.createUser({ admin: true });
        const c = t.client();
        expect((await c.login(admin.email, admin.password)).status).toBe(200);
        // What a sandboxed iframe (or a data: URL page) of the admin's browser would send.
        const res = await c.fetch('/auth/users', {
          method: 'POST',
          headers: { origin: 'null', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'svc.example.test' },
          json: { email: `mallory-${Date.now()}@example.com`, password: 'mallory password', isAdmin: true },
        });
        expect(res.status, what).toBe(403);
        expect((await errorOf(res)).code, what).toBe('csrf_failed');
        expect(res.headers.get('access-control-allow-origin'), what).toBeNull();
        const logout = await c.fetch('/auth/logout', { method: 'POST', headers: { origin: 'null' } });
        expect(logout.status, what).toBe(403);
      } finally {
        await t.close();
      }
    }
  });
});

const isAllowListLine = (l: LogLine) => typeof l.msg === 'string' && l.msg.startsWith('allowed origins');

describe('finding 14: the service\'s own localhost origin only when it listens on loopback', () => {
  let wide: SvcProcess;
  let loopback: SvcProcess;
  beforeAll(async () => {
    [wide, loopback] = await Promise.all([
      startReadySvc({ env: { HOST: '0.0.0.0', SVC_FRONTEND_URLS: 'http://app.example.test' } }),
      startReadySvc({ env: { HOST: '127.0.0.1', SVC_FRONTEND_URLS: 'http://app.example.test' } }),
    ]);
  });

  it('finding 14: HOST=0.0.0.0 without SVC_SERVER_BASE_URL: Origin http://localhost:PORT is 403 csrf_failed', async () => {
    const res = await post(`${wide.url}/auth/login`, { email: 'a@example.com', password: 'whatever password' }, { origin: `http://localhost:${wide.port}` });
    expect(res.status).toBe(403);
    expect((await errorOf(res)).code).toBe('csrf_failed');
    // Listed frontends and same-origin requests still pass.
    for (const origin of ['http://app.example.test', wide.url]) {
      const ok = await post(`${wide.url}/auth/login`, { email: 'a@example.com', password: 'whatever password' }, { origin });
      expect(ok.status, origin).toBe(401);
    }
  });

  it('finding 14: HOST=127.0.0.1: http://localhost:PORT (the service itself) stays allowed', async () => {
    const res = await post(`${loopback.url}/auth/login`, { email: 'a@example.com', password: 'whatever password' }, { origin: `http://localhost:${loopback.port}` });
    expect(res.status).toBe(401);
  });

  it('finding 14: the CSRF/CORS allow-list is logged once at start-up (info)', async () => {
    for (const svc of [wide, loopback]) {
      const lines = svc.logs().filter(isAllowListLine);
      expect(lines, svc.output()).toHaveLength(1);
      expect(lines[0]!.level).toBe(30);
      expect(lines[0]!.cors).toEqual(['http://app.example.test']);
    }
    expect(wide.logs().find(isAllowListLine)!.csrf).toEqual(['http://app.example.test']);
    expect(loopback.logs().find(isAllowListLine)!.csrf).toEqual(['http://app.example.test', `http://localhost:${loopback.port}`]);
  });
});

describe('operator (issue 26 §6): why csrf_failed', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_FRONTEND_URLS: 'http://app.example.test' } });
  });
  afterAll(() => t?.close());

  const login = (origin: string) =>
    t.fetch('/auth/login', { method: 'POST', headers: { 'content-type': 'application/json', origin }, body: JSON.stringify({ email: 'a@example.com', password: 'x' }) });

  it('operator: the csrf_failed message names the refused Origin', async () => {
    const res = await login('http://evil.example.com');
    expect(res.status).toBe(403);
    const error = await errorOf(res);
    expect(error.code).toBe('csrf_failed');
    expect(error.message).toContain('"http://evil.example.com"');
  });

  it('operator: the Origin in the message is sanitized (no control characters) and truncated (about 200 characters)', async () => {
    const hostile = `http://evil.example.com/\x1b[31mred\x7f\t${'a'.repeat(5000)}`;
    const error = await errorOf(await login(hostile));
    expect(error.code).toBe('csrf_failed');
    expect([...error.message].filter((ch) => ch.charCodeAt(0) < 0x20 || (ch.charCodeAt(0) >= 0x7f && ch.charCodeAt(0) <= 0x9f))).toEqual([]);
    expect(error.message).toContain('http://evil.example.com/');
    expect(error.message.length).toBeLessThan(400);
    const quoted = /"([^"]*)"/.exec(error.message)![1]!;
    expect(quoted.length).toBeLessThanOrEqual(201);
  });

  it('operator: the return-to route says which of its CSRF conditions failed, naming a refused Origin', async () => {
    const res = await t.fetch('/auth/oauth/return-to', {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://evil.example.com', referer: 'http://evil.example.com/login' },
      body: JSON.stringify({ returnTo: '/x' }),
    });
    // The app-wide check refuses the foreign Origin first; a listed Origin without the token reaches the route.
    expect((await errorOf(res)).message).toContain('"http://evil.example.com"');
    const noToken = await t.fetch('/auth/oauth/return-to', {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://app.example.test', referer: 'http://app.example.test/login' },
      body: JSON.stringify({ returnTo: '/x' }),
    });
    expect(noToken.status).toBe(403);
    const error = await errorOf(noToken);
    expect(error.code).toBe('csrf_failed');
    expect(error.message).toContain('X-Svc-OAuth-Return-To-CSRF');
    const wrongPage = await t.fetch('/auth/oauth/return-to', {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://app.example.test', referer: 'http://app.example.test/settings' },
      body: JSON.stringify({ returnTo: '/x' }),
    });
    expect((await errorOf(wrongPage)).message).toContain('/login');
  });

  it('operator: start-up warns when the base URL and the frontend URLs mix localhost and 127.0.0.1', async () => {
    const mixed = await loadConfig({ SVC_APP_PATH: appRoot(), SVC_SERVER_BASE_URL: 'http://localhost:3000', SVC_FRONTEND_URLS: 'http://127.0.0.1:5173' });
    const warning = mixed.warnings.find((w) => w.includes('localhost') && w.includes('127.0.0.1'));
    expect(warning, JSON.stringify(mixed.warnings)).toBeDefined();
    expect(warning).toContain('http://127.0.0.1:5173');
    // The default base URL (http://localhost:$PORT) counts as the service's own too.
    const byDefault = await loadConfig({ SVC_APP_PATH: appRoot(), PORT: '3000', SVC_FRONTEND_URLS: 'http://127.0.0.1:5173' });
    expect(byDefault.warnings.some((w) => w.includes('localhost') && w.includes('127.0.0.1'))).toBe(true);
    for (const env of [
      { SVC_SERVER_BASE_URL: 'http://localhost:3000', SVC_FRONTEND_URLS: 'http://localhost:5173' },
      { SVC_SERVER_BASE_URL: 'http://127.0.0.1:3000', SVC_FRONTEND_URLS: 'http://127.0.0.1:5173' },
      { SVC_SERVER_BASE_URL: 'https://svc.example.com', SVC_FRONTEND_URLS: 'https://app.example.com' },
    ]) {
      const { warnings } = await loadConfig({ SVC_APP_PATH: appRoot(), ...env });
      expect(warnings, JSON.stringify(env)).toEqual([]);
    }
  });

  describe('in the real process', () => {
    let svc: SvcProcess;
    beforeAll(async () => {
      svc = await startReadySvc({ env: { SVC_FRONTEND_URLS: 'http://127.0.0.1:5173' } });
    });
    const refusals = () => svc.logs().filter((l) => l.msg === 'csrf_failed: Origin refused');

    it('operator: the start-up warning about localhost vs 127.0.0.1 is logged', () => {
      expect(svc.logs().some((l) => l.level === 40 && String(l.msg).includes('127.0.0.1') && String(l.msg).includes('localhost')), svc.output()).toBe(true);
    });

    it('operator: a refusal is logged at warn with the Origin and the allow-list, at most once per origin per minute', async () => {
      const ids: string[] = [];
      for (const origin of ['http://evil-1.example.com', 'http://evil-1.example.com', 'http://evil-1.example.com', 'http://evil-2.example.com', 'http://evil-2.example.com']) {
        const res = await post(`${svc.url}/auth/logout`, {}, { origin });
        expect(res.status).toBe(403);
        ids.push(res.headers.get('x-request-id')!);
      }
      await svc.waitForLog((l) => l.msg === 'csrf_failed: Origin refused' && l.origin === 'http://evil-2.example.com');
      const lines = refusals();
      expect(lines.map((l) => l.origin)).toEqual(['http://evil-1.example.com', 'http://evil-2.example.com']);
      // The answer's request id finds the line (a support ticket quotes it).
      expect(lines.map((l) => l.reqId)).toEqual([ids[0], ids[3]]);
      for (const line of lines) {
        expect(line.level).toBe(40);
        expect(line.allowed).toEqual(['http://127.0.0.1:5173', `http://localhost:${svc.port}`]);
      }
    });

    it('operator: a CORS preflight from an unlisted origin is logged at warn, naming it and SVC_FRONTEND_URLS, once a minute; a near miss says how it differs', async () => {
      const preflight = (origin: string) =>
        fetch(`${svc.url}/auth/session`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } });
      const misses = () => svc.logs().filter((l) => String(l.msg).startsWith('cors:'));
      for (const origin of ['http://localhost:5173', 'http://localhost:5173', 'http://127.0.0.1:5174', 'http://elsewhere.example.com', 'http://127.0.0.1:5173']) {
        const res = await preflight(origin);
        expect(res.status).toBe(204);
        expect(res.headers.get('access-control-allow-origin')).toBe(origin === 'http://127.0.0.1:5173' ? origin : null);
      }
      await svc.waitForLog((l) => String(l.msg).startsWith('cors:') && l.origin === 'http://elsewhere.example.com');
      const lines = misses();
      expect(lines.map((l) => l.origin)).toEqual(['http://localhost:5173', 'http://127.0.0.1:5174', 'http://elsewhere.example.com']);
      for (const line of lines) {
        expect(line.level).toBe(40);
        expect(line.msg).toContain('SVC_FRONTEND_URLS');
        expect(line.allowed).toEqual(['http://127.0.0.1:5173']);
      }
      expect(lines[0]!.hint).toBe('it differs from the listed http://127.0.0.1:5173 only by localhost vs 127.0.0.1, which browsers treat as different origins');
      expect(lines[1]!.hint).toBe('it differs from the listed http://127.0.0.1:5173 only by its port');
      expect(lines[2]!.hint).toBeUndefined();
      // The service's own pages need no CORS: nothing to report.
      await fetch(`${svc.url}/health`, { headers: { origin: svc.url } });
      expect(misses()).toHaveLength(3);
    });

    it('operator: many distinct refused origins cannot flood the log (bounded lines and memory)', async () => {
      const before = refusals().length;
      await Promise.all(Array.from({ length: 250 }, (_, i) => post(`${svc.url}/auth/logout`, {}, { origin: `http://flood-${i}.example.com` })));
      await svc.waitForLog((l) => String(l.msg).startsWith('csrf_failed: more refused origins'));
      const logged = refusals().length - before;
      expect(logged).toBeGreaterThan(0);
      expect(logged).toBeLessThanOrEqual(100);
    });
  });
});
