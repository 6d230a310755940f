// What a person reads beside a field the service refused (400 `validation_failed`). Its `details` name
// each field by its path (`email`, `newPassword`) and say what is wrong in a developer's words
// (`must be an email address`, `Invalid length: Expected >=1 but received 0`, `is required`); these
// pages say it as a sentence for people, one per field. Pure: no DOM here, so it is unit-tested
// (test/unit/example-field-errors.test.ts).

/** One entry of `error.details` (CONTRACT 2): `{"path":"a.b","message":"..."}`. */
export interface ErrorDetail {
  path: string;
  message: string;
}

type Problem = { kind: 'missing' } | { kind: 'tooShort'; min: number } | { kind: 'tooLong'; max: number } | { kind: 'invalid'; message: string };

/** What kind of problem a detail's message names (valibot's words, or svc's own). */
export function problemOf(message: string): Problem {
  if (/is required|received undefined/i.test(message)) return { kind: 'missing' };
  const max = /Expected <=\s*(\d+)|at most (\d+)/i.exec(message);
  if (max) return { kind: 'tooLong', max: Number(max[1] ?? max[2]) };
  const min = /Expected >=\s*(\d+)|at least (\d+)/i.exec(message);
  if (min) return { kind: 'tooShort', min: Number(min[1] ?? min[2]) };
  return { kind: 'invalid', message };
}

/** Sentences for the fields these pages have, by input name; any other field gets the general ones. */
const FIELDS: Record<string, { missing: string; invalid?: string; newPassword?: boolean }> = {
  email: { missing: 'Enter your email address.', invalid: 'Enter a valid email address.' },
  password: { missing: 'Enter your password.' },
  newPassword: { missing: 'Choose a new password.', newPassword: true },
  currentPassword: { missing: 'Enter your current password.' },
  firstname: { missing: 'Enter your first name.', invalid: 'Write your first name on one line, without special characters.' },
  lastname: { missing: 'Enter your last name.', invalid: 'Write your last name on one line, without special characters.' },
  code: { missing: 'Enter the 6-digit code from your authenticator app.', invalid: 'Enter the 6-digit code from your authenticator app.' },
  recoveryCode: { missing: 'Enter one of your recovery codes.', invalid: 'Enter one of your recovery codes, as it was shown.' },
  name: { missing: 'Enter a name.', invalid: 'Write the name on one line, without special characters.' },
};

/**
 * "must be well-formed text" -> "Must be well-formed text."; a message that starts with an address, a
 * host or a type name ("https://idp.example/... cannot be reached") keeps it as it is written.
 */
const asSentence = (text: string) => {
  const trimmed = text.trim();
  if (!trimmed) return 'This value is not accepted.';
  const start = /^\S*(?:[./]\S|:\/\/|:\d)/.test(trimmed) ? trimmed.charAt(0) : trimmed.charAt(0).toUpperCase();
  return `${start}${trimmed.slice(1)}${/[.!?]$/.test(trimmed) ? '' : '.'}`;
};

/**
 * The sentence for one field: `name` is the input's name (the detail's first path segment), `messages`
 * what the service said of it, `value` what the person typed (empty: "Enter ..." whatever the rule).
 * Several problems with one field make one sentence: missing first, then too long, too short, invalid.
 */
export function sentenceFor(name: string, messages: readonly string[], value?: string): string {
  const field = FIELDS[name];
  const problems = messages.map(problemOf);
  const tooShort = problems.find((p): p is Extract<Problem, { kind: 'tooShort' }> => p.kind === 'tooShort');
  const tooLong = problems.find((p): p is Extract<Problem, { kind: 'tooLong' }> => p.kind === 'tooLong');
  const invalid = problems.find((p): p is Extract<Problem, { kind: 'invalid' }> => p.kind === 'invalid');
  // A rule of "at least 1" is "enter something"; one of "at least 8" for a new password says how long.
  const missing = value === '' || problems.some((p) => p.kind === 'missing') || (tooShort && tooShort.min <= 1);
  if (missing) {
    const min = tooShort?.min ?? 0;
    if ((field?.newPassword || name === 'password') && min > 1) return `Choose a password of at least ${min} characters.`;
    return field?.missing ?? 'Fill in this field.';
  }
  if (tooLong) return `Use at most ${tooLong.max} characters.`;
  if (tooShort) return `Use at least ${tooShort.min} characters.`;
  return field?.invalid ?? asSentence(invalid?.message ?? '');
}

/**
 * `details` as one sentence per field, in the order the fields first appear: `fields` maps each input
 * name to its sentence; `general` holds what names no field (the whole body), as sentences too.
 * `values` are the form's values by name (what was typed decides "Enter ..." over "Use at least ...").
 */
export function fieldSentences(details: readonly ErrorDetail[], values: Readonly<Record<string, string>> = {}): { fields: Map<string, string>; general: string[] } {
  const byField = new Map<string, string[]>();
  const general: string[] = [];
  for (const { path, message } of details) {
    const name = path.split('.')[0] ?? '';
    if (!name) {
      general.push(asSentence(message));
      continue;
    }
    byField.set(name, [...(byField.get(name) ?? []), message]);
  }
  const fields = new Map([...byField].map(([name, messages]) => [name, sentenceFor(name, messages, values[name])]));
  return { fields, general: [...new Set(general)] };
}

/** The announcement above the form when fields are marked: "Check this field: Email." */
export function summaryOf(labels: readonly string[]): string {
  return labels.length === 1 ? `Check this field: ${labels[0]}.` : `Check these fields: ${labels.join(', ')}.`;
}
