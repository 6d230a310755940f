/**
 * Secret redaction of the cache list (SPEC.md rule 7, widened by issue 35 finding 8). Code-level
 * configuration, not a UI setting: a JSON object key matching any of these has its value replaced by
 * `******`, whatever that value is (an object under `credentials` goes as a whole). A key is matched
 * in snake case (`accessToken` -> `access_token`, `X-Api-Key` -> `x-api-key`), anywhere in it, so
 * `db_password` and `X-Api-Key` count. The two short names match at the start of a word only:
 * `auth` (`auth`, `authCode`, `x-auth`, but not `author`, `authority` or `oauthProvider`) and
 * `otp` (`otp`, `totp`, `hotp`, `otpauthUri`, but not `footprint`).
 *
 * Beyond object keys, every string is looked into: a string that holds JSON (a JSON value inside a
 * string, double-encoded JSON, JSON after a byte-order mark) is redacted as JSON; other text has
 * `password=...`-style pairs and the password of `scheme://user:password@host` URLs replaced.
 */
export const SECRET_KEY_PATTERNS: readonly RegExp[] = Object.freeze([
  /password/i,
  /passwd/i,
  /pwd/i,
  /secret/i,
  /token/i,
  /api[_-]?key/i,
  /credential/i,
  /private[_-]?key/i,
  /priv[_-]?key/i,
  /access[_-]?token/i,
  /refresh[_-]?token/i,
  /authorization/i,
  /(?:^|[^a-z])auth(?!or)/i,
  /bearer/i,
  /session[_-]?id/i,
  /cookie/i,
  /(?:^|[^a-z])[th]?otp/i,
  /code[_-]?verifier/i,
  /dsn/i,
]);

export const REDACTED = '******';

/** `accessToken` -> `access_token`: the patterns see camelCase words as separate words. */
const snakeCase = (key: string) => key.replace(/(?<=[a-z0-9])(?=[A-Z])/g, '_').toLowerCase();

/** Matched as written and in snake case: a capital inside a word (`pwD`, `passWord`) must not split a secret name. */
export function isSecretKey(key: string): boolean {
  const name = snakeCase(key);
  return SECRET_KEY_PATTERNS.some((pattern) => pattern.test(name) || pattern.test(key));
}

/** Text that may be JSON: an object, an array or a string literal, after blanks or a byte-order mark. */
export const LOOKS_JSON = /^[\s\uFEFF]*["[{]/;

/**
 * Object or array JSON text -> its parsed form; a byte-order mark before it is skipped, and a JSON
 * string literal holding such JSON (double-encoded) is unwrapped. Anything else (plain text, `123`,
 * broken JSON) -> undefined.
 */
export function parseStructured(text: string): object | undefined {
  if (!LOOKS_JSON.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    return undefined;
  }
  if (typeof parsed === 'string') return parseStructured(parsed);
  return parsed !== null && typeof parsed === 'object' ? parsed : undefined;
}

/**
 * `scheme://user:password@` -> `scheme://user:******@`. The scheme is read from where a run of scheme
 * characters starts (the lookbehind): `\b` let it start after every `.`, `+` or `-` of a run, each start
 * reading the rest of the run (`a.a.a...`: quadratic).
 */
const URL_PASSWORD = /((?<![a-z0-9+.-])[a-z0-9+.-]+:\/\/[^\s:@/]*:)([^\s@/]+)(?=@)/gi;
/** `Bearer <token>`, `Basic <credentials>` (an Authorization header written out). */
const SCHEME_TOKEN = /\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]+/gi;
/**
 * The `name=` or `name: ` of a pair, the name also quoted (`"password": "x"`): JSON that does not parse
 * as a whole (NDJSON, JSON cut short, JSON inside a log line) is text, and its pairs are written so; JSON
 * written into a JSON string has a backslash before each quote (`\"password\":\"x\"`). A name starts
 * where a run of name characters starts (the lookbehind): tried at every character of a long run, the
 * scan read the rest of the run each time, quadratic (a 4 MiB value held the event loop for hours).
 */
