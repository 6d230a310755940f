// The race harness (issue 39): every counter and single-use record fired in parallel against REAL
// Redis with TWO instances of svc sharing one store and one database, as a deployment behind a load
// balancer has them. The embedded store answers within one turn of the event loop and hides every one
// of these races, so this suite runs only on Redis (and says so loudly when there is none).
//
// Each test asserts the rule a user can see: how many requests got past a limit, how many got the one
// thing a single-use record gives, which sessions are alive after a lifecycle event they raced.

import { randomUUID } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { MongoDatabase } from '../../src/db/mongo.ts';
import { ensureAdmin } from '../../src/auth/bootstrap.ts';
import { UserService } from '../../src/auth/users.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { sleep } from '../support/auth.ts';
import { startFakeProvider, type FakeProvider } from '../support/fake-provider.ts';
import { startSmtp, tokenFrom, type TestSmtp } from '../support/smtp.ts';
import { SoftAuthenticator, type CreationOptions, type RequestOptions } from '../support/webauthn.ts';
import { fetchWithCookies, type JsonInit } from '../support/cookie-jar.ts';

const redisUrl = inject('redisUrl');
const mongoUrl = inject('mongoUrl');
const FRONTEND = 'http://localhost:5173';
const COOKIE = 'sid_app';

if (!redisUrl) console.warn('\n*** security-races: SKIPPED, no Redis: these races only show against a real Redis ***\n');

let lastOctets = 0;
/** A client address of its own per browser (the instances trust one proxy hop), so the per-IP login limit of one test does not spill into the next. */
const nextIp = () => `10.${(++lastOctets >> 16) & 255}.${(lastOctets >> 8) & 255}.${lastOctets & 255}`;

/** A browser whose requests may go to either instance: one cookie jar, `via` picks the instance. */
class Jar {
  readonly cookies = new Map<string, string>();

  constructor(readonly ip = nextIp()) {}

  fetch(via: TestApp, path: string, init: JsonInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set('x-forwarded-for', this.ip);
    return fetchWithCookies(via.fetch, this.cookies, path, { ...init, headers });
  }

  /** A copy of this browser's cookies (the same browser sending many requests at once). */
  clone(): Jar {
    const copy = new Jar(this.ip);
    for (const [k, v] of this.cookies) copy.cookies.set(k, v);
    return copy;
  }
}

const codeOf = async (res: Response) => (res.status >= 400 ? ((await res.json()) as { error: { code: string } }).error.code : String(res.status));
const tally = (codes: string[]) => codes.reduce<Record<string, number>>((acc, c) => ({ ...acc, [c]: (acc[c] ?? 0) + 1 }), {});

