import type { MemoryStore } from '../../src/store/memory.ts';
import { globMatch } from './glob.ts';
import type { CacheReader, PageQuery } from './reader.ts';

/**
 * The embedded store's data through the same interface as Redis, read-only. It has one keyspace,
 * so every db index shows the same keys; its values are strings and sets.
 */
export function memoryReader(store: MemoryStore): CacheReader {
  return {
    async page({ pattern, offset, limit }: PageQuery) {
      const glob = pattern || '*';
      const items = [];
      let seen = 0;
      for (const key of store.keys()) {
        if (!globMatch(glob, key)) continue;
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
