// TOTP second factor (CONTRACT section 10, issue 21 part 3): enrol, confirm, two-step login,
// replay, drift, lockout, recovery codes, disable; codes computed with the same RFC 6238 library an
// authenticator app implements, from the secret in the otpauth URI the user scans.

import jsqr from 'jsqr';
import { Secret, TOTP } from 'otpauth';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { UnavailableError } from '../../src/http/errors.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { dumpStore, ResponseLog, setCookies } from '../support/auth.ts';

const redisUrl = inject('redisUrl');
const apps: TestApp[] = [];
const log = new ResponseLog();
afterAll(async () => {
  for (const a of apps) await a.close();
});

async function app(env: Record<string, string> = {}): Promise<TestApp> {
  const a = await createTestApp({ redisUrl: redisUrl || undefined, env: { SVC_SECRET_ENCRYPTION_KEY: 'totp-test-key', ...env } });
  apps.push(a);
  return a;
}
const client = (a: TestApp) => log.wrap(a.client(), 'sid_app');

/** The authenticator app: codes for a given moment from the URI's secret. */
function authenticator(otpauthUri: string) {
  const secret = Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!);
  const totp = new TOTP({ secret, digits: 6, period: 30, algorithm: 'SHA1' });
  return { at: (offsetSteps = 0) => totp.generate({ timestamp: Date.now() + offsetSteps * 30_000 }), secret: secret.base32 };
}

/**
 * What a phone's camera reads from the `qrCode` data URL: the SVG drawn into pixels (its squares of
 * `M x,y h s v s h -s z`, black on white), then decoded by a QR reader (jsQR).
 */
const jsQR = jsqr.default; // a CommonJS module: its `export default` is a property of module.exports
function scanQrCode(dataUrl: string): string | undefined {
  const svg = Buffer.from(dataUrl.replace(/^data:image\/svg\+xml;base64,/, ''), 'base64').toString('utf8');
  const [, width, height] = /<svg [^>]*width="(\d+)" height="(\d+)"/.exec(svg)!.map(Number);
  const pixels = new Uint8ClampedArray(width! * height! * 4).fill(255);
  for (const [, x, y, size] of svg.matchAll(/M(\d+),(\d+)h(\d+)v\d+h-\d+z/g)) {
    for (let row = Number(y); row < Number(y) + Number(size); row++) {
      for (let col = Number(x); col < Number(x) + Number(size); col++) pixels.fill(0, (row * width! + col) * 4, (row * width! + col) * 4 + 3);
    }
  }
  return jsQR(pixels, width!, height!)?.data;
}

/** A user with TOTP on; returns their authenticator, recovery codes and a logged-in client. */
async function withTotp(a: TestApp) {
  const user = await a.createUser();
  const c = client(a);
  expect((await c.login(user.email, user.password)).status).toBe(200);
  const enrolled = await c.fetch('/auth/totp/enroll', { method: 'POST' });
  expect(enrolled.status).toBe(200);
  const { otpauthUri, qrCode } = (await enrolled.json()) as { otpauthUri: string; qrCode: string };
  const app2fa = authenticator(otpauthUri);
  const confirmed = await c.fetch('/auth/totp/confirm', { method: 'POST', json: { code: app2fa.at() } });
  expect(confirmed.status).toBe(200);
  const { recoveryCodes } = (await confirmed.json()) as { recoveryCodes: string[] };
  return { user, c, app2fa, recoveryCodes, otpauthUri, qrCode };
}

async function firstStep(a: TestApp, user: { email: string; password: string }): Promise<TestClient> {
  const b = client(a);
  const res = await b.login(user.email, user.password);
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ mfaRequired: true });
  expect(setCookies(res, 'sid_app')).toEqual([]);
  const [mfa] = setCookies(res, 'svc_mfa');
  expect(mfa!.attrs.has('httponly')).toBe(true);
  expect(Number(mfa!.attrs.get('max-age'))).toBe(300);
  return b;
}

const second = (b: TestClient, json: unknown) => b.fetch('/auth/login/totp', { method: 'POST', json });

