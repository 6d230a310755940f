import type { MemoryStore } from '../../src/store/memory.ts';
import type { CacheReader, PageQuery } from './reader.ts';

/** Redis glob (`*`, `?`, `[abc]`, `[^a-z]`, `\x`) as an anchored RegExp, for the embedded store. */
export function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === '*') re += '.*';
    else if (ch === '?') re += '.';
    else if (ch === '\\' && i + 1 < glob.length) re += escape(glob[++i]!);
    else if (ch === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end < 0) {
        re += '\\[';
        continue;
      }
      let body = glob.slice(i + 1, end);
      const negate = body.startsWith('^');
      if (negate) body = body.slice(1);
      re += `[${negate ? '^' : ''}${classBody(body)}]`;
      i = end;
    } else re += escape(ch);
  }
  return new RegExp(`^${re}$`, 's');
}

const escape = (ch: string) => ch.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/**
 * The inside of a glob's `[...]` as the inside of a RegExp class: `\x` is `x`, `a-z` a range, and a
 * range written backwards (`z-a`) is taken as Redis takes it, the same range (in a RegExp it would
 * not compile). Every other character stands for itself.
 */
function classBody(body: string): string {
  const literal = (ch: string) => ch.replace(/[\\\][^-]/, '\\$&');
  let out = '';
  for (let i = 0; i < body.length; i++) {
    let ch = body[i]!;
    if (ch === '\\' && i + 1 < body.length) ch = body[++i]!;
    else if (body[i + 1] === '-' && i + 2 < body.length) {
      const to = body[i + 2]!;
      i += 2;
      out += ch <= to ? `${literal(ch)}-${literal(to)}` : `${literal(to)}-${literal(ch)}`;
      continue;
    }
    out += literal(ch);
  }
  return out;
}

/**
 * The embedded store's data through the same interface as Redis, read-only. It has one keyspace,
 * so every db index shows the same keys; its values are strings and sets.
 */
export function memoryReader(store: MemoryStore): CacheReader {
  return {
    async page({ pattern, offset, limit }: PageQuery) {
      const match = globToRegExp(pattern || '*');
      const items = [];
      let seen = 0;
      for (const key of store.keys()) {
        if (!match.test(key)) continue;
        if (seen >= offset + limit) return { items, hasMore: true };
        if (seen++ < offset) continue;
        const found = store.peek(key);
        items.push({ key, ttl: found?.ttl ?? -2, type: found?.type ?? 'none' });
      }
      return { items, hasMore: false };
    },
    async entry(key) {
      const found = store.peek(key);
      if (!found) return null;
      if (found.type === 'string') {
        const text = found.value as string;
        return { type: 'string', ttl: found.ttl, size: Buffer.byteLength(text), text, cut: false };
      }
      const members = (found.value as string[]).sort();
      return { type: 'set', ttl: found.ttl, size: members.length, members, cut: false };
    },
    close() {},
  };
}
