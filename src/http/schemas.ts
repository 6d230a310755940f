import * as v from 'valibot';
import { documentAs } from './openapi.ts';

/**
 * An email address: trimmed (spaces, not line breaks), lowercased, at most 254 characters, one
 * mailbox. Deliberately lenient about the domain (`admin@localhost` is the bootstrap admin);
 * ownership is proven elsewhere. What a mail header reads as a list, a display name or a comment
 * (`,` `;` `<>` `()` `"` `:` `[]` `\`) or a line break is refused: the address is a mail's `To`, and
 * `ann@example.com,bob` would be two recipients.
 */
export const emailSchema = v.pipe(
  v.string(),
  v.regex(/^[^\r\n]*$/, 'must be one line'),
  v.trim(),
  v.toLowerCase(),
  v.maxLength(254),
  v.regex(/^[^\s@,;:<>()[\]"\\\p{Cc}]+@[^\s@,;:<>()[\]"\\\p{Cc}]+$/u, 'must be an email address'),
);

/** Longest first or last name, from a request or a provider's profile. */
export const NAME_MAX_LENGTH = 100;

/** A name part: at most 100 characters, one line of text (no control characters, no half of a surrogate pair). */
export const nameSchema = v.pipe(
  v.string(),
  v.trim(),
  v.maxLength(NAME_MAX_LENGTH),
  v.regex(/^\P{Cc}*$/u, 'must not hold line breaks or control characters'),
  // String#isWellFormed (Node 20+) is newer than the ES2022 library the project compiles against.
  v.check((name) => (name as string & { isWellFormed(): boolean }).isWellFormed(), 'must be well-formed text'),
);

/** An integer query parameter with a default and bounds (query values arrive as strings). */
export const intQuery = (fallback: number, min: number, max: number) => {
  const range = `must be from ${min} to ${max}`;
  return v.pipe(v.optional(v.string(), String(fallback)), v.regex(/^\d{1,9}$/, 'must be a whole number'), v.transform(Number), v.minValue(min, range), v.maxValue(max, range));
};

/** An id path segment. */
export const idParams = v.object({ id: v.pipe(v.string(), v.minLength(1), v.maxLength(128)) });

/**
 * `v.record(key, value)` that refuses an array: valibot's record takes `[1,2]` as `{"0":1,"1":2}`.
 * The guard runs on the raw input, before the record copies it; the OpenAPI document shows the record.
 */
export function plainRecord<K extends v.GenericSchema<string, string | number | symbol>, V extends v.GenericSchema>(key: K, value: V) {
  const record = v.record(key, value);
  const guard = v.custom<v.InferInput<typeof record>>((input) => !Array.isArray(input), 'must be an object, not an array');
  return v.pipe(documentAs(guard, record), record);
}
