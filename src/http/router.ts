import type { Result, Router } from 'hono/router';
import { TrieRouter } from 'hono/router/trie-router';

/** Parameterless paths whose match is remembered; past it the memory starts over. */
const MEMO_SIZE = 1000;

/**
 * Hono's TrieRouter, remembering the match of each path without parameters. svc's routes rule out
 * Hono's faster RegExpRouter (it refuses a static `POST /auth/oauth/return-to` beside
 * `POST /auth/oauth/:provider/link`), so Hono's default falls back to the trie, which split and walked
 * the path of `GET /auth/session` on every request: about 4% of its CPU in a profile. Matches with
 * path parameters are never kept (their values differ per request), and at most MEMO_SIZE paths are:
 * paths that anyone can make up (each unknown path matches the app-wide hooks) cannot grow it. Hono
 * only reads a match, so one answer serves every request for its method and path.
 */
export class MemoTrieRouter<T> implements Router<T> {
  readonly name = 'MemoTrieRouter';
  private readonly trie = new TrieRouter<T>();
  private readonly memo = new Map<string, Result<T>>();

  add(method: string, path: string, handler: T): void {
    this.memo.clear();
    this.trie.add(method, path, handler);
  }

  match(method: string, path: string): Result<T> {
    const key = `${method} ${path}`;
    const known = this.memo.get(key);
    if (known) return known;
    const result = this.trie.match(method, path);
    if (!hasParams(result)) {
      if (this.memo.size >= MEMO_SIZE) this.memo.clear();
      this.memo.set(key, result);
    }
    return result;
  }
}

function hasParams<T>(result: Result<T>): boolean {
  for (const [, params] of result[0]) for (const _ in params as object) return true;
  return false;
}
