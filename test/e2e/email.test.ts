// Sign-up, verification, password reset, magic links and security notices (CONTRACT 12, issue 36),
// end to end against a REAL SMTP server on loopback: each mail goes through nodemailer to smtp-server,
// is parsed by mailparser, and the test reads the link out of the mail as a person would click it.
// Expiry is tested with the tokens' injectable clock, never by sleeping.

import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Secret, TOTP } from 'otpauth';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { dumpStore, setCookies } from '../support/auth.ts';
import { startInstance } from '../support/realtime.ts';
import { startSmtp, tokenFrom, type TestSmtp } from '../support/smtp.ts';
import { PROJECT_DIR } from '../support/spawn.ts';

const redisUrl = inject('redisUrl') || undefined;
const FRONTEND = 'http://localhost:5173';
const apps: TestApp[] = [];
let smtp: TestSmtp;

beforeAll(async () => {
  smtp = await startSmtp();
});
afterAll(async () => {
  for (const a of apps) await a.close();
  await smtp?.close();
});

async function app(opts: { env?: Record<string, string>; config?: Record<string, unknown>; files?: Record<string, string>; logLines?: string[] } = {}): Promise<TestApp> {
  const logger = opts.logLines ? createLogger('info', { write: (line: string) => void opts.logLines!.push(line) }) : undefined;
  const a = await createTestApp({
    redisUrl,
    env: { SVC_SMTP_URL: smtp.url, SVC_MAIL_FROM: 'Example <accounts@example.test>', SVC_FRONTEND_URLS: FRONTEND, SVC_SECRET_ENCRYPTION_KEY: 'email-test', ...opts.env },
    config: { auth: { signup: { enabled: true }, magicLink: { enabled: true } }, server: { trustProxy: 1 }, ...opts.config },
    files: opts.files,
    logger,
  });
  apps.push(a);
  return a;
}

let lastIp = 0;
/** A browser with a cookie jar and an address of its own (the per-IP limit of one test stays in it). */
function browser(a: TestApp, ip = `10.36.${(++lastIp >> 8) & 255}.${lastIp & 255}`): TestClient {
  const c = a.client();
  const raw = c.fetch.bind(c);
  c.fetch = (path, init = {}) => raw(path, { ...init, headers: { 'x-forwarded-for': ip, ...(init.headers as Record<string, string>) } });
  c.login = (email, password) => c.fetch('/auth/login', { method: 'POST', json: { email, password } });
  return c;
}
const post = (c: TestClient, path: string, json: unknown) => c.fetch(path, { method: 'POST', json });
const codeOf = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;
const newEmail = () => `u${randomUUID().slice(0, 8)}@example.com`;
/** Every job queued so far has ended: what was going to be sent, was. */
const settled = (a: TestApp) => a.instance.auth.mailer.idle();

