// The rules that keep the local session cache exact (src/auth/session-cache.ts), one by one. The
// end-to-end proof with two instances on a real Redis is test/e2e/local-cache.test.ts.
import { describe, expect, it } from 'vitest';
import { sha256hex } from '../../src/auth/hash.ts';
import { SessionCache, SessionRecordSlots } from '../../src/auth/session-cache.ts';
import type { SessionRecord } from '../../src/auth/sessions.ts';

const record = (userId: string): SessionRecord => ({ userId, isAdmin: false, provider: 'password', createdAt: 0, expiresAt: 1 });

function live(maxEntries = 10, maxAgeMs = 1000) {
  const cache = new SessionCache(maxEntries, maxAgeMs);
  cache.setLive(true);
  return cache;
}

/** The cache is keyed by SHA-256 digests (a session id's, an API key's): `h('a')`. */
const h = (name: string) => sha256hex(name);

function fill(cache: SessionCache, hash: string, userId = hash, at = 0) {
  const token = cache.begin(hash)!;
  cache.finish(hash, token, record(userId), at);
}

describe('SessionCache', () => {
  it('keeps what a read found and serves it until the hard age', () => {
    const cache = live(10, 1000);
    fill(cache, h('a'), 'alice', 0);
    expect(cache.get(h('a'), 999)?.userId).toBe('alice');
    expect(cache.get(h('a'), 1000)).toBeUndefined();
  });

  it('a read overtaken by an invalidation of its key is not kept (the caching-in-progress race)', () => {
    const cache = live();
    const token = cache.begin(h('a'))!;
    cache.invalidate(h('a')); // Redis announced a change before the read's reply was handled
    cache.finish(h('a'), token, record('stale'), 0);
    expect(cache.get(h('a'), 1)).toBeUndefined();
  });

  it('of two reads in flight for one key, only the later is kept', () => {
    const cache = live();
    const first = cache.begin(h('a'))!;
    const second = cache.begin(h('a'))!;
    cache.finish(h('a'), first, record('first'), 0);
    expect(cache.get(h('a'), 1)).toBeUndefined();
    cache.finish(h('a'), second, record('second'), 0);
    expect(cache.get(h('a'), 1)?.userId).toBe('second');
  });

  it('serves and keeps nothing while not live; going offline drops what it had', () => {
    const cache = new SessionCache(10, 1000);
    expect(cache.begin(h('a'))).toBeNull();
    cache.setLive(true);
    fill(cache, h('a'));
    const inFlight = cache.begin(h('b'))!;
    cache.setLive(false);
    expect(cache.get(h('a'), 1)).toBeUndefined();
    cache.finish(h('b'), inFlight, record('b'), 0);
    cache.setLive(true);
    expect(cache.get(h('b'), 1)).toBeUndefined();
  });

  it('an invalidation drops the record but remembers the last TTL push; forget drops both', () => {
    const cache = live();
    expect(cache.due(h('a'), 'pushedAt', 0, 60_000)).toBe(true);
    fill(cache, h('a'));
    cache.invalidate(h('a'));
    expect(cache.get(h('a'), 1)).toBeUndefined();
    expect(cache.pushedAt(h('a'))).toBe(0);
    expect(cache.due(h('a'), 'pushedAt', 59_999, 60_000)).toBe(false);
    expect(cache.due(h('a'), 'pushedAt', 60_000, 60_000)).toBe(true);
    cache.forget(h('a'));
    expect(cache.pushedAt(h('a'))).toBeUndefined();
  });

  it('the TTL push and the "last seen" write are counted apart', () => {
    const cache = live();
    expect(cache.due(h('a'), 'pushedAt', 0, 60_000)).toBe(true);
    expect(cache.due(h('a'), 'seenAt', 30_000, 60_000)).toBe(true);
    expect(cache.due(h('a'), 'pushedAt', 60_000, 60_000)).toBe(true);
    expect(cache.due(h('a'), 'seenAt', 60_000, 60_000)).toBe(false);
    cache.failed(h('a'), 'seenAt');
    expect(cache.due(h('a'), 'seenAt', 60_001, 60_000)).toBe(true);
    expect(cache.pushedAt(h('a'))).toBe(60_000);
  });

  it('a failed push is due again at once', () => {
    const cache = live();
    expect(cache.due(h('a'), 'pushedAt', 0, 60_000)).toBe(true);
    cache.failed(h('a'), 'pushedAt');
    expect(cache.due(h('a'), 'pushedAt', 1, 60_000)).toBe(true);
  });

  it('epoch times in, epoch times out: pushes, the hard age and reads that began before the first push', () => {
    const t0 = Date.UTC(2026, 10, 26, 6, 0, 0, 123);
    const cache = live(10, 1000);
    const token = cache.begin(h('a'))!;
    expect(cache.due(h('b'), 'pushedAt', t0 + 5, 60_000)).toBe(true);
    expect(cache.pushedAt(h('b'))).toBe(t0 + 5);
    cache.finish(h('a'), token, record('u'), t0); // read before the first push
    expect(cache.get(h('a'), t0 + 999)).toBeDefined();
    expect(cache.get(h('a'), t0 + 1000)).toBeUndefined();
    expect(cache.due(h('b'), 'pushedAt', t0 + 60_004, 60_000)).toBe(false);
    expect(cache.due(h('b'), 'pushedAt', t0 + 60_005, 60_000)).toBe(true);
    expect(cache.pushedAt(h('b'))).toBe(t0 + 60_005);
  });

  it('holds at most maxEntries sessions, the least recently used out first', () => {
    const cache = live(3);
    for (const name of ['a', 'b', 'c']) fill(cache, h(name));
    expect(cache.get(h('a'), 1)).toBeDefined(); // a is now the most recently used
    fill(cache, h('d'));
    expect(cache.get(h('b'), 1)).toBeUndefined();
    for (const name of ['a', 'c', 'd']) expect(cache.get(h(name), 1)).toBeDefined();
  });

  it('evicts by the CLOCK rule: an entry used since the sweep last passed it gets a second chance', () => {
    const cache = live(3, 60_000);
    for (const name of ['a', 'b', 'c']) fill(cache, h(name));
    expect(cache.get(h('a'), 1)).toBeDefined();
    expect(cache.get(h('b'), 2)).toBeDefined();
    fill(cache, h('d')); // a and b were used: they move to the young end, unflagged; c goes
    expect(cache.get(h('c'), 3)).toBeUndefined();
    expect(cache.get(h('a'), 3)).toBeDefined(); // a is used again; b is not
    fill(cache, h('e')); // a moves on once more; b had its second chance and goes
    expect(cache.get(h('b'), 4)).toBeUndefined();
    for (const name of ['a', 'd', 'e']) expect(cache.get(h(name), 5)).toBeDefined();
  });

  it('one eviction gives at most 32 second chances: with every entry used, the 33rd oldest goes', () => {
    const cache = live(100, 60_000);
    const hashes = Array.from({ length: 100 }, (_, i) => h(`h${i}`));
    for (const hash of hashes) fill(cache, hash);
    for (const hash of hashes) cache.get(hash, 1);
    fill(cache, h('new'));
    expect(hashes.filter((hash) => cache.get(hash, 2) === undefined)).toEqual([h('h32')]);
  });

  it('a new entry is never the one evicted, even when every other entry was used', () => {
    const cache = live(2, 60_000);
    fill(cache, h('a'));
    fill(cache, h('b'));
    cache.get(h('a'), 1);
    cache.get(h('b'), 1);
    fill(cache, h('c'));
    expect(cache.get(h('c'), 2)).toBeDefined();
    expect([cache.get(h('a'), 2), cache.get(h('b'), 2)].filter(Boolean)).toHaveLength(1);
  });

  it('thousands of entries, each in a slot of its own; the slots of evicted and forgotten entries serve new ones', () => {
    const cache = live(3000, 60_000);
    for (let i = 0; i < 3000; i++) fill(cache, h(`h${i}`), `u${i}`, i);
    for (let i = 0; i < 3000; i++) expect(cache.get(h(`h${i}`), 3000)?.userId).toBe(`u${i}`);
    cache.forget(h('h0'));
    expect(cache.due(h('h0'), 'pushedAt', 3001, 60_000)).toBe(true); // a new entry: never pushed
    for (let i = 3000; i < 4000; i++) fill(cache, h(`h${i}`), `u${i}`, i);
    const h0Kept = cache.pushedAt(h('h0')) !== undefined; // an entry without a record, unless the sweep took it
    const held = Array.from({ length: 4000 }, (_, i) => i).filter((i) => cache.get(h(`h${i}`), 4000) !== undefined);
    expect(held).toHaveLength(h0Kept ? 2999 : 3000);
    for (const i of held) expect(cache.get(h(`h${i}`), 4000)?.userId).toBe(`u${i}`); // no slot shared by two entries
  });
});

