// Secrets at rest when SVC_SECRET_ENCRYPTION_KEY is set on a deployment that already has data
// (issue 39, finding 9): a client secret or TOTP secret saved in plaintext before the key was set, or
// sealed before values were bound to their record, is sealed again (bound) at start-up, and keeps
// working: never used silently as plaintext, never lost.

import { randomUUID } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { afterAll, expect, it } from 'vitest';
import { PROVIDER_COLLECTION } from '../../src/auth/oauth/providers.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { sealedTheOldWay } from '../support/secrets.ts';

const KEY = `at-rest-key-${randomUUID()}`;
const apps: TestApp[] = [];
afterAll(async () => {
  for (const a of apps.reverse()) await a.close();
});

const ENDPOINTS = { authorizationEndpoint: 'https://idp.example.com/authorize', tokenEndpoint: 'https://idp.example.com/token', userInfoEndpoint: 'https://idp.example.com/userinfo' };

it('a key set on existing data: plaintext and unbound secrets are sealed again at start-up and still work (client secrets, TOTP)', async () => {
  const db = EmbeddedDatabase.inMemory();
  // Before: no key. An admin saves a provider, a user turns TOTP on.
  const before = await createTestApp({ db });
  apps.push(before);
  const admin = before.client();
  const root = await before.createUser({ admin: true });
  expect((await admin.login(root.email, root.password)).status).toBe(200);
  const created = await admin.fetch('/auth/providers', { method: 'POST', json: { providerId: 'acme', type: 'custom', clientId: 'c', clientSecret: 'plain-secret-1', config: ENDPOINTS } });
  expect(created.status).toBe(201);
  const user = await before.createUser();
  const c = before.client();
  expect((await c.login(user.email, user.password)).status).toBe(200);
  const { otpauthUri } = (await (await c.fetch('/auth/totp/enroll', { method: 'POST' })).json()) as { otpauthUri: string };
  const totp = new TOTP({ secret: Secret.fromBase32(new URL(otpauthUri).searchParams.get('secret')!), digits: 6, period: 30, algorithm: 'SHA1' });
  expect((await c.fetch('/auth/totp/confirm', { method: 'POST', json: { code: totp.generate() } })).status).toBe(200);
  // And a provider whose secret was sealed under this key before values were bound to their record.
  const docs = await db.collection<{ _id: string; providerId: string; clientSecret?: string }>(PROVIDER_COLLECTION);
  expect((await admin.fetch('/auth/providers', { method: 'POST', json: { providerId: 'beta', type: 'custom', clientId: 'c', config: ENDPOINTS } })).status).toBe(201);
  await docs.updateOne({ providerId: 'beta' }, { $set: { clientSecret: sealedTheOldWay(KEY, 'old-secret-2') } });
  expect((await docs.findOne({ providerId: 'acme' }))!.clientSecret).toBe('plain-secret-1');

  // After: the same database, now with the key.
  const after = await createTestApp({ db, env: { SVC_SECRET_ENCRYPTION_KEY: KEY } });
  apps.push(after);
  const providers = after.instance.auth.providers;
  for (const [providerId, secret] of [['acme', 'plain-secret-1'], ['beta', 'old-secret-2']] as const) {
    const stored = (await docs.findOne({ providerId }))!.clientSecret!;
    expect(stored, providerId).toMatch(/^enc:v1:r\./);
    expect(stored).not.toContain(secret);
    expect(providers.clientSecret((await providers.find(providerId))!), providerId).toBe(secret);
  }
  const userDoc = await after.instance.auth.users.users.findOne({ _id: user.id });
  expect(userDoc!.totp!.secret).toMatch(/^enc:v1:r\./);
  expect(JSON.stringify(userDoc)).not.toContain(totp.secret.base32);

  // The user still logs in with her authenticator (the next step's code: the confirmed one is used).
  const b = after.client();
  const first = await b.login(user.email, user.password);
  expect(await first.json()).toEqual({ mfaRequired: true });
  const code = totp.generate({ timestamp: Date.now() + 30_000 });
  const second = await b.fetch('/auth/login/totp', { method: 'POST', json: { code } });
  expect(second.status).toBe(200);
});
