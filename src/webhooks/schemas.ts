import * as v from 'valibot';
import { knownTypePattern } from '../audit/record.ts';

/** A URL as valibot checks it; the rule that depends on the environment (https, no private address) is `webhookUrlProblem`. */
const url = v.pipe(v.string(), v.maxLength(2048), v.url('must be a URL'));

/** An audit record type, or a prefix ending in `.*` (CONTRACT 13). */
const eventPattern = v.pipe(v.string(), v.maxLength(64), v.check(knownTypePattern, 'must be an audit record type, or a prefix ending in .* (docs/events.md)'));

/** The types an endpoint receives: at least one, at most 50, each named once. */
const events = v.pipe(
  v.array(eventPattern, 'must be an array of audit record types'),
  v.minLength(1, 'must name at least one type'),
  v.maxLength(50),
  v.transform((list) => [...new Set(list)]),
);

/** A note for people (what the endpoint is for): one line, bounded. */
const description = v.pipe(v.string(), v.maxLength(500), v.regex(/^\P{Cc}*$/u, 'must not hold line breaks or control characters'));

export const createWebhookSchema = v.strictObject({
  url,
  events,
  description: v.optional(description),
});

export const patchWebhookSchema = v.strictObject({
  url: v.optional(url),
  events: v.optional(events),
  /** null (or an empty string) removes it. */
  description: v.optional(v.nullable(description)),
  active: v.optional(v.boolean()),
});

export type CreateWebhook = v.InferOutput<typeof createWebhookSchema>;
export type PatchWebhook = v.InferOutput<typeof patchWebhookSchema>;
