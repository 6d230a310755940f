const BASE = 'http://svc.invalid';
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * The post-login path, restricted to this site (SPEC.md security rules): a path starting with one
 * `/`. Protocol-relative (`//x`), backslash (`/\x`), absolute, `javascript:`, percent-encoded forms of
 * these, and control characters all become `/`.
 */
export function safeReturnPath(value: unknown): string {
  if (typeof value !== 'string' || value.length > 2048 || !value.startsWith('/')) return '/';
  let decoded = value;
  for (let i = 0; i < 3; i++) {
    if (CONTROL.test(decoded) || decoded.includes('\\') || /^\/[/\\]/.test(decoded) || /^\/*[a-z][a-z0-9+.-]*:/i.test(decoded)) return '/';
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      return '/';
    }
    if (next === decoded) break;
    decoded = next;
  }
  let url: URL;
  try {
    url = new URL(value, BASE);
  } catch {
    return '/';
  }
  if (url.origin !== BASE) return '/';
  const path = `${url.pathname}${url.search}${url.hash}`;
  // Normalizing can itself produce a protocol-relative path (`/.//evil` -> `//evil`) or an encoded
  // one (`/./%2fevil` -> `/%2fevil`): the result must pass these checks on its own.
  if (/^\/[/\\]/.test(path)) return '/';
  return path === value || safeReturnPath(path) === path ? path : '/';
}
