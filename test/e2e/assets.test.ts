// Asset download tokens (CONTRACT section 6, SPEC.md migration step 7): minting, single-use and
// session-bound downloads, the headers, parallel single-use downloads, expiry, what the store holds,
// and `instance.auth.registerAssetResolver` from an app plugin. Embedded store and Redis.
// The streaming/RSS proof against a real process is in assets-stream.test.ts.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { SESSION_TOKENS_PER_SESSION, SINGLE_USE_TOKENS_PER_SESSION } from '../../src/auth/assets.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { dumpStore, sha256hex } from '../support/auth.ts';

const redisUrl = inject('redisUrl');
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;

for (const [storeName, url] of [['embedded store', undefined], ['Redis', redisUrl || null]] as const) {
  describe.skipIf(url === null)(`asset tokens (${storeName})`, () => {
    let t: TestApp;
    let alice: TestClient;
    let bob: TestClient;
    let aliceId: string;
    let aliceEmail: string;
    const resolved: { assetId: string; userId: string }[] = [];

    beforeAll(async () => {
      t = await createTestApp({ redisUrl: url ?? undefined });
      // Alice's files: `files:<name>`, readable by alice only. `gone:` exists at minting, never after.
      let goneCalls = 0;
      t.instance.auth.registerAssetResolver('files:', async (assetId, { userId }) => {
        resolved.push({ assetId, userId });
        if (userId !== aliceId) return null;
        const name = assetId.slice('files:'.length);
        if (name === 'missing') return null;
        if (name === 'stream') return { body: Readable.from([Buffer.from('chunk 1, '), Buffer.from('chunk 2')]), contentType: 'text/plain; charset=utf-8' };
        if (name === 'web') return { body: new Blob(['web stream']).stream(), filename: 'web.txt' };
        return { body: new TextEncoder().encode(`contents of ${name}`), contentType: 'application/pdf', filename: name };
      });
      t.instance.auth.registerAssetResolver('gone:', async () => (goneCalls++ === 0 ? { body: 'x' } : null));
      t.instance.auth.registerAssetResolver('files:weird:', async (assetId) => ({ body: 'w', filename: assetId.slice('files:weird:'.length), contentType: 'text/html\r\nX-Evil: 1' }));
      const [a, b] = await Promise.all([t.createUser(), t.createUser()]);
      aliceId = a.id;
      aliceEmail = a.email;
      alice = t.client();
      bob = t.client();
      await alice.login(a.email, a.password);
      await bob.login(b.email, b.password);
    });
    afterAll(() => t?.close());
    afterEach(() => {
      vi.useRealTimers();
    });

    const mint = (c: TestClient, assetId: string, mode: 'single' | 'session' = 'single') => c.fetch('/auth/asset-token', { method: 'POST', json: { assetId, mode } });
    async function minted(c: TestClient, assetId: string, mode: 'single' | 'session' = 'single') {
      const res = await mint(c, assetId, mode);
      expect(res.status, await res.clone().text()).toBe(201);
      return (await res.json()) as { token: string; url: string };
    }
    const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

    it('POST /auth/asset-token -> 201 {token, url}; the single-use download streams the asset with no-store and Content-Disposition', async () => {
      const { token, url } = await minted(alice, 'files:report.pdf');
      expect(token).toMatch(TOKEN_RE);
      expect(url).toBe(`/api/auth/asset/${token}`);
      const res = await t.fetch(url); // no cookie: the token is the credential
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('contents of report.pdf');
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('content-type')).toBe('application/pdf');
      expect(res.headers.get('content-disposition')).toBe('attachment; filename="report.pdf"');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.getSetCookie()).toEqual([]);
      expect(resolved.at(-1)).toEqual({ assetId: 'files:report.pdf', userId: aliceId }); // asked again at download
    });

    it('a single-use token works once: reuse is 404 asset_token_invalid', async () => {
      const { token } = await minted(alice, 'files:once.pdf');
      expect((await t.fetch(`/auth/asset/${token}`)).status).toBe(200);
      const again = await t.fetch(`/auth/asset/${token}`);
      expect(again.status).toBe(404);
      expect(await errorCode(again)).toBe('asset_token_invalid');
      expect(again.headers.get('content-type')).toMatch(/application\/json/);
    });

    it('two parallel single-use downloads: exactly one 200', async () => {
      for (let round = 0; round < 5; round++) {
        const { token } = await minted(alice, 'files:race.pdf');
        const results = await Promise.all([t.fetch(`/auth/asset/${token}`), t.fetch(`/api/auth/asset/${token}`)]);
        expect(results.map((r) => r.status).sort()).toEqual([200, 404]);
      }
    });

    it('HEAD tells whether a single-use link works without using it up', async () => {
      const { token } = await minted(alice, 'files:head.pdf');
      const head = await t.fetch(`/auth/asset/${token}`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('cache-control')).toBe('no-store');
      // What a download manager shows before it downloads: the type and the file name.
      expect(head.headers.get('content-type')).toBe('application/pdf');
      expect(head.headers.get('content-disposition')).toBe('attachment; filename="head.pdf"');
      expect((await t.fetch(`/auth/asset/${token}`)).status).toBe(200);
      expect((await t.fetch(`/auth/asset/${token}`, { method: 'HEAD' })).status).toBe(404);
    });

    it('a single-use token expires after 60 s', async () => {
      const { token } = await minted(alice, 'files:late.pdf');
      const key = `${t.keyPrefix}asset:single:${sha256hex(token)}`;
      const store = t.instance.stores.forRole('sessions');
      const ttl = await store.ttl(key);
      expect(ttl).toBeGreaterThan(55);
      expect(ttl).toBeLessThanOrEqual(60);
      if (url) {
        // Redis keeps its own clock: shorten the key's life instead of moving time.
        await store.expire(key, 1);
        await new Promise((r) => setTimeout(r, 1300));
      } else {
        vi.useFakeTimers({ toFake: ['Date'] });
        vi.setSystemTime(Date.now() + 61_000);
      }
      const res = await t.fetch(`/auth/asset/${token}`);
      expect(res.status).toBe(404);
      expect(await errorCode(res)).toBe('asset_token_invalid');
    });

    it('session tokens: many downloads while the session lives, 404 after its logout; another session is unaffected', async () => {
      const second = t.client();
      await second.login(aliceEmail, 'correct horse battery');
      const first = await minted(alice, 'files:deck.pdf', 'session');
      const other = await minted(second, 'files:deck.pdf', 'session');
      expect(first.url).toBe(`/api/auth/session-asset/${first.token}`);
      for (let i = 0; i < 3; i++) {
        const res = await t.fetch(first.url);
        expect(res.status).toBe(200);
        expect(res.headers.get('cache-control')).toBe('no-store');
        expect(await res.text()).toBe('contents of deck.pdf');
      }
      // The modes do not mix: each token works only at its own path.
      expect(await errorCode(await t.fetch(`/auth/asset/${first.token}`))).toBe('asset_token_invalid');
      const single = await minted(alice, 'files:deck.pdf');
      expect(await errorCode(await t.fetch(`/auth/session-asset/${single.token}`))).toBe('asset_token_invalid');
      expect((await t.fetch(single.url)).status).toBe(200);

      expect((await second.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
      const dead = await t.fetch(other.url);
      expect(dead.status).toBe(404);
      expect(await errorCode(dead)).toBe('asset_token_invalid');
      expect((await t.fetch(first.url)).status).toBe(200); // alice's first session still lives
      const dump = await dumpStore(t, url ?? undefined);
      expect([...dump.keys()].some((k) => k.includes(sha256hex(other.token)))).toBe(false); // cleaned up at logout
    });

    it(`a session mints at most ${SESSION_TOKENS_PER_SESSION} session tokens (each lives as long as it does): one more is 429 too_many_requests`, async () => {
      const c = t.client();
      await c.login(aliceEmail, 'correct horse battery');
      for (let i = 0; i < SESSION_TOKENS_PER_SESSION; i++) expect((await mint(c, 'files:a.pdf', 'session')).status).toBe(201);
      const over = await mint(c, 'files:a.pdf', 'session');
      expect(over.status).toBe(429);
      expect(await errorCode(over)).toBe('too_many_requests');
      // Single-use tokens (60 s each) and other sessions are not counted.
      expect((await mint(c, 'files:a.pdf')).status).toBe(201);
      expect((await mint(alice, 'files:a.pdf', 'session')).status).toBe(201);
      expect((await c.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
    });

    it('a session token dies with a session that ends without a logout (expired, or ended elsewhere)', async () => {
      const c = t.client();
      await c.login(aliceEmail, 'correct horse battery');
      const { url: link } = await minted(c, 'files:x.pdf', 'session');
      expect((await t.fetch(link)).status).toBe(200);
      // Remove the session record behind the store's back, as an expiry would.
      const sid = sha256hex(decodeURIComponent(c.cookies.get(t.instance.auth.cookieName)!));
      await t.instance.stores.forRole('sessions').del(`${t.keyPrefix}session:${sid}`);
      expect(await errorCode(await t.fetch(link))).toBe('asset_token_invalid');
    });

    // Issue 52 item 12: a single-use token outlived its session by up to 60 s.
    it('a single-use token dies with the session that minted it: logout, logout-all, expiry', async () => {
      const ends: [string, (c: TestClient) => Promise<unknown>][] = [
        ['logout', (c) => c.fetch('/auth/logout', { method: 'POST' })],
        ['logout-all', (c) => c.fetch('/auth/logout-all', { method: 'POST' })],
        ['expiry', (c) => t.instance.stores.forRole('sessions').del(`${t.keyPrefix}session:${sha256hex(decodeURIComponent(c.cookies.get(t.instance.auth.cookieName)!))}`)],
      ];
      for (const [how, end] of ends) {
        const c = t.client();
        await c.login(aliceEmail, 'correct horse battery');
        const { token } = await minted(c, 'files:x.pdf');
        const spare = await minted(c, 'files:x.pdf');
        expect((await t.fetch(`/auth/asset/${spare.token}`, { method: 'HEAD' })).status, how).toBe(200); // alive before
        await end(c);
        const head = await t.fetch(`/auth/asset/${spare.token}`, { method: 'HEAD' });
        expect(head.status, how).toBe(404);
        for (const path of [`/auth/asset/${token}`, `/api/auth/asset/${spare.token}`]) {
          const res = await t.fetch(path);
          expect(res.status, how).toBe(404);
          expect(await errorCode(res), how).toBe('asset_token_invalid');
        }
      }
      // logout-all ended alice's main session too: sign her in again for the tests after this one.
      await alice.login(aliceEmail, 'correct horse battery');
    });

    it(`a session holds at most ${SINGLE_USE_TOKENS_PER_SESSION} unused single-use tokens: one more is 429 too_many_requests; a used one frees its place`, async () => {
      const c = t.client();
      await c.login(aliceEmail, 'correct horse battery');
      const tokens: string[] = [];
      for (let i = 0; i < SINGLE_USE_TOKENS_PER_SESSION; i++) tokens.push((await minted(c, 'files:a.pdf')).token);
      const over = await mint(c, 'files:a.pdf');
      expect(over.status).toBe(429);
      expect(await errorCode(over)).toBe('too_many_requests');
      expect(over.headers.get('retry-after')).toBe('60');
      expect((await mint(c, 'files:a.pdf')).status, 'a refused mint does not count').toBe(429);
      // A HEAD does not use a token up; a download does, and frees its place.
      expect((await t.fetch(`/auth/asset/${tokens[0]}`, { method: 'HEAD' })).status).toBe(200);
      expect((await mint(c, 'files:a.pdf')).status).toBe(429);
      expect((await t.fetch(`/auth/asset/${tokens[0]}`)).status).toBe(200);
      expect((await mint(c, 'files:a.pdf')).status).toBe(201);
      expect((await mint(c, 'files:a.pdf')).status).toBe(429);
      // Another session of the same user, and session tokens, are counted apart.
      expect((await mint(alice, 'files:a.pdf')).status).toBe(201);
      expect((await mint(c, 'files:a.pdf', 'session')).status).toBe(201);
      // The tokens minted within the limit still work.
      expect((await t.fetch(`/auth/asset/${tokens[1]}`)).status).toBe(200);
      expect((await c.fetch('/auth/logout', { method: 'POST' })).status).toBe(204);
    });

    it('another user cannot mint for alice\'s asset; no resolver or a null answer is 404 at minting', async () => {
      const res = await mint(bob, 'files:report.pdf');
      expect(res.status).toBe(404);
      expect(await errorCode(res)).toBe('not_found');
      expect(resolved.at(-1)).toEqual({ assetId: 'files:report.pdf', userId: expect.not.stringMatching(aliceId) });
      for (const assetId of ['unclaimed:thing', 'files:missing', 'FILES:report.pdf']) {
        const r = await mint(alice, assetId);
        expect(r.status, assetId).toBe(404);
        expect(await errorCode(r)).toBe('not_found');
      }
      // The asset vanished between minting and downloading: the token is spent, the answer 404 not_found.
      const { token } = await minted(alice, 'gone:soon');
      const gone = await t.fetch(`/auth/asset/${token}`);
      expect(gone.status).toBe(404);
      expect(await errorCode(gone)).toBe('not_found');
    });

    it('bodies: Node Readable and web ReadableStream stream through; bad content types and filenames are made safe', async () => {
      const stream = await t.fetch((await minted(alice, 'files:stream')).url);
      expect(await stream.text()).toBe('chunk 1, chunk 2');
      expect(stream.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(stream.headers.get('content-disposition')).toBeNull(); // no filename: no header
      const web = await t.fetch((await minted(alice, 'files:web')).url);
      expect(await web.text()).toBe('web stream');
      expect(web.headers.get('content-disposition')).toBe('attachment; filename="web.txt"');

      const cases: [string, string][] = [
        ['Bericht über "Q3".pdf', `attachment; filename="Bericht uber _Q3_.pdf"; filename*=UTF-8''Bericht%20%C3%BCber%20%22Q3%22.pdf`],
        ['../../etc/passwd', 'attachment; filename="passwd"'],
        ['a\\b\\evil.exe', 'attachment; filename="evil.exe"'],
        ['x\r\nSet-Cookie: a=b.txt', 'attachment; filename="xSet-Cookie: a=b.txt"'],
        ['日本語.txt', `attachment; filename="txt"; filename*=UTF-8''%E6%97%A5%E6%9C%AC%E8%AA%9E.txt`],
      ];
      for (const [name, header] of cases) {
        const res = await t.fetch((await minted(alice, `files:weird:${name}`)).url);
        expect(res.status, name).toBe(200);
        expect(res.headers.get('content-disposition'), name).toBe(header);
        expect(res.headers.get('content-type')).toBe('application/octet-stream'); // the resolver's had a CRLF
        expect(res.headers.get('x-evil')).toBeNull();
        expect(res.headers.get('set-cookie')).toBeNull();
      }
    });

    it('the store holds only hashes of tokens, never a token', async () => {
      const tokens = [(await minted(alice, 'files:a.pdf')).token, (await minted(alice, 'files:b.pdf', 'session')).token];
      const dump = await dumpStore(t, url ?? undefined);
      const keys = [...dump.keys()];
      for (const token of tokens) {
        expect(keys.some((k) => k.includes(token))).toBe(false);
        expect([...dump.values()].some((v) => v.includes(token))).toBe(false);
        expect(keys.some((k) => k.endsWith(sha256hex(token)))).toBe(true);
      }
    });

    it('minting: 401 without a session (guests too), 400 validation_failed naming the field, 415 for non-JSON, 403 csrf_failed from a foreign page', async () => {
      const anon = await t.fetch('/auth/asset-token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"assetId":"files:a","mode":"single"}' });
      expect(anon.status).toBe(401);
      expect(await errorCode(anon)).toBe('unauthenticated');
      const ws = await t.instance.auth.workSessions.create({ pluginData: { svc__todo: {} } });
      const guest = await t.fetch('/auth/asset-token', { method: 'POST', headers: { 'content-type': 'application/json', 'x-work-session-id': ws._id }, body: '{"assetId":"files:a","mode":"single"}' });
      expect(guest.status).toBe(401);
      const cases: [unknown, string][] = [
        [{ mode: 'single' }, 'assetId'],
        [{ assetId: '', mode: 'single' }, 'assetId'],
        [{ assetId: 'x'.repeat(1025), mode: 'single' }, 'assetId'],
        [{ assetId: 7, mode: 'single' }, 'assetId'],
        [{ assetId: 'files:a' }, 'mode'],
        [{ assetId: 'files:a', mode: 'forever' }, 'mode'],
        [{ assetId: 'files:a', mode: 'single', ttl: 600 }, 'ttl'],
      ];
      for (const [json, field] of cases) {
        const res = await alice.fetch('/auth/asset-token', { method: 'POST', json });
        expect(res.status, JSON.stringify(json)).toBe(400);
        const body = await res.json();
        expect(body.error.code).toBe('validation_failed');
        expect(body.error.details.map((d: { path: string }) => d.path)).toContain(field);
      }
      expect((await alice.fetch('/auth/asset-token', { method: 'POST', body: 'assetId=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status).toBe(415);
      const foreign = await alice.fetch('/auth/asset-token', { method: 'POST', json: { assetId: 'files:a.pdf', mode: 'single' }, headers: { origin: 'https://evil.example' } });
      expect(foreign.status).toBe(403);
      expect(await errorCode(foreign)).toBe('csrf_failed');
    });

    it('downloads: unknown, forged or malformed tokens are 404 asset_token_invalid, at both paths, with or without /api', async () => {
      for (const token of ['A'.repeat(43), 'short', 'x'.repeat(500), '%00', 'a.b']) {
        for (const p of ['/auth/asset/', '/api/auth/asset/', '/auth/session-asset/', '/api/auth/session-asset/']) {
          const res = await t.fetch(`${p}${token}`);
          expect(res.status, `${p}${token}`).toBe(404);
          expect(await errorCode(res)).toBe('asset_token_invalid');
        }
      }
    });

    it('the routes are in the OpenAPI document', async () => {
      const doc = await (await t.fetch('/openapi.json')).json();
      expect(doc.paths['/auth/asset-token'].post.requestBody.content['application/json'].schema.required.sort()).toEqual(['assetId', 'mode']);
      expect(doc.paths['/auth/asset/{token}'].get).toBeDefined();
      expect(doc.paths['/auth/session-asset/{token}'].get).toBeDefined();
    });
  });
}

describe('registerAssetResolver from an app plugin', () => {
  mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
  const root = mkdtempSync(path.join(ROOT, 'test/.tmp/assets-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  function plugin(key: string, body: string) {
    mkdirSync(path.join(root, key, 'plugins', key), { recursive: true });
    writeFileSync(path.join(root, key, 'plugins', key, 'index.js'), `import { Hono } from 'hono';\nexport default (instance) => {\n${body}\n  return new Hono();\n};\n`);
    return path.join(root, key);
  }

  it('works at start-up (it used to stop svc: "registerAssetResolver is not a function")', async () => {
    const appRoot = plugin('acme__files', `  instance.auth.registerAssetResolver('acme:', async (id, { userId }) => ({ body: id + ' for ' + userId, filename: 'a.txt' }));`);
    const t = await createTestApp({ env: { SVC_APP_PATH: appRoot } });
    const u = await t.createUser();
    const c = t.client();
    await c.login(u.email, u.password);
    const { url } = await (await c.fetch('/auth/asset-token', { method: 'POST', json: { assetId: 'acme:1', mode: 'single' } })).json();
    expect(await (await t.fetch(url)).text()).toBe(`acme:1 for ${u.id}`);
    await t.close();
  });

  it('a prefix registered twice, or an empty one, stops start-up naming the plugin and the prefix', async () => {
    const twice = plugin('acme__twice', `  const r = async () => null;\n  instance.auth.registerAssetResolver('x:', r);\n  instance.auth.registerAssetResolver('x:', r);`);
    await expect(createTestApp({ env: { SVC_APP_PATH: twice } })).rejects.toThrow(/acme__twice.*prefix "x:" is registered twice/);
    const empty = plugin('acme__empty', `  instance.auth.registerAssetResolver('', async () => null);`);
    await expect(createTestApp({ env: { SVC_APP_PATH: empty } })).rejects.toThrow(/acme__empty.*non-empty/);
  });
});