const PAIR_NAME = /(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]+)(\\?["']?\s*[=:]\s*)/g;
/**
 * A pair's value, right after its name: quoted (backslash escapes kept inside), quoted with escaped
 * quotes (`\"...\"`, an escaped quote inside it being `\\\"`), or up to a blank, `&`, `;`, `,` or a closing
 * bracket (`{"password":123}` in text keeps its `}`). An object or array value: `bracketEnd`.
 */
const PAIR_VALUE = /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\\"(?:[^"\\]|\\\\\\"|\\\\|\\[^"\\])*\\"|[^\s&;,"'}\]]+/y;

/**
 * Where an object or array value starting at `start` (`{` or `[`) ends: after its closing bracket, or at
 * the text's end when it never closes (JSON cut short). Brackets inside strings do not count; with
 * `escapedQuotes` (JSON written into a JSON string) a string's quotes are `\"` and only brackets count.
 */
function bracketEnd(text: string, start: number, escapedQuotes: boolean): number {
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"' && !escapedQuotes) {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (ch === '{' || ch === '[') depth++;
    else if ((ch === '}' || ch === ']') && --depth === 0) return i + 1;
  }
  return text.length;
}

/**
 * `name=value` and `name: value` pairs with a secret-looking name get their value replaced. The value
 * of any other name is looked into, not skipped: `error: password=hunter2`, `msg=token=abc` and
 * `https://host/cb?access_token=...` hold a secret pair inside another pair's value.
 */
function redactPairs(text: string): string {
  let out = '';
  let copied = 0;
  PAIR_NAME.lastIndex = 0;
  for (let m = PAIR_NAME.exec(text); m !== null; m = PAIR_NAME.exec(text)) {
    if (!isSecretKey(m[1]!)) continue;
    const at = PAIR_NAME.lastIndex;
    let end: number;
    if (text[at] === '{' || text[at] === '[') {
      end = bracketEnd(text, at, m[2]!.startsWith('\\')); // an object or array under a secret name goes whole
    } else {
      PAIR_VALUE.lastIndex = at;
      if (!PAIR_VALUE.exec(text)) continue;
      end = PAIR_VALUE.lastIndex;
    }
    out += `${text.slice(copied, at)}${REDACTED}`;
    copied = PAIR_NAME.lastIndex = end;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** Plain text with the values of secret-looking `name=value` pairs and URL passwords replaced. */
function redactPlain(text: string): string {
  return redactPairs(text.replace(URL_PASSWORD, `$1${REDACTED}`).replace(SCHEME_TOKEN, `$1$2${REDACTED}`));
}

/**
 * Any string (a Redis value, a hash value, a list member, a string inside JSON): redacted as JSON when
 * it holds JSON (re-serialized, with its double encoding, only when something was replaced), as plain
 * text otherwise. Returned as it was when nothing secret is in it.
 */
export function redactText(text: string): string {
  const parsed = parseStructured(text);
  if (parsed === undefined) return redactPlain(text);
  const r = redact(parsed);
  if (!r.changed) return text;
  const json = JSON.stringify(r.value);
  return /^[\s\uFEFF]*"/.test(text) ? JSON.stringify(json) : json;
}

/**
 * A copy of a parsed JSON value with every value under a secret-looking object key replaced, and
 * every string redacted as `redactText` does, recursively through objects and arrays; `changed` says
 * whether anything was replaced (so an untouched value can keep its original text).
 * Object.fromEntries keeps a `__proto__` key of the input an own property instead of changing the
 * copy's prototype.
 */
export function redact(value: unknown): { value: unknown; changed: boolean } {
  if (typeof value === 'string') {
    const out = redactText(value);
    return { value: out, changed: out !== value };
  }
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
