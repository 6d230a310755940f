/**
 * Secret redaction of the cache list (SPEC.md rule 7). Code-level configuration, not a UI setting:
 * a JSON object key matching any of these (case-insensitive, anywhere in the key, so `db_password`
 * and `X-Api-Key` count) has its value replaced by `******`, whatever that value is (an object
 * under `credentials` goes as a whole).
 */
export const SECRET_KEY_PATTERNS: readonly RegExp[] = Object.freeze([
  /password/i,
  /secret/i,
  /token/i,
  /api[_-]?key/i,
  /credential/i,
  /private[_-]?key/i,
  /access[_-]?token/i,
  /refresh[_-]?token/i,
  /authorization/i,
  /bearer/i,
]);

export const REDACTED = '******';

export function isSecretKey(key: string): boolean {
  return SECRET_KEY_PATTERNS.some((pattern) => pattern.test(key));
}

/**
 * A copy of a parsed JSON value with every value under a secret-looking object key replaced,
 * recursively through objects and arrays; `changed` says whether anything was replaced (so an
 * untouched value can keep its original text). Object.fromEntries keeps a `__proto__` key of the
 * input an own property instead of changing the copy's prototype.
 */
export function redact(value: unknown): { value: unknown; changed: boolean } {
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((item) => {
      const r = redact(item);
      changed ||= r.changed;
      return r.value;
    });
    return { value: out, changed };
  }
  if (value !== null && typeof value === 'object') {
    let changed = false;
    const out = Object.fromEntries(
      Object.entries(value).map(([key, item]) => {
        if (isSecretKey(key)) {
          changed = true;
          return [key, REDACTED];
        }
        const r = redact(item);
        changed ||= r.changed;
        return [key, r.value];
      }),
    );
    return { value: out, changed };
  }
  return { value, changed: false };
}

/** Object or array JSON text -> its parsed form; anything else (plain text, `123`, broken JSON) -> undefined. */
export function parseStructured(text: string): object | undefined {
  const first = text.trimStart()[0];
  if (first !== '{' && first !== '[') return undefined;
  try {
    return JSON.parse(text) as object;
  } catch {
    return undefined;
  }
}

/**
 * A Redis string that may itself hold JSON (a hash field, a list member): redacted and re-serialized
 * when it held a secret, returned as it was otherwise.
 */
export function redactJsonText(text: string): string {
  const parsed = parseStructured(text);
  if (parsed === undefined) return text;
  const r = redact(parsed);
  return r.changed ? JSON.stringify(r.value) : text;
}
