// wrangler-free.md's proof: `createApp(instance)` is a Web-standard fetch handler. Served here the way
// another runtime serves it instead of @hono/node-server: the module-worker shape
// (`{ fetch(request, env, ctx) }`) that Cloudflare Workers, Deno and Bun call, with no Node request
// object in `env`. Real Request objects in, real Responses out: a password login, the cookie, the session.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
let user: { email: string; password: string };
beforeAll(async () => {
  t = await createTestApp();
  user = await t.createUser();
});
afterAll(() => t?.close());

const ORIGIN = 'https://svc.example';

async function loginThenSession(fetchHandler: (req: Request) => Response | Promise<Response>) {
  const login = await fetchHandler(
    new Request(`${ORIGIN}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: user.email, password: user.password }) }),
  );
  expect(login.status).toBe(200);
  const cookie = login.headers.getSetCookie().find((c) => c.startsWith('sid_app='))!.split(';')[0]!;
  const session = await fetchHandler(new Request(`${ORIGIN}/api/auth/session`, { headers: { cookie } }));
  expect(session.status).toBe(200);
  expect(((await session.json()) as { provider: string }).provider).toBe('password');
  const anonymous = await fetchHandler(new Request(`${ORIGIN}/api/auth/session`));
  expect(anonymous.status).toBe(401);
}

describe('createApp is a Web-standard fetch handler', () => {
  it('as a module worker ({ fetch(request, env, ctx) }, what Workers, Deno and Bun call)', async () => {
    const worker = { fetch: (request: Request, env: unknown, ctx: unknown) => t.app.fetch(request, { env, ctx }) };
    await loginThenSession((req) => worker.fetch(req, {}, { waitUntil: () => undefined }));
  });
});
