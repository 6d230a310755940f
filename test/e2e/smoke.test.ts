import { afterAll, describe, expect, inject, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';

const redisUrl = inject('redisUrl');

for (const [name, url] of [['embedded store', undefined], ['Redis', redisUrl || null]] as const) {
  describe.skipIf(url === null)(`login smoke (${name})`, () => {
    let t: TestApp;
    afterAll(() => t?.close());
    it('logs in and reads the session', async () => {
      t = await createTestApp({ redisUrl: url ?? undefined });
      const u = await t.createUser();
      const c = t.client();
      expect((await c.login(u.email, u.password)).status).toBe(200);
      const res = await c.fetch('/auth/session');
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ userId: u.id, isAdmin: false, provider: 'password' });
    });
  });
}
