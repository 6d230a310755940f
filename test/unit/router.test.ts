import { TrieRouter } from 'hono/router/trie-router';
import { describe, expect, it } from 'vitest';
import { MemoTrieRouter } from '../../src/http/router.ts';

// A route table shaped like svc's: app-wide hooks on every path, static and parameter routes side by
// side (the pair that makes Hono's RegExpRouter give up), 405 fallbacks on ALL.
const ROUTES: [string, string][] = [
  ['ALL', '*'],
  ['GET', '/auth/session'],
  ['ALL', '/auth/session'],
  ['POST', '/auth/oauth/return-to'],
  ['POST', '/auth/oauth/:provider/link'],
  ['GET', '/auth/oauth/:provider'],
  ['GET', '/auth/users/:id'],
  ['DELETE', '/auth/users/:id'],
  ['GET', '/plugin/svc__todo/todo'],
  ['GET', '/plugin/svc__todo/todo/:id'],
  ['GET', '/docs/*'],
];

function both() {
  const memo = new MemoTrieRouter<string>();
  const trie = new TrieRouter<string>();
  for (const [method, path] of ROUTES) {
    memo.add(method, path, `${method} ${path}`);
    trie.add(method, path, `${method} ${path}`);
  }
  return { memo, trie };
}

const plain = (result: unknown) => JSON.parse(JSON.stringify(result));

describe('MemoTrieRouter', () => {
  it('matches exactly as TrieRouter, first time and remembered, with and without path parameters', () => {
    const { memo, trie } = both();
    const requests: [string, string][] = [
      ['GET', '/auth/session'],
      ['POST', '/auth/session'],
      ['POST', '/auth/oauth/return-to'],
      ['POST', '/auth/oauth/github/link'],
      ['POST', '/auth/oauth/gitlab/link'],
      ['GET', '/auth/oauth/github'],
      ['GET', '/auth/users/1'],
      ['GET', '/auth/users/2'],
      ['DELETE', '/auth/users/2'],
      ['GET', '/plugin/svc__todo/todo'],
      ['GET', '/plugin/svc__todo/todo/7'],
      ['GET', '/docs/scalar.js'],
      ['GET', '/no/such/path'],
    ];
    for (let round = 0; round < 3; round++) {
      for (const [method, path] of requests) expect(plain(memo.match(method, path)), `${method} ${path}`).toEqual(plain(trie.match(method, path)));
    }
  });

  it('answers a parameterless path from memory, never one with parameters', () => {
    const { memo } = both();
    expect(memo.match('GET', '/auth/session')).toBe(memo.match('GET', '/auth/session'));
    expect(memo.match('GET', '/auth/users/1')).not.toBe(memo.match('GET', '/auth/users/1'));
    expect(plain(memo.match('GET', '/auth/users/2'))[0].find(([h]: [string]) => h === 'GET /auth/users/:id')[1]).toEqual({ id: '2' });
  });

  it('a route added later is seen by paths matched before', () => {
    const { memo } = both();
    const before = plain(memo.match('GET', '/health'))[0].length;
    memo.add('GET', '/health', 'GET /health');
    expect(plain(memo.match('GET', '/health'))[0].length).toBe(before + 1);
  });

  it('made-up paths do not grow its memory past 1,000 paths', () => {
    const { memo } = both();
    for (let i = 0; i < 5000; i++) memo.match('GET', `/made-up-${i}`);
    expect((memo as unknown as { memo: Map<string, unknown> }).memo.size).toBeLessThanOrEqual(1000);
    expect(plain(memo.match('GET', '/auth/session'))).toEqual(plain(both().trie.match('GET', '/auth/session')));
  });
});