describe('SessionRecordSlots', () => {
  const t0 = Date.UTC(2026, 10, 26, 6, 0, 0, 123);
  const cache = () => {
    const c = new SessionCache(10, 60_000, new SessionRecordSlots());
    c.setLive(true);
    return c;
  };

  it('gives back the record it was given, field for field (epoch times exact, totp only when on)', () => {
    const c = cache();
    const records: Record<string, SessionRecord> = {
      a: { userId: 'alice', isAdmin: true, provider: 'password', createdAt: t0, expiresAt: t0 + 86_400_000, totp: true },
      b: { userId: 'bob', isAdmin: false, provider: 'github', createdAt: t0 - 1, expiresAt: t0 + 1 },
    };
    for (const [name, r] of Object.entries(records)) c.finish(h(name), c.begin(h(name))!, r, t0);
    expect(c.get(h('a'), t0 + 1)).toStrictEqual(records.a);
    expect(c.get(h('b'), t0 + 1)).toStrictEqual(records.b);
    expect('totp' in c.get(h('b'), t0 + 1)!).toBe(false);
  });

  it('past 255 distinct provider names, each record still gives back its own', () => {
    const c = new SessionCache(400, 60_000, new SessionRecordSlots());
    c.setLive(true);
    const record = (i: number): SessionRecord => ({ userId: `u${i}`, isAdmin: false, provider: `p${i}`, createdAt: t0, expiresAt: t0 + i });
    for (let i = 0; i < 300; i++) c.finish(h(`s${i}`), c.begin(h(`s${i}`))!, record(i), t0);
    for (let i = 0; i < 300; i++) expect(c.get(h(`s${i}`), t0 + 1)).toStrictEqual(record(i));
    c.invalidate(h('s299')); // a named-by-slot one goes; its slot's next record brings its own name
    c.finish(h('s299'), c.begin(h('s299'))!, { ...record(299), provider: 'password' }, t0);
    expect(c.get(h('s299'), t0 + 1)?.provider).toBe('password');
    expect(c.get(h('s298'), t0 + 1)?.provider).toBe('p298');
  });

  it('a record read again replaces the one kept; an invalidated one is gone', () => {
    const c = cache();
    c.finish(h('a'), c.begin(h('a'))!, { userId: 'alice', isAdmin: false, provider: 'password', createdAt: t0, expiresAt: t0 + 5 }, t0);
    c.finish(h('a'), c.begin(h('a'))!, { userId: 'alice', isAdmin: true, provider: 'password', createdAt: t0, expiresAt: t0 + 9 }, t0 + 1);
    expect(c.get(h('a'), t0 + 2)).toMatchObject({ isAdmin: true, expiresAt: t0 + 9 });
    c.invalidate(h('a'));
    expect(c.get(h('a'), t0 + 3)).toBeUndefined();
  });
});

describe('SessionCache keys', () => {
  it('a key that is no SHA-256 hex digest finds nothing and keeps nothing; its writes are always due', () => {
    const cache = live();
    for (const odd of ['a', 'A'.repeat(64), `${h('a').slice(0, 63)}z`]) {
      expect(cache.due(odd, 'pushedAt', 0, 60_000)).toBe(true);
      expect(cache.due(odd, 'pushedAt', 1, 60_000)).toBe(true);
      fill(cache, odd);
      expect(cache.get(odd, 1)).toBeUndefined();
      expect(cache.pushedAt(odd)).toBeUndefined();
      cache.invalidate(odd);
      cache.forget(odd);
    }
    fill(cache, h('a'));
    expect(cache.get(h('a'), 1)).toBeDefined();
  });
});