describe('TOTP', () => {
  it('enrol: otpauth URI and its QR code (an SVG data URL); pending until confirmed; confirm gives 10 recovery codes once; GET /auth/session says totp', async () => {
    const a = await app();
    const { c, otpauthUri, qrCode, recoveryCodes, app2fa } = await withTotp(a);
    expect(otpauthUri).toMatch(/^otpauth:\/\/totp\/svc:.+\?.*secret=[A-Z2-7]+/);
    expect(qrCode).toMatch(/^data:image\/svg\+xml;base64,/);
    expect(scanQrCode(qrCode)).toBe(otpauthUri); // the code an authenticator app scans holds the URI
    expect(recoveryCodes).toHaveLength(10);
    expect(new Set(recoveryCodes).size).toBe(10);
    expect((await (await c.fetch('/auth/session')).json()) as { totp: boolean }).toMatchObject({ totp: true });
    // Already on: 409; the secret and the codes are stored sealed / hashed, never in clear.
    const again = await c.fetch('/auth/totp/enroll', { method: 'POST' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ error: { code: 'totp_enabled' } });
    const docs = JSON.stringify(await a.instance.auth.users.users.find({}));
    expect(docs).not.toContain(app2fa.secret);
    for (const code of recoveryCodes) expect(docs).not.toContain(code);
    const session = await (await c.fetch('/auth/session?expand=user')).json();
    expect(JSON.stringify(session)).not.toContain('recoveryCodes');
  });

  it('confirm: a wrong code is 400 invalid_code and TOTP stays off; enrolling again replaces the pending secret', async () => {
    const a = await app();
    const user = await a.createUser();
    const c = client(a);
    await c.login(user.email, user.password);
    const first = authenticator(((await (await c.fetch('/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string }).otpauthUri);
    const wrong = await c.fetch('/auth/totp/confirm', { method: 'POST', json: { code: first.at() === '000000' ? '111111' : '000000' } });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({ error: { code: 'invalid_code' } });
    const replaced = authenticator(((await (await c.fetch('/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string }).otpauthUri);
    expect(replaced.secret).not.toBe(first.secret);
    if (first.at() !== replaced.at()) expect((await c.fetch('/auth/totp/confirm', { method: 'POST', json: { code: first.at() } })).status).toBe(400);
    expect((await c.fetch('/auth/totp/confirm', { method: 'POST', json: { code: replaced.at() } })).status).toBe(200);
    // Bad bodies name the field.
    for (const body of [{}, { code: '12345' }, { code: 123456 }, { code: '123456', extra: 1 }]) {
      const res = await c.fetch('/auth/totp/confirm', { method: 'POST', json: body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await res.json()).toMatchObject({ error: { code: 'validation_failed' } });
    }
    expect((await a.fetch('/auth/totp/enroll', { method: 'POST' })).status).toBe(401);
    expect((await a.fetch('/auth/totp/confirm', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"code":"123456"}' })).status).toBe(401);
  });

  it('a first step from a browser with a session ends that session at once (CONTRACT 3: destroyed first), not when the code arrives', async () => {
    const a = await app();
    const { user, c } = await withTotp(a);
    expect((await c.fetch('/auth/session')).status).toBe(200);
    const res = await c.login(user.email, user.password);
    expect(await res.json()).toEqual({ mfaRequired: true });
    const [cleared] = setCookies(res, 'sid_app');
    expect(cleared).toMatchObject({ value: '' });
    expect(cleared!.attrs.get('max-age')).toBe('0');
    expect(setCookies(res, 'svc_mfa')).toHaveLength(1);
    expect(await a.instance.auth.sessions.list(user.id)).toEqual([]); // not only forgotten by the browser: ended
  });

  it('login in two steps: password -> mfaRequired and svc_mfa, no session; the code -> session and the password-login body', async () => {
    const a = await app();
    const { user, app2fa } = await withTotp(a);
    const lastLoginAt = async () => (await a.instance.auth.users.findById(user.id))?.lastLoginAt;
    await a.instance.auth.users.users.updateOne({ _id: user.id }, { $set: { lastLoginAt: null } });
    const b = await firstStep(a, user);
    expect((await b.fetch('/auth/session')).status).toBe(401);
    expect(await lastLoginAt()).toBeNull(); // a first step is not a login yet
    // The code that confirmed the enrolment was used: wait for it in a fresh step window? No: a drift of +1 is accepted.
    const res = await second(b, { code: app2fa.at(1) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { user: { id: string; email: string }; expiresAt: string };
    expect(body.user).toMatchObject({ id: user.id, email: user.email });
    expect(Object.keys(body).sort()).toEqual(['expiresAt', 'user']);
    expect(setCookies(res, 'svc_mfa')[0]!.attrs.get('max-age')).toBe('0');
    expect((await b.fetch('/auth/session')).status).toBe(200);
    expect(Date.parse((await lastLoginAt())!)).toBeGreaterThan(Date.now() - 60_000); // the code finished it
    // The pending login was single use.
    const again = await second(b, { code: app2fa.at(1) });
    expect(again.status).toBe(401);
  });

  it('a code is good once (replay refused, also concurrently); +-1 step of drift accepted, 2 steps refused', async () => {
    const a = await app();
    const { user, app2fa } = await withTotp(a);
    const b1 = await firstStep(a, user);
    const b2 = await firstStep(a, user);
    const code = app2fa.at(1);
    const [r1, r2] = await Promise.all([second(b1, { code }), second(b2, { code })]);
    expect([r1.status, r2.status].sort()).toEqual([200, 401]);
    const loser = r1.status === 401 ? r1 : r2;
    expect(await loser.json()).toMatchObject({ error: { code: 'invalid_code' } });
    // Too far off: two steps ahead.
    const b3 = await firstStep(a, user);
    expect((await second(b3, { code: app2fa.at(3) })).status).toBe(401);
    // An older step than the last accepted one is a replay too.
    expect((await second(b3, { code: app2fa.at(0) })).status).toBe(401);
  });

  it('five wrong codes end the pending login (mfa_expired); too many per user is 429', async () => {
    const a = await app();
    const { user, app2fa } = await withTotp(a);
    const wrongCode = app2fa.at(1) === '000000' ? '999999' : '000000';
    const b = await firstStep(a, user);
    for (let i = 0; i < 5; i++) {
      const res = await second(b, { code: wrongCode });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ error: { code: 'invalid_code' } });
    }
    const ended = await second(b, { code: app2fa.at(1) });
    expect(ended.status).toBe(401);
    expect(await ended.json()).toMatchObject({ error: { code: 'mfa_expired' } });
    // A new pending login gets five more, but the user's total is capped: the 11th wrong code is refused outright.
    const c = await firstStep(a, user);
    for (let i = 0; i < 5; i++) await second(c, { code: wrongCode });
    const d = await firstStep(a, user);
    const limited = await second(d, { code: app2fa.at(1) });
    expect(limited.status).toBe(429);
    expect(await limited.json()).toMatchObject({ error: { code: 'too_many_attempts' } });
  });

  it('without or with an unknown svc_mfa cookie: 401 mfa_expired; a stolen pending cookie still needs the code', async () => {
    const a = await app();
    const { user, app2fa } = await withTotp(a);
    const none = await a.fetch('/auth/login/totp', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: '123456' }) });
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ error: { code: 'mfa_expired' } });
    const forged = await a.fetch('/auth/login/totp', { method: 'POST', headers: { 'content-type': 'application/json', cookie: 'svc_mfa=forged' }, body: JSON.stringify({ code: '123456' }) });
    expect(await forged.json()).toMatchObject({ error: { code: 'mfa_expired' } });
    // The thief copies the victim's pending cookie into another browser: without the code, nothing.
    const victim = await firstStep(a, user);
    const thief = client(a);
    thief.cookies.set('svc_mfa', victim.cookies.get('svc_mfa')!);
    const wrongCode = app2fa.at(1) === '000000' ? '999999' : '000000';
    for (let i = 0; i < 5; i++) expect((await second(thief, { code: wrongCode })).status).toBe(401);
    expect((await thief.fetch('/auth/session')).status).toBe(401);
    expect(await (await second(victim, { code: app2fa.at(1) })).json()).toMatchObject({ error: { code: 'mfa_expired' } });
  });

  it('a recovery code logs in once; reuse is refused', async () => {
    const a = await app();
    const { user, recoveryCodes } = await withTotp(a);
    const b = await firstStep(a, user);
    expect((await second(b, { recoveryCode: recoveryCodes[3]!.toUpperCase() })).status).toBe(200);
    const c = await firstStep(a, user);
    const reused = await second(c, { recoveryCode: recoveryCodes[3] });
    expect(reused.status).toBe(401);
    expect(await reused.json()).toMatchObject({ error: { code: 'invalid_code' } });
    expect((await second(c, { recoveryCode: recoveryCodes[4] })).status).toBe(200);
  });

  // docs/security.md: a recovery code is spent only by the request that gets the session. The store
  // failing after the code was taken (ending the pending login) left it spent, no session made.
  it('a recovery code that a store failure kept from making a session is the user\'s again', async () => {
    const a = await app();
    const { user, recoveryCodes } = await withTotp(a);
    const mfa = a.instance.auth.mfa;
    const end = mfa.end.bind(mfa);
    mfa.end = async () => {
      throw new UnavailableError('store', new Error('connection lost'));
    };
    try {
      expect((await second(await firstStep(a, user), { recoveryCode: recoveryCodes[5] })).status).toBe(503);
    } finally {
      mfa.end = end;
    }
    expect((await second(await firstStep(a, user), { recoveryCode: recoveryCodes[5] })).status).toBe(200);
  });

  it('disable with a code or with the password; wrong ones refused; sessions then say totp false and login is one step', async () => {
    const a = await app();
    const { user, c, app2fa } = await withTotp(a);
    const wrongCode = app2fa.at(1) === '000000' ? '999999' : '000000';
    const bad = await c.fetch('/auth/totp', { method: 'DELETE', json: { code: wrongCode } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'invalid_code' } });
    const badPassword = await c.fetch('/auth/totp', { method: 'DELETE', json: { password: 'not the password' } });
    expect(badPassword.status).toBe(401);
    expect(await badPassword.json()).toMatchObject({ error: { code: 'invalid_credentials' } });
    expect((await c.fetch('/auth/totp', { method: 'DELETE', json: {} })).status).toBe(400);
    expect((await c.fetch('/auth/totp', { method: 'DELETE', json: { password: user.password } })).status).toBe(204);
    expect(await (await c.fetch('/auth/session')).json()).toMatchObject({ totp: false });
    const off = await c.fetch('/auth/totp', { method: 'DELETE', json: { password: user.password } });
    expect(off.status).toBe(409);
    expect(await off.json()).toMatchObject({ error: { code: 'totp_not_enabled' } });
    expect((await client(a).login(user.email, user.password)).status).toBe(200);

    const again = await withTotp(a);
    expect((await again.c.fetch('/auth/totp', { method: 'DELETE', json: { code: again.app2fa.at(1) } })).status).toBe(204);
  });

  it('the pending login lives in the store only as a hash of its cookie', async () => {
    const a = await app();
    const { user } = await withTotp(a);
    const b = await firstStep(a, user);
    const cookie = b.cookies.get('svc_mfa')!;
    const dump = await dumpStore(a, redisUrl || undefined);
    expect([...dump.keys()].some((k) => k.includes(':mfa-pending:'))).toBe(true);
    for (const [k, v] of dump) {
      expect(k).not.toContain(cookie);
      expect(v).not.toContain(cookie);
    }
  });
});

it('no response of this file contained a password hash or a session id', () => {
  expect(log.bodies.length).toBeGreaterThan(30);
  expect(log.leaks()).toEqual([]);
});
