import { Hono } from 'hono';
import { getCookie } from 'hono/cookie';
import { describe, expect, it } from 'vitest';
import { readCookie } from '../../src/http/cookie.ts';

/** What `readCookie` and Hono's `getCookie` read for `name` from one Cookie header, through a real Hono request. */
async function both(header: string | undefined, name: string): Promise<[string | undefined, string | undefined]> {
  const app = new Hono();
  let read: [string | undefined, string | undefined] = [undefined, undefined];
  app.get('/', (c) => {
    read = [readCookie(c, name), getCookie(c, name)];
    return c.body(null, 204);
  });
  await app.request('/', { headers: header === undefined ? {} : { cookie: header } });
  return read;
}

const ID = 'QMM9nsOAEj0BSnS-vH1nq0rZO9bee38IqqoJ1jCjGQY';

describe("readCookie: the same answer as Hono's getCookie", () => {
  it.each([
    [undefined],
    [''],
    [`sid_app=${ID}`],
    [`a=1; sid_app=${ID}`],
    [`a=1;sid_app=${ID};b=2`],
    [`a=1;\t sid_app=${ID}`],
    [`sid_app=${ID}; sid_app=other`],
    [`sid_app= ${ID} `],
    [`sid_app="${ID}"`],
    [`sid_app=a%20b`],
    [`sid_app=`],
    [`sid_app=; sid_app=${ID}`],
    [`sid_app =evil; sid_app=${ID}`],
    [`xsid_app=evil; sid_app=${ID}`],
    [`sid_app_x=evil; sid_app=${ID}`],
    [`a=sid_app=evil; sid_app=${ID}`],
    [`sid_app=ab,c; sid_app=${ID}`],
    [`sid_app=a\u00e9b`],
    [`sid`],
    [`other=1`],
  ])('Cookie: %j', async (header) => {
    const [ours, hono] = await both(header, 'sid_app');
    expect(ours).toBe(hono);
  });

  it('on random headers built from the characters that matter', async () => {
    const parts = ['sid_app', 'sid', '=', ';', ' ', '\t', '"', '%41', '%', 'a', 'Z', '9', '-', '_', ',', ID];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % parts.length;
    for (let i = 0; i < 2000; i++) {
      const header = Array.from({ length: 1 + (i % 12) }, () => parts[next()]).join('');
      const [ours, hono] = await both(header, 'sid_app');
      expect(ours, header).toBe(hono);
    }
  });
});