describe('password reset', () => {
  let a: TestApp;
  beforeAll(async () => {
    a = await app();
  });

  it('forgot -> one mail with a link to the frontend page -> the token POSTed sets the password, ends every session, verifies the email', async () => {
    const user = await a.createUser();
    const old = browser(a);
    expect((await old.login(user.email, user.password)).status).toBe(200);
    const res = await post(browser(a), '/auth/password/forgot', { email: user.email.toUpperCase() });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({});

    const [mail] = await smtp.waitFor(user.email);
    expect(mail!.to).toEqual([user.email]);
    expect(mail!.from).toBe('accounts@example.test');
    expect(mail!.subject).toBe('Reset your password');
    expect(mail!.text).toContain(`${FRONTEND}/reset-password?token=`);
    expect(mail!.html).toContain(`${FRONTEND}/reset-password?token=`);
    const token = tokenFrom(mail!, '/reset-password');
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const reset = await post(browser(a), '/auth/password/reset', { token, newPassword: 'a brand new password' });
    expect(reset.status).toBe(204);
    expect((await old.fetch('/auth/session')).status).toBe(401);
    expect((await browser(a).login(user.email, user.password)).status).toBe(401);
    const fresh = browser(a);
    expect((await fresh.login(user.email, 'a brand new password')).status).toBe(200);
    const me = (await (await fresh.fetch('/auth/session?expand=user')).json()) as { user: { email_verified: boolean } };
    expect(me.user.email_verified).toBe(true);

    // Single use; and the notice (no link) reached the user.
    expect(await codeOf(await post(browser(a), '/auth/password/reset', { token, newPassword: 'yet another password' }))).toBe('invalid_token');
    const notices = (await smtp.waitFor(user.email, 2)).filter((m) => m.subject === 'Your password was changed');
    expect(notices).toHaveLength(1);
    expect(notices[0]!.text).not.toMatch(/token=/);
  });

  it('a weak new password is 400 validation_failed and the token stays usable; a bad token is 400 invalid_token', async () => {
    const user = await a.createUser();
    await post(browser(a), '/auth/password/forgot', { email: user.email });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
    const weak = await post(browser(a), '/auth/password/reset', { token, newPassword: 'short' });
    expect(weak.status).toBe(400);
    expect(await codeOf(weak)).toBe('validation_failed');
    for (const bad of ['', 'garbage', `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`]) {
      const res = await post(browser(a), '/auth/password/reset', { token: bad, newPassword: 'a good long password' });
      expect(res.status).toBe(400);
      expect(await codeOf(res)).toBe('invalid_token');
    }
    // A GET never consumes a token (mail scanners follow links): no GET route, the token still works.
    expect((await browser(a).fetch(`/auth/password/reset?token=${token}`)).status).toBeGreaterThanOrEqual(400);
    expect((await post(browser(a), '/auth/password/reset', { token, newPassword: 'a good long password' })).status).toBe(204);
  });

  it('a reset link expires after 30 minutes (clock moved, not slept)', async () => {
    const user = await a.createUser();
    await post(browser(a), '/auth/password/forgot', { email: user.email });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
    const tokens = a.instance.auth.email.tokens;
    tokens.now = () => Date.now() + 30 * 60_000 + 1000;
    try {
      expect(await codeOf(await post(browser(a), '/auth/password/reset', { token, newPassword: 'a good long password' }))).toBe('invalid_token');
    } finally {
      tokens.now = Date.now;
    }
  });

  it('a reset link dies when the password changes another way; TOTP stays on after a reset', async () => {
    const user = await a.createUser();
    await post(browser(a), '/auth/password/forgot', { email: user.email });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
    const me = browser(a);
    expect((await me.login(user.email, user.password)).status).toBe(200);
    expect((await post(me, '/auth/password', { currentPassword: user.password, newPassword: 'changed the usual way' })).status).toBe(204);
    expect(await codeOf(await post(browser(a), '/auth/password/reset', { token, newPassword: 'a good long password' }))).toBe('invalid_token');
    expect((await browser(a).login(user.email, 'changed the usual way')).status).toBe(200);

    // TOTP on, then a reset: the login still asks for the code.
    const enrolled = (await (await post(me, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
    expect((await post(me, '/auth/totp/confirm', { code: totp.generate() })).status).toBe(200);
    await post(browser(a), '/auth/password/forgot', { email: user.email });
    // The first reset, the change notice, the new-device notice (line 140's fresh browser, CONTRACT 14), this reset.
    const mails = await smtp.waitFor(user.email, 4);
    const second = tokenFrom(mails.filter((m) => m.subject === 'Reset your password').at(-1)!, '/reset-password');
    expect((await post(browser(a), '/auth/password/reset', { token: second, newPassword: 'after the reset' })).status).toBe(204);
    expect(await (await browser(a).login(user.email, 'after the reset')).json()).toEqual({ mfaRequired: true });
  });
});

describe('POST /auth/password/reset/check: the reset page asks on load whether its link still works', () => {
  let a: TestApp;
  beforeAll(async () => {
    a = await app();
  });
  const check = (token: unknown) => post(browser(a), '/auth/password/reset/check', { token });
  async function resetToken(email: string): Promise<string> {
    await post(browser(a), '/auth/password/forgot', { email });
    return tokenFrom((await smtp.waitFor(email)).filter((m) => m.subject === 'Reset your password').at(-1)!, '/reset-password');
  }

  it('a live token: 204, as often as asked, and the token still sets the password afterwards; then it is used: 400 invalid_token', async () => {
    const user = await a.createUser();
    const token = await resetToken(user.email);
    for (let i = 0; i < 3; i++) {
      const res = await check(token);
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
    }
    expect((await post(browser(a), '/auth/password/reset', { token, newPassword: 'a brand new password' })).status).toBe(204);
    expect((await browser(a).login(user.email, 'a brand new password')).status).toBe(200);
    const used = await check(token);
    expect(used.status).toBe(400);
    expect(await codeOf(used)).toBe('invalid_token');
  });

  it('bad tokens as the reset route judges them: garbage or empty 400 invalid_token; missing, too long, not a string, extra fields 400 validation_failed', async () => {
    const user = await a.createUser();
    const token = await resetToken(user.email);
    for (const bad of ['', 'garbage', `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`]) {
      const res = await check(bad);
      expect(res.status, bad).toBe(400);
      expect(await codeOf(res)).toBe('invalid_token');
    }
    for (const body of [{}, { token: 'x'.repeat(600) }, { token: 12 }, { token: [token] }, { token, newPassword: 'a good long password' }]) {
      const res = await post(browser(a), '/auth/password/reset/check', body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(await codeOf(res)).toBe('validation_failed');
    }
    // No GET: the token never travels in a URL (logs, Referer), and a mail scanner's GET checks nothing.
    expect((await browser(a).fetch(`/auth/password/reset/check?token=${token}`)).status).toBe(405);
    expect((await check(token)).status).toBe(204);
  });

  it('an expired token (30 minutes, clock moved) and one outdated by a password change: 400 invalid_token', async () => {
    const user = await a.createUser();
    const token = await resetToken(user.email);
    const tokens = a.instance.auth.email.tokens;
    tokens.now = () => Date.now() + 30 * 60_000 + 1000;
    try {
      expect(await codeOf(await check(token))).toBe('invalid_token');
    } finally {
      tokens.now = Date.now;
    }
    expect((await check(token)).status).toBe(204);
    const me = browser(a);
    expect((await me.login(user.email, user.password)).status).toBe(200);
    expect((await post(me, '/auth/password', { currentPassword: user.password, newPassword: 'changed the usual way' })).status).toBe(204);
    expect(await codeOf(await check(token))).toBe('invalid_token');
  });
});

describe('sign-up and verification', () => {
  let a: TestApp;
  beforeAll(async () => {
    a = await app();
  });

  it('sign-up -> unverified user, no admin, login 403 email_not_verified (wrong password 401) -> link in the same browser -> verified, login works', async () => {
    const email = newEmail();
    const maker = browser(a);
    const res = await post(maker, '/auth/signup', { email, password: 'my own password', firstname: 'Ann', isAdmin: undefined });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({});
    const [signupCookie] = setCookies(res, 'svc_signup');
    expect(signupCookie!.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(signupCookie!.attrs.has('httponly')).toBe(true);
    expect(signupCookie!.attrs.get('max-age')).toBe('86400');
    const user = (await a.instance.auth.users.findByEmail(email))!;
    expect(user).toMatchObject({ email_verified: false, createdVia: 'signup', firstname: 'Ann', tags: [] });

    const refused = await browser(a).login(email, 'my own password');
    expect(refused.status).toBe(403);
    expect(await codeOf(refused)).toBe('email_not_verified');
    expect(setCookies(refused, 'sid_app')).toEqual([]);
    expect(await codeOf(await browser(a).login(email, 'not my password'))).toBe('invalid_credentials');

    const [mail] = await smtp.waitFor(email);
    expect(mail!.subject).toBe('Confirm your email address');
    const verified = await post(maker, '/auth/email/verify', { token: tokenFrom(mail!, '/verify-email') });
    expect(verified.status).toBe(200);
    expect(await verified.json()).toEqual({ email, emailVerified: true });
    expect((await a.instance.auth.users.findByEmail(email))!.signupBinding).toBeUndefined();
    const ok = await browser(a).login(email, 'my own password');
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { user: { isAdmin: boolean } }).user.isAdmin).toBe(false);
    expect(await codeOf(await post(browser(a), '/auth/email/verify', { token: tokenFrom(mail!, '/verify-email') }))).toBe('invalid_token');
  });

  it("a sign-up verified from another browser is the mailbox owner's claim: the squatter's password and ways in go, the answer carries a reset token", async () => {
    const open = await app({ config: { auth: { signup: { enabled: true, requireVerifiedEmail: false } }, server: { trustProxy: 1 } } });
    const victim = newEmail();
    const squatter = browser(open);
    expect((await post(squatter, '/auth/signup', { email: victim, password: 'the squatter password' })).status).toBe(202);
    expect((await squatter.login(victim, 'the squatter password')).status).toBe(200);
    // A way in added since the sign-up: a pending TOTP enrolment confirmed.
    const enrolled = (await (await post(squatter, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
    expect((await post(squatter, '/auth/totp/confirm', { code: totp.generate() })).status).toBe(200);
    const epochBefore = (await open.instance.auth.users.findByEmail(victim))!.epoch ?? 0;

    // The owner clicks "Confirm your email address" in a browser of their own.
    const [mail] = await smtp.waitFor(victim);
    const owner = browser(open);
    const verified = await post(owner, '/auth/email/verify', { token: tokenFrom(mail!, '/verify-email') });
    expect(verified.status).toBe(200);
    expect(verified.headers.get('cache-control')).toBe('no-store');
    const body = (await verified.json()) as { email: string; emailVerified: true; passwordResetToken: string };
    expect(body).toEqual({ email: victim, emailVerified: true, passwordResetToken: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });

    const user = (await open.instance.auth.users.findByEmail(victim))!;
    expect(user.passwordHash).toBeUndefined();
    expect(user.totp).toBeUndefined();
    expect(user.email_verified).toBe(true);
    expect(user.epoch).toBeGreaterThan(epochBefore);
    expect((await squatter.fetch('/auth/session')).status).toBe(401);
    expect(await codeOf(await browser(open).login(victim, 'the squatter password'))).toBe('invalid_credentials');

    // The page asks for a new password with the token: the owner's account, no second step.
    expect((await post(owner, '/auth/password/reset', { token: body.passwordResetToken, newPassword: 'the owner password' })).status).toBe(204);
    expect(await (await owner.login(victim, 'the owner password')).json()).toMatchObject({ user: { email: victim } });
    expect(await codeOf(await post(owner, '/auth/password/reset', { token: body.passwordResetToken, newPassword: 'once more please' }))).toBe('invalid_token');
  });

  it("a sign-up verified elsewhere with its own password keeps it; a wrong password is 401, counted, and leaves the token usable", async () => {
    const email = newEmail();
    expect((await post(browser(a), '/auth/signup', { email, password: 'my own password' })).status).toBe(202);
    const token = tokenFrom((await smtp.waitFor(email))[0]!, '/verify-email');
    const phone = browser(a);
    const wrong = await post(phone, '/auth/email/verify', { token, password: 'not my password' });
    expect(wrong.status).toBe(401);
    expect(await codeOf(wrong)).toBe('invalid_credentials');
    const unchanged = (await a.instance.auth.users.findByEmail(email))!;
    expect(unchanged).toMatchObject({ email_verified: false });
    expect(unchanged.passwordHash).toBeDefined();

    const right = await post(phone, '/auth/email/verify', { token, password: 'my own password' });
    expect(right.status).toBe(200);
    expect(await right.json()).toEqual({ email, emailVerified: true });
    expect((await browser(a).login(email, 'my own password')).status).toBe(200);
  });

  it('sign-up with a known address: 202 as for a new one, nothing changes, the owner gets a mail with a working reset link', async () => {
    const owner = await a.createUser();
    const res = await post(browser(a), '/auth/signup', { email: owner.email, password: 'an intruder password' });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({});
    expect((await browser(a).login(owner.email, owner.password)).status).toBe(200);
    expect((await browser(a).login(owner.email, 'an intruder password')).status).toBe(401);
    const [mail] = await smtp.waitFor(owner.email);
    expect(mail!.subject).toBe('Someone tried to sign up with your address');
    expect((await post(browser(a), '/auth/password/reset', { token: tokenFrom(mail!, '/reset-password'), newPassword: 'the owner resets it' })).status).toBe(204);
  });

  it("an unverified sign-up does not own its address: the owner's reset removes the ways in its maker added (TOTP) and ends its sessions", async () => {
    const open = await app({ config: { auth: { signup: { enabled: true, requireVerifiedEmail: false } }, server: { trustProxy: 1 } } });
    const victim = newEmail();
    const intruder = browser(open);
    expect((await post(intruder, '/auth/signup', { email: victim, password: 'the intruder password' })).status).toBe(202);
    expect((await intruder.login(victim, 'the intruder password')).status).toBe(200);
    const enrolled = (await (await post(intruder, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
    expect((await post(intruder, '/auth/totp/confirm', { code: totp.generate() })).status).toBe(200);

    await post(browser(open), '/auth/password/forgot', { email: victim });
    const reset = (await smtp.waitFor(victim, 2)).find((m) => m.subject === 'Reset your password')!;
    expect((await post(browser(open), '/auth/password/reset', { token: tokenFrom(reset, '/reset-password'), newPassword: 'the owner password' })).status).toBe(204);
    expect((await intruder.fetch('/auth/session')).status).toBe(401);
    const owner = await browser(open).login(victim, 'the owner password');
    expect(await owner.json()).toMatchObject({ user: { email: victim } }); // no second step: the intruder's TOTP is gone
    expect((await open.instance.auth.users.findByEmail(victim))!.email_verified).toBe(true);
  });

  it('sign-up: a weak password or a bad email is 400; signup off is 403 signup_disabled; no extra fields', async () => {
    for (const body of [{ email: newEmail(), password: 'short' }, { email: 'not an email', password: 'long enough pw' }, { email: newEmail(), password: 'long enough pw', isAdmin: true }]) {
      const res = await post(browser(a), '/auth/signup', body);
      expect(res.status).toBe(400);
      expect(await codeOf(res)).toBe('validation_failed');
    }
    const off = await app({ config: { auth: {}, server: { trustProxy: 1 } } });
    const res = await post(browser(off), '/auth/signup', { email: newEmail(), password: 'long enough pw' });
    expect(res.status).toBe(403);
    expect(await codeOf(res)).toBe('signup_disabled');
  });

  it('verification request: 202 always; a mail only to an existing unverified user; the token expires after 24 hours', async () => {
    const verifiedUser = await a.createUser();
    await a.instance.auth.users.users.updateOne({ _id: verifiedUser.id }, { $set: { email_verified: true } });
    const unverified = await a.createUser();
    const unknown = newEmail();
    for (const email of [verifiedUser.email, unverified.email, unknown]) {
      const res = await post(browser(a), '/auth/email/verify/request', { email });
      expect(res.status).toBe(202);
      expect(await res.json()).toEqual({});
    }
    await settled(a);
    expect(smtp.to(verifiedUser.email)).toEqual([]);
    expect(smtp.to(unknown)).toEqual([]);
    const token = tokenFrom((await smtp.waitFor(unverified.email))[0]!, '/verify-email');
    const tokens = a.instance.auth.email.tokens;
    tokens.now = () => Date.now() + 24 * 3600_000 + 1000;
    try {
      expect(await codeOf(await post(browser(a), '/auth/email/verify', { token }))).toBe('invalid_token');
    } finally {
      tokens.now = Date.now;
    }
  });
});

describe('magic link', () => {
  let a: TestApp;
  beforeAll(async () => {
    a = await app();
  });

  it('202 + HttpOnly svc_magic; the link logs in only the browser that asked, once; lastLoginAt and email_verified set', async () => {
    const user = await a.createUser();
    const me = browser(a);
    const res = await post(me, '/auth/login/link', { email: user.email });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({});
    const [cookie] = setCookies(res, 'svc_magic');
    expect(cookie!.attrs.has('httponly')).toBe(true);
    expect(cookie!.attrs.get('max-age')).toBe('600');
    const [mail] = await smtp.waitFor(user.email);
    const token = tokenFrom(mail!, '/login/link');

    const elsewhere = browser(a);
    await post(elsewhere, '/auth/login/link', { email: newEmail() }); // a svc_magic of its own
    const stolen = await post(elsewhere, '/auth/login/link/verify', { token });
    expect(stolen.status).toBe(400);
    expect(await codeOf(stolen)).toBe('invalid_token');
    expect(await codeOf(await post(browser(a), '/auth/login/link/verify', { token }))).toBe('invalid_token');

    const ok = await post(me, '/auth/login/link/verify', { token });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ user: { id: user.id, email: user.email, isAdmin: false } });
    const session = (await (await me.fetch('/auth/session?expand=user')).json()) as { user: { email_verified: boolean; lastLoginAt: string | null } };
    expect(session.user.email_verified).toBe(true);
    expect(session.user.lastLoginAt).not.toBeNull();

    await post(me, '/auth/login/link', { email: user.email });
    expect(await codeOf(await post(me, '/auth/login/link/verify', { token }))).toBe('invalid_token');
  });

  it('an unknown address: 202 and the cookie as for a known one, no mail, no account', async () => {
    const email = newEmail();
    const res = await post(browser(a), '/auth/login/link', { email });
    expect(res.status).toBe(202);
    expect(setCookies(res, 'svc_magic')).toHaveLength(1);
    await settled(a);
    expect(smtp.to(email)).toEqual([]);
    expect(await a.instance.auth.users.findByEmail(email)).toBeNull();
  });

  it('a sign-up not verified yet, then a magic link: a claim, so its password is gone; a password change then says how to get one back (not "OAuth")', async () => {
    const email = newEmail();
    const me = browser(a);
    expect((await post(me, '/auth/signup', { email, password: 'the sign-up password' })).status).toBe(202);
    await smtp.waitFor(email);
    expect((await post(me, '/auth/login/link', { email })).status).toBe(202);
    const link = (await smtp.waitFor(email, 2)).find((m) => m.subject === 'Your login link')!;
    expect((await post(me, '/auth/login/link/verify', { token: tokenFrom(link, '/login/link') })).status).toBe(200);
    expect((await browser(a).login(email, 'the sign-up password')).status).toBe(401);
    const res = await post(me, '/auth/password', { currentPassword: 'the sign-up password', newPassword: 'a new long password' });
    expect(res.status).toBe(409);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('no_password');
    // Not "it logs in with OAuth" alone: this account never used OAuth. It says how to get a password back.
    expect(error.message).toMatch(/mailed link/);
    expect(error.message).toMatch(/forgot password/i);
  });

  it('TOTP on: the link answers {"mfaRequired":true}, the code finishes the login; the link expires after 10 minutes', async () => {
    const user = await a.createUser();
    const me = browser(a);
    await me.login(user.email, user.password);
    const enrolled = (await (await post(me, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
    await post(me, '/auth/totp/confirm', { code: totp.generate() });

    const b = browser(a);
    await post(b, '/auth/login/link', { email: user.email });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/login/link');
    const res = await post(b, '/auth/login/link/verify', { token });
    expect(await res.json()).toEqual({ mfaRequired: true });
    expect(setCookies(res, 'sid_app')).toEqual([]);

    await post(b, '/auth/login/link', { email: user.email });
    const later = tokenFrom((await smtp.waitFor(user.email, 2))[1]!, '/login/link');
    const tokens = a.instance.auth.email.tokens;
    tokens.now = () => Date.now() + 10 * 60_000 + 1000;
    try {
      expect(await codeOf(await post(b, '/auth/login/link/verify', { token: later }))).toBe('invalid_token');
    } finally {
      tokens.now = Date.now;
    }
  });

  it('magic links off: 403 magic_link_disabled', async () => {
    const off = await app({ config: { auth: {}, server: { trustProxy: 1 } } });
    const res = await post(browser(off), '/auth/login/link', { email: newEmail() });
    expect(res.status).toBe(403);
    expect(await codeOf(res)).toBe('magic_link_disabled');
  });
});

describe('enumeration safety and limits', () => {
  let a: TestApp;
  const lines: string[] = [];
  beforeAll(async () => {
    a = await app({ logLines: lines });
  });

  it('a known and an unknown address get the same status, body and headers on every public route', async () => {
    const known = await a.createUser();
    const answer = async (path: string, body: object) => {
      const res = await post(browser(a), path, body);
      const headers = [...res.headers.entries()].filter(([k]) => !['date', 'set-cookie', 'x-request-id'].includes(k));
      return { status: res.status, body: await res.text(), headers, cookies: res.headers.getSetCookie().map((l) => l.replace(/=[^;]*/, '=')) };
    };
    for (const path of ['/auth/password/forgot', '/auth/email/verify/request', '/auth/login/link']) {
      const [k, u] = [await answer(path, { email: known.email }), await answer(path, { email: newEmail() })];
      expect(k, path).toEqual(u);
    }
    expect(await answer('/auth/signup', { email: known.email, password: 'some long password' })).toEqual(await answer('/auth/signup', { email: newEmail(), password: 'some long password' }));
  });

  it('the answer never waits for SMTP: with the relay holding every connection, known addresses get 202 before any mail is sent', async () => {
    const user = await a.createUser();
    smtp.hold();
    try {
      const before = smtp.connections;
      for (const path of ['/auth/password/forgot', '/auth/login/link']) {
        expect((await post(browser(a), path, { email: user.email })).status).toBe(202);
      }
      // The jobs reached the relay, which has not even greeted them: the answers came first.
      for (let i = 0; i < 200 && smtp.connections < before + 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect(smtp.connections).toBeGreaterThanOrEqual(before + 2);
      expect(smtp.to(user.email)).toEqual([]);
    } finally {
      smtp.release();
    }
    expect(await smtp.waitFor(user.email, 2)).toHaveLength(2);
  });

  it('at most 3 mails per address per 15 minutes; more requests still answer 202', async () => {
    const user = await a.createUser();
    const before = lines.length;
    for (let i = 0; i < 6; i++) expect((await post(browser(a), i % 2 ? '/auth/password/forgot' : '/auth/login/link', { email: user.email })).status).toBe(202);
    await settled(a);
    expect(smtp.to(user.email)).toHaveLength(3);
    // The operator learns why the others were not sent; the log keeps the address masked.
    const capped = lines.slice(before).filter((l) => l.includes('mail not sent: 3 mails to this address in 15 minutes already'));
    expect(capped).toHaveLength(3);
    expect(capped.join('\n')).not.toContain(user.email);
    expect(JSON.parse(capped[0]!).to).toBe(`${user.email[0]}***@${user.email.split('@')[1]}`);
  });

  it('100 requests per IP per 15 minutes to these routes together, then 429 too_many_attempts with Retry-After; another IP is not affected', async () => {
    const ip = '10.99.0.1';
    const paths = ['/auth/password/forgot', '/auth/email/verify/request', '/auth/login/link'];
    for (let i = 0; i < 97; i++) expect((await post(browser(a, ip), paths[i % 3]!, { email: newEmail() })).status).toBe(202);
    expect((await post(browser(a, ip), '/auth/email/verify', { token: 'x' })).status).toBe(400);
    expect((await post(browser(a, ip), '/auth/password/reset', { token: 'x', newPassword: 'long enough pw' })).status).toBe(400);
    expect((await post(browser(a, ip), '/auth/login/link/verify', { token: 'x' })).status).toBe(400);
    const limited = await post(browser(a, ip), '/auth/password/forgot', { email: newEmail() });
    expect(limited.status).toBe(429);
    expect(await codeOf(limited)).toBe('too_many_attempts');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await post(browser(a, '10.99.0.2'), '/auth/password/forgot', { email: newEmail() })).status).toBe(202);
  });

  it('bad input: CRLF in an address, arrays, overlong values, unknown fields, huge bodies', async () => {
    const c = browser(a);
    const bad: [string, unknown][] = [
      ['/auth/password/forgot', { email: 'victim@example.com\r\nBcc: attacker@example.com' }],
      ['/auth/password/forgot', { email: ['a@example.com', 'b@example.com'] }],
      ['/auth/password/forgot', { email: `${'a'.repeat(250)}@example.com` }],
      ['/auth/password/forgot', { email: 'a@example.com', extra: 1 }],
      ['/auth/password/forgot', {}],
      ['/auth/login/link', { email: 'a@example.com\nx' }],
      ['/auth/email/verify/request', { email: 'a@example.com', redirect: 'https://evil.test' }],
      ['/auth/signup', { email: 'a\r\n@example.com', password: 'long enough pw' }],
      // One mailbox, not a list: a comma, a display name or a line break after it would add recipients or headers.
      ['/auth/signup', { email: 'victim@example.com,attacker', password: 'long enough pw' }],
      ['/auth/signup', { email: 'victim@example.com;attacker', password: 'long enough pw' }],
      ['/auth/signup', { email: 'Victim <attacker@example.com>', password: 'long enough pw' }],
      ['/auth/password/forgot', { email: 'victim@example.com\r\n' }],
      ['/auth/password/forgot', { email: 'victim@example.com\u0000' }],
      ['/auth/email/verify', { token: ['a', 'b'] }],
      ['/auth/email/verify', { token: 'x'.repeat(600) }],
      ['/auth/password/reset', { token: 'x', newPassword: 'long enough pw', email: 'a@example.com' }],
      ['/auth/login/link/verify', { token: 12 }],
      // Near the body limit: refused by its length (counting the characters of 900,000 ran out of memory).
      ['/auth/password/reset', { token: 'x', newPassword: 'x'.repeat(900_000) }],
      ['/auth/signup', { email: 'a@example.com', password: '😀'.repeat(400_000) }],
    ];
    for (const [path, body] of bad) {
      const res = await post(c, path, body);
      expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      expect(await codeOf(res)).toBe('validation_failed');
    }
    const hugeBody = JSON.stringify({ email: 'a@example.com', pad: 'x'.repeat(2 * 1024 * 1024) });
    const huge = await c.fetch('/auth/password/forgot', { method: 'POST', body: hugeBody, headers: { 'content-type': 'application/json', 'content-length': String(hugeBody.length) } });
    expect(huge.status).toBe(413);
    await settled(a);
    expect(smtp.to('attacker@example.com')).toEqual([]);
    expect(smtp.to('victim@example.com')).toEqual([]);
    expect(smtp.mails.filter((m) => m.to.some((r) => !r.includes('@')))).toEqual([]);
  });

  it('tokens are never in the store keys, only their SHA-256', async () => {
    const user = await a.createUser();
    await post(browser(a), '/auth/password/forgot', { email: user.email });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
    const dump = await dumpStore(a, redisUrl);
    const all = [...dump].map(([k, val]) => `${k} ${val}`).join('\n');
    expect(all).not.toContain(token);
    expect([...dump.keys()].join('\n')).not.toContain(user.email);
    expect([...dump.keys()].some((k) => /email-token:reset:[0-9a-f]{64}$/.test(k))).toBe(true);
  });
});

describe('templates, notices and the transport', () => {
  it('templates from the app root (text + HTML) and configured subjects; variables HTML-escaped in HTML only; defaults load nothing from elsewhere', async () => {
    const a = await app({
      config: { server: { trustProxy: 1 }, auth: { email: { subjects: { reset: 'Your ACME password' } } } },
      files: { 'emails/reset.txt': 'ACME reset for {{email}}: {{link}} ({{validFor}})\n', 'emails/reset.html': '<p>ACME reset for {{email}}: <a href="{{link}}">go</a></p>' },
    });
    const email = `o'brien&co${randomUUID().slice(0, 4)}@example.com`;
    await a.instance.auth.users.create({ email, password: 'long enough pw', createdVia: 'admin' });
    await post(browser(a), '/auth/password/forgot', { email });
    const [mail] = await smtp.waitFor(email);
    expect(mail!.subject).toBe('Your ACME password');
    expect(mail!.text).toMatch(new RegExp(`^ACME reset for ${email.replace(/[&]/g, '\\$&')}: ${FRONTEND}/reset-password\\?token=[\\w-]{43} \\(30 minutes\\)`));
    expect(mail!.html).toContain(`ACME reset for ${email.replace('&', '&#38;').replace("'", '&#39;')}:`);

    // The default HTML of another kind: no image, stylesheet, font or script, no URL but the link.
    const b = await app();
    const user = await b.createUser();
    await post(browser(b), '/auth/login/link', { email: user.email });
    const [def] = await smtp.waitFor(user.email);
    expect(def!.html).not.toMatch(/<(img|link|script|style|iframe)\b|url\(|@import/i);
    expect([...def!.html.matchAll(/https?:\/\/[^\s"'<]+/g)].map((m) => m[0]).every((u) => u.startsWith(`${FRONTEND}/login/link?token=`))).toBe(true);
  });

  it('a template with an unknown variable stops start-up, naming the file', async () => {
    await expect(createTestApp({ env: { SVC_SMTP_URL: smtp.url }, files: { 'emails/verify.txt': 'Hi {{name}}: {{link}}' } })).rejects.toThrow(/emails\/verify\.txt: unknown variable \{\{name\}\}/);
  });

  it('security notices: after a password change and after TOTP is turned off (no link)', async () => {
    const a = await app();
    const user = await a.createUser();
    const me = browser(a);
    await me.login(user.email, user.password);
    await post(me, '/auth/password', { currentPassword: user.password, newPassword: 'the second password' });
    const enrolled = (await (await post(me, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
    await post(me, '/auth/totp/confirm', { code: totp.generate() });
    expect((await me.fetch('/auth/totp', { method: 'DELETE', json: { password: 'the second password' } })).status).toBe(204);
    const mails = await smtp.waitFor(user.email, 2);
    expect(mails.map((m) => m.subject)).toEqual(['Your password was changed', 'Two-factor authentication was turned off']);
    for (const m of mails) expect(m.text).not.toMatch(/https?:/);
  });

  it('the notice after a reset lists the ways in that stayed (TOTP here), with no link; without any it says so', async () => {
    const a = await app();
    const user = await a.createUser();
    const me = browser(a);
    await me.login(user.email, user.password);
    const enrolled = (await (await post(me, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(enrolled.otpauthUri).searchParams.get('secret')!) });
    expect((await post(me, '/auth/totp/confirm', { code: totp.generate() })).status).toBe(200);
    await post(browser(a), '/auth/password/forgot', { email: user.email });
    const reset = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
    expect((await post(browser(a), '/auth/password/reset', { token: reset, newPassword: 'a brand new password' })).status).toBe(204);
    const notice = (await smtp.waitFor(user.email, 2)).find((m) => m.subject === 'Your password was changed')!;
    expect(notice.text).toContain('These stay: two-factor authentication (TOTP) and its recovery codes.');
    expect(notice.html).toContain('These stay: two-factor authentication (TOTP) and its recovery codes.');
    expect(notice.text).not.toMatch(/https?:/);

    const plain = await a.createUser();
    const other = browser(a);
    await other.login(plain.email, plain.password);
    await post(other, '/auth/password', { currentPassword: plain.password, newPassword: 'the second password' });
    const [changed] = await smtp.waitFor(plain.email);
    expect(changed!.text).toContain('The account has no other way in.');
  });

  it("app.name and app.url: the mails' subject and first line, their links, the TOTP issuer and the passkey RP name", async () => {
    const named = await app({ config: { app: { name: 'Acme Notes', url: 'https://notes.example' }, server: { trustProxy: 1 } } });
    const user = await named.createUser();
    await post(browser(named), '/auth/password/forgot', { email: user.email });
    const [mail] = await smtp.waitFor(user.email);
    expect(mail!.subject).toBe('Acme Notes: Reset your password');
    expect(mail!.text.split('\n')[0]).toBe('Acme Notes');
    expect(mail!.html).toContain('>Acme Notes</p>');
    expect(tokenFrom(mail!, '/reset-password')).toBeTruthy();
    expect(mail!.text).toContain('https://notes.example/reset-password?token=');
    const me = browser(named);
    await me.login(user.email, user.password);
    const { otpauthUri } = (await (await post(me, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    expect(new URL(otpauthUri).searchParams.get('issuer')).toBe('Acme Notes');
    const options = (await (await post(me, '/auth/passkeys/options', {})).json()) as { rp: { name: string } };
    expect(options.rp.name).toBe('Acme Notes');
    // Unset, nothing changes: svc's own name where one is needed, and the subjects as CONTRACT 12 has them.
    const unnamed = await app();
    const plain = await unnamed.createUser();
    const other = browser(unnamed);
    await other.login(plain.email, plain.password);
    const enrolled = (await (await post(other, '/auth/totp/enroll', {})).json()) as { otpauthUri: string };
    expect(new URL(enrolled.otpauthUri).searchParams.get('issuer')).toBe('svc');
  });

  it('STARTTLS when the server offers it; a relay on loopback with a self-signed certificate (a local Postfix) is used as it is', async () => {
    const tls = await startSmtp({ starttls: true });
    try {
      const a = await app({ env: { SVC_SMTP_URL: tls.url } });
      const user = await a.createUser();
      await post(browser(a), '/auth/password/forgot', { email: user.email });
      const [mail] = await tls.waitFor(user.email);
      expect(mail!.secure).toBe(true);
    } finally {
      await tls.close();
    }
  });

  it('a relay elsewhere must show a valid certificate; on loopback too when its URL asks for tls.rejectUnauthorized=true', async () => {
    const tls = await startSmtp({ starttls: true });
    try {
      const lines: string[] = [];
      const a = await app({ env: { SVC_SMTP_URL: `${tls.url}?tls.rejectUnauthorized=true` }, logLines: lines });
      const user = await a.createUser();
      await post(browser(a), '/auth/password/forgot', { email: user.email });
      await settled(a);
      expect(tls.to(user.email)).toEqual([]);
      expect(lines.find((l) => l.includes('mail could not be sent'))).toMatch(/certificate/);
      // The same relay named by a host that is not loopback keeps nodemailer's certificate check.
      const elsewhere = await app({ env: { SVC_SMTP_URL: 'smtp://mail.example.com:587' } });
      expect(elsewhere.instance.auth.mailer.transportOptions.tls).toBeUndefined();
      expect(a.instance.auth.mailer.transportOptions.tls).toEqual({ rejectUnauthorized: true });
    } finally {
      await tls.close();
    }
  });

  it('SMTP timeouts from auth.email.timeouts reach nodemailer: a relay that never greets ends the job with the greeting timeout, logged', async () => {
    expect((await app()).instance.auth.mailer.transportOptions).toMatchObject({ connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000 });
    const silent = await startSmtp();
    silent.hold(); // connections are accepted, the greeting never comes
    try {
      const lines: string[] = [];
      const a = await app({ env: { SVC_SMTP_URL: silent.url }, config: { auth: { email: { timeouts: { connect: 7, greeting: 1, socket: 9 } } } }, logLines: lines });
      expect(a.instance.auth.mailer.transportOptions).toMatchObject({ connectionTimeout: 7000, greetingTimeout: 1000, socketTimeout: 9000 });
      const user = await a.createUser();
      expect((await post(browser(a), '/auth/password/forgot', { email: user.email })).status).toBe(202);
      await settled(a);
      expect(silent.connections).toBe(1);
      const failure = lines.find((l) => l.includes('mail could not be sent'));
      expect(JSON.parse(failure!)).toMatchObject({ kind: 'reset', code: 'ETIMEDOUT', err: 'Greeting never received' });
    } finally {
      silent.release();
      await silent.close();
    }
    await expect(loadConfig({ SVC_APP_PATH: '/nonexistent-app' }, { raw: { auth: { email: { timeouts: { socket: 0 } } } } })).rejects.toThrow(/auth\.email\.timeouts\.socket/);
  });

  it('SMTP down: answers stay 202, nothing crashes, the log says so without the token or the address', async () => {
    const closed = await startSmtp();
    const url = closed.url;
    await closed.close();
    const lines: string[] = [];
    const a = await app({ env: { SVC_SMTP_URL: url }, logLines: lines });
    const user = await a.createUser();
    expect((await post(browser(a), '/auth/password/forgot', { email: user.email })).status).toBe(202);
    expect((await post(browser(a), '/auth/password/forgot', { email: newEmail() })).status).toBe(202);
    await settled(a);
    const failures = lines.filter((l) => l.includes('mail could not be sent'));
    expect(failures).toHaveLength(1);
    expect(failures[0]).toContain(`"to":"${user.email[0]}***@example.com"`);
    expect(lines.join('\n')).not.toContain(user.email);
    expect(lines.join('\n')).not.toMatch(/token=|[A-Za-z0-9_-]{43}/);
    expect((await a.fetch('/health')).status).toBe(200);
  });

  it('without SVC_SMTP_URL every route answers 501 email_not_configured (logged as a plain info line, no error)', async () => {
    const lines: string[] = [];
    const a = await createTestApp({ redisUrl, logger: createLogger('info', { write: (line: string) => void lines.push(line) }) });
    apps.push(a);
    const routes: [string, unknown][] = [
      ['/auth/password/forgot', { email: 'a@example.com' }],
      ['/auth/password/reset', { token: 'x', newPassword: 'long enough pw' }],
      ['/auth/password/reset/check', { token: 'x' }],
      ['/auth/signup', { email: 'a@example.com', password: 'long enough pw' }],
      ['/auth/email/verify/request', { email: 'a@example.com' }],
      ['/auth/email/verify', { token: 'x' }],
      ['/auth/login/link', { email: 'a@example.com' }],
      ['/auth/login/link/verify', { token: 'x' }],
    ];
    for (const [path, body] of routes) {
      const res = await post(a.client(), path, body);
      expect(res.status, path).toBe(501);
      expect(await codeOf(res)).toBe('email_not_configured');
    }
    const logged = lines.map((line) => JSON.parse(line) as { level: number; code?: string; err?: unknown });
    expect(logged.filter((line) => line.code === 'email_not_configured')).toHaveLength(routes.length);
    expect(logged.filter((line) => line.level >= 50 || line.err !== undefined)).toEqual([]);
  });

  it('auth.signup.enabled or auth.magicLink.enabled without SVC_SMTP_URL stops start-up, naming the variable', async () => {
    for (const auth of [{ signup: { enabled: true } }, { magicLink: { enabled: true } }]) {
      await expect(loadConfig({ SVC_APP_PATH: '/nonexistent-app' }, { raw: { auth } })).rejects.toThrow(/SVC_SMTP_URL/);
    }
    await expect(loadConfig({ SVC_APP_PATH: '/nonexistent-app', SVC_SMTP_URL: 'http://mail.example' }, { raw: {} })).rejects.toThrow(/SVC_SMTP_URL must be smtp/);
  });

  it('a SVC_SMTP_URL that is no URL, or has an unencoded / ? # or @ in its credentials, stops start-up naming the variable and the fix, not the password', async () => {
    const refused = async (url: string) => {
      const err = await loadConfig({ SVC_APP_PATH: '/nonexistent-app', SVC_SMTP_URL: url }, { raw: {} }).then(
        () => new Error(`accepted: ${url}`),
        (e: unknown) => e as Error,
      );
      expect(err.name, url).toBe('ConfigError');
      expect(err.message, url).toMatch(/^SVC_SMTP_URL /);
      expect(err.message, url).not.toContain('s3cret');
      return err.message;
    };
    expect(await refused('smtp://host with junk')).toMatch(/smtp:\/\/\[user:pass@\]host:port/);
    // Node's legacy parser, which nodemailer uses, takes the first as host "us": mail (and the password) would go there.
    for (const url of ['smtp://us/er:pw-s3cret@host:587', 'smtp://user:p@ss-s3cret@host:587', 'smtp://user:pw?s3cret@host:587', 'smtp://user:pw/s3cret@host:587']) {
      expect(await refused(url)).toMatch(/percent-encode/);
    }
    for (const url of ['smtp://user:p%40ss%2Fs3cret@smtp.example.com:587', 'smtps://smtp.example.com:465', 'smtp://127.0.0.1:2525?tls.rejectUnauthorized=true']) {
      const { config } = await loadConfig({ SVC_APP_PATH: '/nonexistent-app', SVC_SMTP_URL: url }, { raw: {} });
      expect(config.env.smtpUrl).toBe(url);
    }
  });

  it('SVC_MAIL_FROM must be one address ("Name <a@b>" or "a@b") on one line: anything else stops start-up naming the variable', async () => {
    for (const from of ['junk', 'junk@', '@example.com', 'a@b, c@d', 'a@b c@d', 'a@b>', '<a@b', 'a@b\u0000', 'App <>', 'team: a@b;', 'a@b@c', 'App <a@b>\r\nBcc: x@y']) {
      await expect(loadConfig({ SVC_APP_PATH: '/nonexistent-app', SVC_MAIL_FROM: from }, { raw: {} }), from).rejects.toThrow(/^SVC_MAIL_FROM must be one address/);
    }
    for (const from of ['a@b', 'App <no-reply@example.com>', '"Example, Inc." <no-reply@example.com>']) {
      expect((await loadConfig({ SVC_APP_PATH: '/nonexistent-app', SVC_MAIL_FROM: from }, { raw: {} })).config.env.mailFrom).toBe(from);
    }
    expect((await loadConfig({ SVC_APP_PATH: '/nonexistent-app' }, { raw: {} })).config.env.mailFrom).toBe('svc <no-reply@localhost>');
  });
});

describe('start-up', () => {
  it('warns when mails would link to svc itself (SMTP set, no SVC_FRONTEND_URLS, no auth.email.linkBaseUrl); quiet with a frontend or a link base set', async () => {
    const cases = [{}, { env: { SVC_FRONTEND_URLS: FRONTEND } }, { config: { auth: { email: { linkBaseUrl: 'http://localhost:3000' } } } }];
    for (const [i, c] of cases.entries()) {
      const logs: string[] = [];
      const server = await startInstance({ env: { SVC_SMTP_URL: smtp.url, ...c.env }, config: c.config, logs });
      try {
        const warned = logs.filter((line) => line.includes("links in mails go to svc's own address"));
        if (i > 0) expect(warned).toEqual([]);
        else expect(warned.join('\n')).toMatch(/\(http:\/\/[^ ]+\/reset-password\?token=\.\.\.\): unless a frontend served from that origin has these pages/);
      } finally {
        await server.close();
      }
    }
  });
});

describe('svc doctor', () => {
  /** `svc doctor` as an operator runs it, in a process (asynchronously: this process serves the SMTP server meanwhile); its mail lines. */
  async function doctorMail(env: Record<string, string>, config: object = {}): Promise<string[]> {
    const root = mkdtempSync(path.join(tmpdir(), 'svc-doctor-mail-'));
    writeFileSync(path.join(root, 'svc.config.json'), JSON.stringify(config));
    const run = await promisify(execFile)(process.execPath, [path.join(PROJECT_DIR, 'bin/svc.js'), 'doctor'], {
      cwd: PROJECT_DIR,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/root', SVC_APP_PATH: root, ...env },
      timeout: 60_000,
    }).catch((err: { stdout: string }) => err);
    return run.stdout.split('\n').filter((l) => /^(ok {2}|WARN|FAIL) (SMTP reachable|SVC_MAIL_FROM|email links|mail):/.test(l));
  }

  it('SMTP reachable (EHLO), the sender set, the link base URL one of SVC_FRONTEND_URLS', async () => {
    const good = await doctorMail({ SVC_SMTP_URL: smtp.url, SVC_MAIL_FROM: 'App <no-reply@example.test>', SVC_FRONTEND_URLS: FRONTEND });
    expect(good).toEqual(['ok'.padEnd(4) + ' SMTP reachable: EHLO answered', 'ok'.padEnd(4) + ' SVC_MAIL_FROM: App <no-reply@example.test>', `${'ok'.padEnd(4)} email links: links in mails go to ${FRONTEND}`]);

    const closed = await startSmtp();
    await closed.close();
    const bad = await doctorMail({ SVC_SMTP_URL: closed.url, SVC_FRONTEND_URLS: FRONTEND }, { auth: { email: { linkBaseUrl: 'https://elsewhere.example' } } });
    expect(bad.map((l) => l.split(':')[0])).toEqual(['FAIL SMTP reachable', 'FAIL SVC_MAIL_FROM', 'FAIL email links']);

    expect(await doctorMail({ SVC_FRONTEND_URLS: FRONTEND })).toEqual([expect.stringMatching(/^ok {3}mail: SVC_SMTP_URL not set/)]);
  });
});
