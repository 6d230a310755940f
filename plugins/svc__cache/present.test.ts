import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { globToRegExp } from './memory-reader.ts';
import { presentEntry, TRANSPORT_LIMIT } from './present.ts';
import { isSecretKey, redact, REDACTED } from './redact.ts';

describe('svc__cache redaction and presentation (no Redis)', () => {
  it('matches the secret patterns case-insensitively anywhere in a key', () => {
    for (const k of ['Password', 'api-key', 'API_KEY', 'apikey', 'privateKey', 'private_key', 'refresh_token', 'Authorization', 'x-bearer', 'client_secret', 'credentials', 'accessToken']) {
      expect(isSecretKey(k), k).toBe(true);
    }
    for (const k of ['name', 'pass', 'api', 'key', 'auth', 'private', 'tok']) expect(isSecretKey(k), k).toBe(false);
  });

  it('a __proto__ key stays an own property of the copy, and is not a way around redaction', () => {
    const parsed = JSON.parse('{"__proto__":{"password":"p"},"a":1}') as object;
    const { value } = redact(parsed);
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(JSON.stringify(value)).toBe('{"__proto__":{"password":"******"},"a":1}');
  });

  it('property: a redacted document holds no value under a secret key and keeps every other value', () => {
    const key = fc.oneof(fc.constantFrom('password', 'Token', 'api_key', 'name', 'id'), fc.string({ maxLength: 6 }));
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.array(key, { maxLength: 3 }), (doc, extra) => {
        const input = JSON.parse(JSON.stringify(Array.isArray(doc) ? doc : { doc, ...Object.fromEntries(extra.map((k) => [k, doc])) })) as unknown;
        const text = JSON.stringify(input);
        fc.pre(Buffer.byteLength(text) <= TRANSPORT_LIMIT);
        const out = presentEntry('k', { type: 'string', ttl: -1, size: text.length, text, cut: false }, true);
        const check = (a: unknown, b: unknown): void => {
          if (Array.isArray(a)) a.forEach((x, i) => check(x, (b as unknown[])[i]));
          else if (a && typeof a === 'object') for (const [k, x] of Object.entries(a)) check(isSecretKey(k) ? REDACTED : x, Object.getOwnPropertyDescriptor(b, k)?.value);
          else expect(b).toEqual(a);
        };
        if (out.truncated) return;
        check(input, out.valueParsed);
        check(input, JSON.parse(out.value));
      }),
      { numRuns: 300 },
    );
  });

  it('a string too large to read whole that looks like JSON is withheld while secrets are hidden', () => {
    const raw = { type: 'string', ttl: -1, size: 5e6, text: '{"token":"abc", "pad":"', cut: true } as const;
    expect(presentEntry('k', raw, true)).toEqual({ key: 'k', ttl: -1, type: 'string', size: 5e6, value: '', truncated: true });
    expect(presentEntry('k', raw, false).value).toBe(raw.text);
    expect(presentEntry('k', { ...raw, text: 'plain' }, true).value).toBe('plain');
  });

  it('Redis globs for the embedded store', () => {
    expect(globToRegExp('auth:*').test('auth:session:1')).toBe(true);
    expect(globToRegExp('a?c').test('abc')).toBe(true);
    expect(globToRegExp('a[bx]c').test('axc')).toBe(true);
    expect(globToRegExp('a[^b]c').test('abc')).toBe(false);
    expect(globToRegExp('a\\*').test('a*')).toBe(true);
    expect(globToRegExp('a\\*').test('ab')).toBe(false);
    expect(globToRegExp('x.y').test('xzy')).toBe(false);
    // A range written backwards is the same range, as in Redis (in a RegExp it would not compile: the
    // resilience fuzzer found it as a 503 on GET /svc__cache/cacheEntries?pattern=[ K- ]).
    expect(globToRegExp('a[z-x]c').test('ayc')).toBe(true);
    expect(globToRegExp('a[z-x]c').test('abc')).toBe(false);
    expect(globToRegExp('[ K- ]').test('A')).toBe(true);
    expect(globToRegExp('[a-]').test('-')).toBe(true);
  });

  it('any glob compiles (no pattern an admin types can fail the embedded store with a 503)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('[', ']', '-', '^', '\\', '*', '?', 'a', 'z', 'K', ' ', '.') }), (glob) => {
        expect(() => globToRegExp(glob)).not.toThrow();
      }),
      { numRuns: 2000 },
    );
  });
});