describe.skipIf(!redisUrl)('races on real Redis with two instances', () => {
  let A: TestApp;
  let B: TestApp;
  let idp: FakeProvider;
  const on = (i: number) => (i % 2 === 0 ? A : B);

  beforeAll(async () => {
    // Each instance its own driver on one MongoDB database (the wire-protocol test server): the real
    // latency between a check and its write. Without it, one shared embedded database.
    const dbUrl = mongoUrl ? mongoUrl.replace(/\/[^/?]*(\?|$)/, `/races_${randomUUID().slice(0, 8)}$1`) : null;
    const shared = EmbeddedDatabase.inMemory();
    const db = async () => (dbUrl ? MongoDatabase.connect(dbUrl) : shared);
    const config = { auth: { store: { keyPrefix: `svctest:${randomUUID().slice(0, 8)}:auth:` } }, server: { trustProxy: 1 } };
    const env = { SVC_FRONTEND_URLS: FRONTEND, SVC_SERVER_BASE_URL: 'http://localhost:3000', SVC_SECRET_ENCRYPTION_KEY: 'races-key' };
    A = await createTestApp({ redisUrl, db: await db(), config, env });
    B = await createTestApp({ redisUrl, db: await db(), config, env });
    idp = await startFakeProvider({ token: '/token', userInfo: '/userinfo' });
    await A.instance.auth.providers.create({
      providerId: 'racy',
      type: 'custom',
      clientId: 'svc',
      clientSecret: 'racy-secret',
      enabled: true,
      config: { authorizationEndpoint: `${idp.baseURL}/authorize`, tokenEndpoint: `${idp.baseURL}/token`, userInfoEndpoint: `${idp.baseURL}/userinfo`, pkce: true },
    } as never);
  });
  afterAll(async () => {
    await idp?.close();
    await A?.close();
    await B?.close();
  });

  async function signedIn(via: TestApp, user: { email: string; password: string }): Promise<Jar> {
    const jar = new Jar();
    const res = await jar.fetch(via, '/auth/login', { method: 'POST', json: { email: user.email, password: user.password } });
    expect(res.status).toBe(200);
    return jar;
  }

  async function withTotp(user: { email: string; password: string }) {
    const jar = await signedIn(A, user);
    const { otpauthUri } = (await (await jar.fetch(A, '/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!) });
    const confirmed = await jar.fetch(B, '/auth/totp/confirm', { method: 'POST', json: { code: totp.generate() } });
    const { recoveryCodes } = (await confirmed.json()) as { recoveryCodes: string[] };
    return { jar, totp, recoveryCodes };
  }

  /** A login waiting for its second step, in a browser of its own. */
  async function pendingLogin(user: { email: string; password: string }, via = A): Promise<Jar> {
    const jar = new Jar();
    const res = await jar.fetch(via, '/auth/login', { method: 'POST', json: { email: user.email, password: user.password } });
    expect(await res.json()).toEqual({ mfaRequired: true });
    return jar;
  }

  /** A wrong 6-digit code: none of the codes the window accepts now. */
  const wrongCode = (totp: TOTP) => {
    const good = new Set([-30_000, 0, 30_000].map((d) => totp.generate({ timestamp: Date.now() + d })));
    for (let n = 0; ; n++) if (!good.has(String(n).padStart(6, '0'))) return String(n).padStart(6, '0');
  };

  /** An OAuth callback for a flow started in `jar` on `via`, delivered with `code`. */
  async function oauthStart(jar: Jar, via: TestApp, path = '/auth/oauth/racy'): Promise<string> {
    const res = await jar.fetch(via, path, path.endsWith('/link') ? { method: 'POST' } : {});
    const url = res.status === 200 ? ((await res.json()) as { authorizationUrl: string }).authorizationUrl : res.headers.get('location')!;
    expect(url, 'the authorize URL').toMatch(/^http/);
    return new URL(url).searchParams.get('state')!;
  }
  const callback = (jar: Jar, via: TestApp, state: string) => jar.fetch(via, `/auth/oauth/racy/callback?state=${encodeURIComponent(state)}&code=${randomUUID()}`);

  it('login limit: 40 parallel wrong passwords for one email over both instances: at most 5 reach the password check', async () => {
    const user = await A.createUser();
    const ip = nextIp();
    const codes = await Promise.all(Array.from({ length: 40 }, (_, i) => new Jar(ip).fetch(on(i), '/auth/login', { method: 'POST', json: { email: user.email, password: `wrong ${i}` } }).then(codeOf)));
    const counts = tally(codes);
    expect(counts.invalid_credentials ?? 0, JSON.stringify(counts)).toBeLessThanOrEqual(5);
    expect(counts.too_many_attempts ?? 0).toBeGreaterThanOrEqual(35);
  });

  // CONTRACT 3: 429 "after 5 failures per email+IP or 50 per IP". Attempts the email+IP lock refused
  // are no failures (no password was checked): counted against the IP, 40 tries at one email left
  // the address 10 failures for every other account instead of 45.
  it('login limit: tries the email+IP lock refused do not use up the IP: after 40 parallel at one email, the IP still has its 50 failures', async () => {
    const user = await A.createUser();
    const ip = nextIp();
    const burst = tally(await Promise.all(Array.from({ length: 40 }, (_, i) => new Jar(ip).fetch(on(i), '/auth/login', { method: 'POST', json: { email: user.email, password: `wrong ${i}` } }).then(codeOf))));
    const checked = burst.invalid_credentials ?? 0;
    expect(checked, JSON.stringify(burst)).toBeLessThanOrEqual(5);
    const codes: string[] = [];
    for (let i = 0; i < 50 - checked + 1; i++) codes.push(await codeOf(await new Jar(ip).fetch(on(i), '/auth/login', { method: 'POST', json: { email: `other-${i}-${ip}@example.com`, password: 'wrong password' } })));
    expect(tally(codes.slice(0, -1)), JSON.stringify(burst)).toEqual({ invalid_credentials: 50 - checked });
    expect(codes.at(-1)).toBe('too_many_attempts');
  });

  it('TOTP, one pending login: 40 parallel wrong codes over both instances: at most 5 checked', async () => {
    const user = await A.createUser();
    const { totp } = await withTotp(user);
    const pending = await pendingLogin(user);
    const codes = await Promise.all(Array.from({ length: 40 }, (_, i) => pending.clone().fetch(on(i), '/auth/login/totp', { method: 'POST', json: { code: wrongCode(totp) } }).then(codeOf)));
    const counts = tally(codes);
    expect(counts.invalid_code ?? 0, JSON.stringify(counts)).toBeLessThanOrEqual(5);
    expect((counts.invalid_code ?? 0) + (counts.mfa_expired ?? 0) + (counts.too_many_attempts ?? 0)).toBe(40);
    // The pending login is over: even the right code no longer completes it.
    expect(await codeOf(await pending.fetch(A, '/auth/login/totp', { method: 'POST', json: { code: totp.generate() } }))).toBe('mfa_expired');
  });

  it('TOTP, one user: 12 pending logins x 4 parallel wrong codes: at most 10 checked in all', async () => {
    const user = await A.createUser();
    const { totp } = await withTotp(user);
    const logins = await Promise.all(Array.from({ length: 12 }, (_, i) => pendingLogin(user, on(i))));
    const codes = await Promise.all(logins.flatMap((jar, i) => Array.from({ length: 4 }, (_, j) => jar.clone().fetch(on(i + j), '/auth/login/totp', { method: 'POST', json: { code: wrongCode(totp) } }).then(codeOf))));
    const counts = tally(codes);
    expect(counts.invalid_code ?? 0, JSON.stringify(counts)).toBeLessThanOrEqual(10);
    expect(counts.too_many_attempts ?? 0).toBeGreaterThan(0);
  });

  it('DELETE /auth/totp: wrong codes count toward the user\'s limit (20 parallel: at most 10 checked, then 429)', async () => {
    const user = await A.createUser();
    const { jar, totp } = await withTotp(user);
    const codes = await Promise.all(Array.from({ length: 20 }, (_, i) => jar.clone().fetch(on(i), '/auth/totp', { method: 'DELETE', json: { code: wrongCode(totp) } }).then(codeOf)));
    const counts = tally(codes);
    expect(counts.invalid_code ?? 0, JSON.stringify(counts)).toBeLessThanOrEqual(10);
    expect(counts.too_many_attempts ?? 0).toBeGreaterThanOrEqual(10);
    // The limit now holds the second login step of the same user too.
    const pending = await pendingLogin(user);
    expect(await codeOf(await pending.fetch(B, '/auth/login/totp', { method: 'POST', json: { code: totp.generate({ timestamp: Date.now() + 30_000 }) } }))).toBe('too_many_attempts');
  });

  // CONTRACT 10: wrong codes at POST /auth/totp/confirm count toward the user's limit (30 wrong codes
  // over two instances, then the right one, gave the recovery codes).
  it('POST /auth/totp/confirm: 30 parallel wrong codes over both instances, at most 10 checked, then the right code is 429 too', async () => {
    const user = await A.createUser();
    const jar = await signedIn(A, user);
    const { otpauthUri } = (await (await jar.fetch(A, '/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string };
    const totp = new TOTP({ secret: Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!) });
    const codes = tally(await Promise.all(Array.from({ length: 30 }, (_, i) => jar.clone().fetch(on(i), '/auth/totp/confirm', { method: 'POST', json: { code: wrongCode(totp) } }).then(codeOf))));
    expect(codes.invalid_code ?? 0, JSON.stringify(codes)).toBeLessThanOrEqual(10);
    expect((codes.invalid_code ?? 0) + (codes.too_many_attempts ?? 0), JSON.stringify(codes)).toBe(30);
    const right = await jar.fetch(B, '/auth/totp/confirm', { method: 'POST', json: { code: totp.generate() } });
    expect(await codeOf(right)).toBe('too_many_attempts');
    expect((await A.instance.auth.users.get(user.id)).totp?.secret).toBeUndefined();
  });

  it('a recovery code works once: 10 pending logins spend the same code in parallel, one session', async () => {
    const user = await A.createUser();
    const { recoveryCodes } = await withTotp(user);
    const logins = await Promise.all(Array.from({ length: 10 }, (_, i) => pendingLogin(user, on(i))));
    const codes = await Promise.all(logins.map((jar, i) => jar.fetch(on(i + 1), '/auth/login/totp', { method: 'POST', json: { recoveryCode: recoveryCodes[0] } }).then(codeOf)));
    expect(tally(codes)['200']).toBe(1);
  });

  it('a recovery code is never spent without a session: the same code 8 times in parallel on one pending login, and twice after 4 wrong codes (3 rounds each)', async () => {
    const user = await A.createUser();
    const { totp, recoveryCodes } = await withTotp(user);
    for (let round = 0; round < 6; round++) {
      const code = recoveryCodes[round]!;
      const jar = await pendingLogin(user, on(round));
      const burst = round % 2 === 0 ? 8 : 2;
      if (burst === 2) {
        for (let i = 0; i < 4; i++) expect(await codeOf(await jar.fetch(on(i), '/auth/login/totp', { method: 'POST', json: { code: wrongCode(totp) } }))).toBe('invalid_code');
      }
      const codes = await Promise.all(Array.from({ length: burst }, (_, i) => jar.clone().fetch(on(i), '/auth/login/totp', { method: 'POST', json: { recoveryCode: code } }).then(codeOf)));
      const counts = tally(codes);
      expect(counts['200'] ?? 0, JSON.stringify(counts)).toBeLessThanOrEqual(1);
      if (!counts['200']) {
        // Nobody got the session: the code was not used up, a new login takes it.
        const again = await pendingLogin(user, on(round + 1));
        expect(await codeOf(await again.fetch(on(round), '/auth/login/totp', { method: 'POST', json: { recoveryCode: code } })), `round ${round}: ${JSON.stringify(counts)}`).toBe('200');
      }
      // Spent now, either way.
      const after = await pendingLogin(user, on(round));
      expect(await codeOf(await after.fetch(on(round + 1), '/auth/login/totp', { method: 'POST', json: { recoveryCode: code } }))).toBe('invalid_code');
      await A.instance.stores.forRole('sessions').del(`${A.keyPrefix}mfa-wrong-user:${user.id}`); // the per-user limit is another test's
    }
  });

  it('a passkey login challenge works once: 10 parallel assertions of one challenge, one session', async () => {
    const user = await A.createUser();
    const jar = await signedIn(A, user);
    const device = new SoftAuthenticator(FRONTEND);
    const creation = (await (await jar.fetch(A, '/auth/passkeys/options', { method: 'POST' })).json()) as CreationOptions;
    expect((await jar.fetch(B, '/auth/passkeys', { method: 'POST', json: { response: device.create(creation) } })).status).toBe(201);
    const browser = new Jar();
    const request = (await (await browser.fetch(A, '/auth/login/passkey/options', { method: 'POST' })).json()) as RequestOptions;
    const response = device.get(request);
    const codes = await Promise.all(Array.from({ length: 10 }, (_, i) => browser.clone().fetch(on(i), '/auth/login/passkey', { method: 'POST', json: { response } }).then(codeOf)));
    expect(tally(codes)['200'], JSON.stringify(tally(codes))).toBe(1);
  });

  it('a passkey registration challenge works once: 10 parallel registrations of one set of options, one passkey', async () => {
    const user = await A.createUser();
    const jar = await signedIn(A, user);
    const creation = (await (await jar.fetch(A, '/auth/passkeys/options', { method: 'POST' })).json()) as CreationOptions;
    const codes = await Promise.all(Array.from({ length: 10 }, (_, i) => jar.clone().fetch(on(i), '/auth/passkeys', { method: 'POST', json: { response: new SoftAuthenticator(FRONTEND).create(creation) } }).then(codeOf)));
    expect(tally(codes)['201']).toBe(1);
    expect(((await (await jar.fetch(B, '/auth/passkeys')).json()) as { items: unknown[] }).items).toHaveLength(1);
  });

  it('a single-use asset token: 10 parallel downloads over both instances, one body', async () => {
    for (const app of [A, B]) app.instance.auth.registerAssetResolver('race:', async () => ({ body: 'the asset', contentType: 'text/plain' }));
    const user = await A.createUser();
    const jar = await signedIn(A, user);
    const { url } = (await (await jar.fetch(A, '/auth/asset-token', { method: 'POST', json: { assetId: 'race:1', mode: 'single' } })).json()) as { url: string };
    const path = new URL(url, 'http://x').pathname.replace(/^\/api/, '');
    const codes = await Promise.all(Array.from({ length: 10 }, (_, i) => on(i).fetch(path).then(codeOf)));
    expect(tally(codes)['200'], JSON.stringify(tally(codes))).toBe(1);
  });

  it('OAuth state works once: 10 parallel callbacks with one state, one session', async () => {
    idp.setUserInfo({ sub: uniq('state'), email: `${uniq('state')}@example.com`, email_verified: true });
    const browser = new Jar();
    const state = await oauthStart(browser, A);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => callback(browser.clone(), on(i), state)));
    const locations = results.map((r) => r.headers.get('location'));
    expect(locations.filter((l) => l === '/'), JSON.stringify(locations)).toHaveLength(1);
    expect(locations.filter((l) => l === '/?auth_error=invalid_state')).toHaveLength(9);
  });

  it('a pending link is settled once: 10 parallel confirmations over both instances, one link', async () => {
    const owner = await A.createUser();
    const login = uniq('link');
    idp.setUserInfo({ sub: login, email: owner.email, email_verified: false });
    const browser = new Jar();
    expect((await callback(browser, B, await oauthStart(browser, A))).headers.get('location')).toBe('/?auth_error=account_exists');
    expect((await browser.fetch(A, '/auth/login', { method: 'POST', json: { email: owner.email, password: owner.password } })).status).toBe(200);
    const codes = await Promise.all(Array.from({ length: 10 }, (_, i) => browser.clone().fetch(on(i), '/auth/link/confirm', { method: 'POST' }).then(codeOf)));
    expect(tally(codes)['200'], JSON.stringify(tally(codes))).toBe(1);
    const linked = (await (await browser.fetch(B, '/auth/account/providers')).json()) as { items: { providerAccountId: string }[] };
    expect(linked.items.map((i) => i.providerAccountId)).toEqual([login]);
  });

  it('the last way in: an identity and a passkey removed in parallel never both go (6 rounds)', async () => {
    for (let round = 0; round < 6; round++) {
      const user = await A.createUser();
      const jar = await signedIn(A, user);
      const device = new SoftAuthenticator(FRONTEND);
      const creation = (await (await jar.fetch(A, '/auth/passkeys/options', { method: 'POST' })).json()) as CreationOptions;
      const { id: passkeyId } = (await (await jar.fetch(B, '/auth/passkeys', { method: 'POST', json: { response: device.create(creation) } })).json()) as { id: string };
      await A.instance.auth.accounts.link(user.id, 'racy', `acct-${round}-${randomUUID()}`);
      const doc = (await A.instance.auth.users.findById(user.id))!;
      const { providerAccountId } = doc.oauthAccounts[0]!;
      await A.instance.auth.users.users.updateOne({ _id: user.id }, { $unset: { passwordHash: '' } });
      const [unlink, remove] = await Promise.all([
        jar.clone().fetch(A, `/auth/account/providers/racy/${providerAccountId}`, { method: 'DELETE' }),
        jar.clone().fetch(B, `/auth/passkeys/${passkeyId}`, { method: 'DELETE' }),
      ]);
      expect([unlink.status, remove.status].sort(), `round ${round}`).toEqual([204, 409]);
      const after = (await A.instance.auth.users.findById(user.id))!;
      expect(after.oauthAccounts.length + (await A.instance.auth.passkeys.count(user.id)), `round ${round}`).toBe(1);
    }
  });

  /**
   * Two loops of password logins of `user`, one on each instance; `act` runs once three logins
   * succeeded, and each loop goes on for three more attempts after it. Returns every session id handed out.
   */
  async function loginsAround(user: { email: string; password: string }, act: () => Promise<void>): Promise<string[]> {
    const ids: string[] = [];
    let acted = false;
    const loop = async (via: TestApp) => {
      for (let after = 0; after < 3; ) {
        const jar = new Jar();
        const res = await jar.fetch(via, '/auth/login', { method: 'POST', json: { email: user.email, password: user.password } });
        if (res.status === 200) ids.push(jar.cookies.get(COOKIE)!);
        if (acted) after++;
        if (res.status === 429) await sleep(5);
      }
    };
    const loops = [loop(A), loop(B)];
    while (ids.length < 3) await sleep(5);
    await act();
    acted = true;
    await Promise.all(loops);
    return ids;
  }
  const alive = async (ids: string[], path = '/auth/session') =>
    (await Promise.all(ids.map(async (id, i) => (await on(i).fetch(path, { headers: { cookie: `${COOKIE}=${id}` } })).status))).filter((s) => s === 200).length;

  it('deletion racing logins on both instances: no session of the deleted user survives (4 rounds)', async () => {
    for (let round = 0; round < 4; round++) {
      const user = await A.createUser();
      const ids = await loginsAround(user, () => A.instance.auth.deleteUser(user.id));
      expect(await alive(ids), `round ${round}`).toBe(0);
    }
  });

  it('an index prune on one instance between a login\'s index entry and its session write on the other never hides the session from logout-all', async () => {
    // The moment is held open on purpose (the session write on A waits until B pruned): by chance, a
    // reviewer saw it 3 times in 1,363 logins with 1 ms between the hosts, each time a session that
    // logout-all, password changes, demotions and deletion could no longer find.
    const store = A.instance.stores.forRole('sessions');
    const write = store.set.bind(store);
    const sessionKey = `${A.keyPrefix}session:`;
    const prunes: [string, (userId: string) => Promise<unknown>][] = [
      ['the cleanup', () => B.instance.auth.sessions.cleanup()],
      ['GET /auth/sessions', (userId) => B.instance.auth.sessions.list(userId)],
      ['an admin change', (userId) => B.instance.auth.refreshSessions(userId)],
    ];
    try {
      for (const [name, prune] of prunes) {
        const user = await A.createUser();
        const other = await signedIn(B, user); // B knows the user (its cleanup looks at the users it saw)
        let atWrite!: () => void;
        let release!: () => void;
        const reached = new Promise<void>((resolve) => (atWrite = resolve));
        const gate = new Promise<void>((resolve) => (release = resolve));
        store.set = async (key, value, opts) => {
          if (key.startsWith(sessionKey)) {
            atWrite();
            await gate;
          }
          return write(key, value, opts);
        };
        const login = signedIn(A, user);
        await reached; // A's index entry is written, its session not yet
        store.set = write;
        await prune(user.id);
        release();
        const jar = await login;
        expect((await jar.fetch(A, '/auth/session')).status, name).toBe(200);
        expect((await other.fetch(B, '/auth/logout-all', { method: 'POST' })).status).toBe(204);
        expect((await jar.fetch(B, '/auth/session')).status, `${name}: the racing session ends with logout-all`).toBe(401);
      }
    } finally {
      store.set = write;
    }
  });

  it('a password change racing logins on both instances: no session made with the old password survives', async () => {
    const user = await A.createUser();
    const ids = await loginsAround(user, async () => void (await B.instance.auth.updateUser(user.id, { password: 'a brand new password' })));
    expect(await alive(ids)).toBe(0);
  });

  // CONTRACT 10/11: the second step answers invalid_code or mfa_expired, a passkey login invalid_passkey.
  // A lifecycle event between the check and the session write refused them with the password login's
  // 401 invalid_credentials ("the email or the password is wrong") on a page that asked for neither.
  it('a second step or passkey login that a password change overtakes answers its own code, never invalid_credentials (4 rounds)', async () => {
    const user = await A.createUser();
    const jar = await signedIn(A, user);
    const device = new SoftAuthenticator(FRONTEND);
    const creation = (await (await jar.fetch(A, '/auth/passkeys/options', { method: 'POST' })).json()) as CreationOptions;
    expect((await jar.fetch(B, '/auth/passkeys', { method: 'POST', json: { response: device.create(creation) } })).status).toBe(201);
    const seen: Record<string, number>[] = [];
    for (let round = 0; round < 4; round++) {
      const browsers = Array.from({ length: 10 }, () => new Jar());
      const requests = await Promise.all(browsers.map(async (b, i) => (await (await b.fetch(on(i), '/auth/login/passkey/options', { method: 'POST' })).json()) as RequestOptions));
      const logins = browsers.map((b, i) => sleep(i * 4).then(() => b.fetch(on(i + 1), '/auth/login/passkey', { method: 'POST', json: { response: device.get(requests[i]!) } })).then(codeOf));
      await sleep(8);
      await B.instance.auth.updateUser(user.id, { password: `a brand new password ${round}` });
      seen.push(tally(await Promise.all(logins)));
    }
    const second = await A.createUser();
    const { recoveryCodes } = await withTotp(second);
    for (let round = 0; round < 4; round++) {
      const pending = await Promise.all(Array.from({ length: 2 }, (_, i) => pendingLogin({ ...second, password: round === 0 ? second.password : `a new password ${round - 1}` }, on(i))));
      const steps = pending.map((p, i) => sleep(i * 6).then(() => p.fetch(on(i + 1), '/auth/login/totp', { method: 'POST', json: { recoveryCode: recoveryCodes[round * 2 + i]! } })).then(codeOf));
      await sleep(4);
      await B.instance.auth.updateUser(second.id, { password: `a new password ${round}` });
      seen.push(tally(await Promise.all(steps)));
    }
    const codes = new Set(seen.flatMap((t) => Object.keys(t)));
    expect([...codes].filter((c) => !['200', 'invalid_passkey', 'mfa_expired'].includes(c)), JSON.stringify(seen)).toEqual([]);
  });

  // The same race made certain: the password changes right after the recovery code was taken. The login
  // is refused (mfa_expired), and the code, which gave no session, is the user's again.
  it('a recovery code a refused login took is given back: a password change between the code and the session', async () => {
    const user = await A.createUser();
    const { recoveryCodes } = await withTotp(user);
    const totp = A.instance.auth.totp;
    const use = totp.useRecoveryCode.bind(totp);
    totp.useRecoveryCode = async (...args) => {
      const spent = await use(...args);
      await B.instance.auth.updateUser(user.id, { password: 'a password changed meanwhile' });
      return spent;
    };
    const pending = await pendingLogin(user, B);
    try {
      expect(await codeOf(await pending.fetch(A, '/auth/login/totp', { method: 'POST', json: { recoveryCode: recoveryCodes[0] } }))).toBe('mfa_expired');
    } finally {
      totp.useRecoveryCode = use;
    }
    const again = await pendingLogin({ ...user, password: 'a password changed meanwhile' }, B);
    expect(await codeOf(await again.fetch(A, '/auth/login/totp', { method: 'POST', json: { recoveryCode: recoveryCodes[0] } }))).toBe('200');
  });

  it('a demotion racing logins on both instances: no racing session keeps admin rights', async () => {
    await A.createUser({ admin: true }); // another admin, so the demotion is allowed
    const user = await A.createUser({ admin: true });
    const ids = await loginsAround(user, async () => void (await B.instance.auth.updateUser(user.id, { isAdmin: false })));
    expect(await alive(ids, '/auth/users')).toBe(0);
  });

  // Each change rewrites every session from what it read: a TOTP confirm that read before a demotion
  // could write its sessions after it, admin rights and all.
  it('a demotion racing a TOTP confirm of the same user (10 rounds): no session keeps admin rights', async () => {
    await A.createUser({ admin: true }); // another admin, so the demotion is allowed
    for (let round = 0; round < 10; round++) {
      const user = await A.createUser({ admin: true });
      const jars = await Promise.all([signedIn(A, user), signedIn(B, user), signedIn(A, user)]);
      const { otpauthUri } = (await (await jars[0]!.fetch(A, '/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string };
      const totp = new TOTP({ secret: Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!) });
      const [confirmed] = await Promise.all([
        new Promise((r) => setTimeout(r, round % 3)).then(() => jars[0]!.fetch(A, '/auth/totp/confirm', { method: 'POST', json: { code: totp.generate() } })),
        new Promise((r) => setTimeout(r, (round + 1) % 3)).then(() => B.instance.auth.updateUser(user.id, { isAdmin: false })),
      ]);
      // A demotion moves the epoch: a confirm after it finds no pending enrolment (409 totp_not_enrolled).
      expect([200, 409], `round ${round}`).toContain(confirmed.status);
      for (const [i, jar] of jars.entries()) expect((await jar.fetch(on(i), '/auth/users')).status, `round ${round}, session ${i}`).toBe(403);
      // And the TOTP flag the sessions carry is the database's.
      expect(((await (await jars[1]!.fetch(B, '/auth/session')).json()) as { totp?: boolean }).totp, `round ${round}`).toBe(confirmed.status === 200);
    }
  });

  it('a claim racing logins on both instances: no session of the old ways in survives it', async () => {
    const user = await A.createUser();
    const ids = await loginsAround(user, async () => A.instance.auth.claim((await A.instance.auth.users.findById(user.id))!));
    expect(await alive(ids)).toBe(0);
    const after = (await B.instance.auth.users.findById(user.id))!;
    expect(after.passwordHash).toBeUndefined();
  });
});

// Issue 36: the single-use tokens of mailed links and the mail cap, on two instances with a real SMTP
// server (mails parsed from what it received, links taken from them).
describe.skipIf(!redisUrl)('mailed links and the mail cap on real Redis with two instances', () => {
  let A: TestApp;
  let B: TestApp;
  let smtp: TestSmtp;
  const on = (i: number) => (i % 2 === 0 ? A : B);

  beforeAll(async () => {
    smtp = await startSmtp();
    const dbUrl = mongoUrl ? mongoUrl.replace(/\/[^/?]*(\?|$)/, `/races_mail_${randomUUID().slice(0, 8)}$1`) : null;
    const shared = EmbeddedDatabase.inMemory();
    const db = async () => (dbUrl ? MongoDatabase.connect(dbUrl) : shared);
    const config = { auth: { store: { keyPrefix: `svctest:${randomUUID().slice(0, 8)}:auth:` }, magicLink: { enabled: true }, signup: { enabled: true } }, server: { trustProxy: 1 } };
    const env = { SVC_FRONTEND_URLS: FRONTEND, SVC_SMTP_URL: smtp.url };
    A = await createTestApp({ redisUrl, db: await db(), config, env });
    B = await createTestApp({ redisUrl, db: await db(), config, env });
  });
  afterAll(async () => {
    await A?.close();
    await B?.close();
    await smtp?.close();
  });

  // 12: below the 16 hashes the process lets wait (more would be 429 too_many_requests, which keeps the token).
  it('one reset token used 12 times in parallel over both instances: exactly one 204, the others invalid_token', async () => {
    const user = await A.createUser();
    await new Jar().fetch(A, '/auth/password/forgot', { method: 'POST', json: { email: user.email } });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
    const codes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => new Jar().fetch(on(i), '/auth/password/reset', { method: 'POST', json: { token, newPassword: `new password ${i}` } }).then(codeOf)),
    );
    expect(tally(codes)).toEqual({ '204': 1, invalid_token: 11 });
  });

  it('one magic link used 20 times in parallel from its browser over both instances: exactly one session', async () => {
    const user = await A.createUser();
    const browser = new Jar();
    await browser.fetch(B, '/auth/login/link', { method: 'POST', json: { email: user.email } });
    const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/login/link');
    const codes = await Promise.all(Array.from({ length: 20 }, (_, i) => browser.clone().fetch(on(i), '/auth/login/link/verify', { method: 'POST', json: { token } }).then(codeOf)));
    expect(tally(codes)).toEqual({ '200': 1, invalid_token: 19 });
    expect(await A.instance.auth.sessions.list(user.id)).toHaveLength(1);
  });

  const login = (via: TestApp, jar: Jar, email: string, password: string) => jar.fetch(via, '/auth/login', { method: 'POST', json: { email, password } });
  /** A little jitter, so each side of a race comes first in some rounds. */
  const after = <T>(ms: number, fn: () => Promise<T>) => new Promise<T>((resolve, reject) => setTimeout(() => fn().then(resolve, reject), ms));

  // A thief with the old password and a session changes it while the owner resets it: one of the two
  // wins whole. Both answering 204 left the thief's password in place after the owner's reset.
  it('a reset racing a password change made with the old password (8 rounds): never both; the winner\'s password is the one that works', async () => {
    for (let round = 0; round < 8; round++) {
      const user = await A.createUser();
      const thief = new Jar();
      expect((await login(B, thief, user.email, user.password)).status).toBe(200);
      await new Jar().fetch(A, '/auth/password/forgot', { method: 'POST', json: { email: user.email } });
      const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/reset-password');
      const [reset, change] = await Promise.all([
        after(round % 3, () => new Jar().fetch(A, '/auth/password/reset', { method: 'POST', json: { token, newPassword: 'the owner resets it' } })),
        after((round + 1) % 3, () => thief.fetch(B, '/auth/password', { method: 'POST', json: { currentPassword: user.password, newPassword: 'the thief keeps it' } })),
      ]);
      const statuses = [reset.status, change.status];
      expect(statuses, `round ${round}`).not.toEqual([204, 204]);
      const works = async (password: string) => (await login(on(round), new Jar(), user.email, password)).status === 200;
      expect(await works('the owner resets it'), `round ${round}: ${statuses}`).toBe(reset.status === 204);
      expect(await works('the thief keeps it'), `round ${round}: ${statuses}`).toBe(change.status === 204);
    }
  });

  // A magic-link login and a logout-all at once: either the link fails, or logout-all ends its session.
  // The epoch fix took the leak from 11 of 110 rounds to 1 of 48; the last one was the test server's:
  // mongo-java-server answered the link's conditional write (matched at the old epoch) with the epoch
  // logout-all had moved meanwhile, so the login checked against the new one (now one worker thread,
  // see MongoTestServer.java and the MongoDB contract suite).
  it('a magic link racing logout-all (8 rounds): no session of the user outlives both', async () => {
    for (let round = 0; round < 8; round++) {
      const user = await A.createUser();
      const other = new Jar();
      expect((await login(B, other, user.email, user.password)).status).toBe(200);
      const browser = new Jar();
      await browser.fetch(B, '/auth/login/link', { method: 'POST', json: { email: user.email } });
      const token = tokenFrom((await smtp.waitFor(user.email))[0]!, '/login/link');
      const [verify, out] = await Promise.all([
        after(round % 3, () => browser.fetch(A, '/auth/login/link/verify', { method: 'POST', json: { token } })),
        after((round + 1) % 3, () => other.fetch(B, '/auth/logout-all', { method: 'POST' })),
      ]);
      expect(out.status).toBe(204);
      expect([200, 400], `round ${round}`).toContain(verify.status);
      expect(await A.instance.auth.sessions.list(user.id), `round ${round}: verify ${verify.status}`).toEqual([]);
    }
  });

  /** A sign-up from `maker` (a browser), and the token of its verification mail. */
  async function signedUp(maker: Jar, password: string) {
    const email = `signup-${randomUUID().slice(0, 8)}@example.com`;
    expect((await maker.fetch(A, '/auth/signup', { method: 'POST', json: { email, password } })).status).toBe(202);
    return { email, token: tokenFrom((await smtp.waitFor(email))[0]!, '/verify-email') };
  }

  // CONTRACT 12: a wrong sign-up password at verification counts like a failed login (5 per email+IP).
  it('a verification with guessed sign-up passwords: 20 in parallel over both instances, at most 5 checked, the account unchanged', async () => {
    const { email, token } = await signedUp(new Jar(), 'the maker password');
    const ip = nextIp();
    const codes = tally(await Promise.all(Array.from({ length: 20 }, (_, i) => new Jar(ip).fetch(on(i), '/auth/email/verify', { method: 'POST', json: { token, password: `guess ${i}` } }).then(codeOf))));
    expect(codes.invalid_credentials ?? 0, JSON.stringify(codes)).toBeLessThanOrEqual(5);
    expect((codes.invalid_credentials ?? 0) + (codes.too_many_attempts ?? 0), JSON.stringify(codes)).toBe(20);
    const user = (await A.instance.auth.users.findByEmail(email))!;
    expect(user.email_verified).toBe(false);
    expect(user.passwordHash).toBeDefined();
  });

  // The maker's browser and the mailbox owner's use one verification link at once: one of them wins
  // whole (the password kept, or the claim with its reset token), never a mix.
  it('one verification link used by the maker\'s browser and by others in parallel (6 rounds): one 200, and its outcome holds', async () => {
    for (let round = 0; round < 6; round++) {
      const maker = new Jar();
      const { email, token } = await signedUp(maker, 'the maker password');
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 ? maker.clone() : new Jar()).fetch(on(i + round), '/auth/email/verify', { method: 'POST', json: { token } }).then(async (r) => ({ status: r.status, body: (await r.json()) as { passwordResetToken?: string } }))),
      );
      const won = answers.filter((a) => a.status === 200);
      expect(won, `round ${round}`).toHaveLength(1);
      const claimed = won[0]!.body.passwordResetToken !== undefined;
      const login = await new Jar().fetch(on(round), '/auth/login', { method: 'POST', json: { email, password: 'the maker password' } });
      expect(login.status, `round ${round}: claimed ${claimed}`).toBe(claimed ? 401 : 200);
    }
  });

  it('the mail cap under 20 parallel requests for one address over both instances: 20 times 202, 3 mails', async () => {
    const user = await A.createUser();
    const codes = await Promise.all(Array.from({ length: 20 }, (_, i) => new Jar().fetch(on(i), i % 2 ? '/auth/password/forgot' : '/auth/login/link', { method: 'POST', json: { email: user.email } }).then(codeOf)));
    expect(tally(codes)).toEqual({ '202': 20 });
    await Promise.all([A.instance.auth.mailer.idle(), B.instance.auth.mailer.idle()]);
    expect(smtp.to(user.email)).toHaveLength(3);
  });
});

