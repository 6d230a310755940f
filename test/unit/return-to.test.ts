import { describe, expect, it } from 'vitest';
import { safeReturnPath } from '../../src/auth/oauth/return-to.ts';

describe('safeReturnPath', () => {
  it.each([
    ['//evil.example', '/'],
    ['/\\evil.example', '/'],
    ['https://evil.example/x', '/'],
    ['javascript:alert(1)', '/'],
    ['/%2F%2Fevil.example', '/'],
    ['/%252F%252Fevil.example', '/'],
    ['/%5Cevil.example', '/'],
    ['/a\nb', '/'],
    ['/a%0d%0aSet-Cookie:x', '/'],
    // dot segments normalize into a protocol-relative path (found by the property test)
    ['/.//evil.example', '/'],
    ['/a/..//evil.example', '/'],
    ['relative/path', '/'],
    [42, '/'],
  ])('%j -> %j', (input, expected) => {
    expect(safeReturnPath(input)).toBe(expected);
  });

  it.each(['/', '/projects/42?tab=files#top', '/a/./b', '/ok%20space'])('keeps the same-site path %j', (path) => {
    expect(safeReturnPath(path)).toBe(new URL(path, 'http://x').pathname + new URL(path, 'http://x').search + new URL(path, 'http://x').hash);
  });
});