// Two or three instances started at the same moment on an empty MongoDB, each told to make the same
// bootstrap admin: one creates it, the others go on (one of them used to exit "A user with this email
// already exists").
describe.skipIf(!mongoUrl)('the bootstrap admin, with instances started together on one empty MongoDB', () => {
  it('3 instances x 5 rounds: every start goes on, one admin exists, its password logs in', async () => {
    const env = { SVC_APP_PATH: '/tmp', SVC_ADMIN_EMAIL: 'boot@example.test', SVC_ADMIN_PASSWORD: 'bootstrap password' };
    const { config } = await loadConfig(env, { raw: {} });
    for (let round = 0; round < 5; round++) {
      const url = mongoUrl!.replace(/\/[^/?]*(\?|$)/, `/boot_${randomUUID().slice(0, 8)}$1`);
      const dbs = await Promise.all([0, 1, 2].map(() => MongoDatabase.connect(url)));
      try {
        const services = await Promise.all(dbs.map((db) => UserService.open(db)));
        const starts = await Promise.allSettled(services.map((users) => ensureAdmin(users, config, 'mongodb', createLogger('silent'))));
        expect(starts.filter((s) => s.status === 'rejected'), `round ${round}`).toEqual([]);
        expect(await services[0]!.countAdmins()).toBe(1);
        expect(await services[1]!.checkPassword('boot@example.test', 'bootstrap password')).not.toBeNull();
      } finally {
        await Promise.all(dbs.map((db) => db.close()));
      }
    }
  });
});

const uniq = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
