import * as v from 'valibot';
import { knownTypePattern } from '../../src/audit/record.ts';
import type { AuditLog, AuditQuery } from '../../src/audit/log.ts';
import { validationFailed } from '../../src/http/errors.ts';
import { defineRoute } from '../../src/http/route.ts';
import { intQuery } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
/** ISO 8601 with a date and a time (a zone or UTC assumed), normalised to the stored form. */
const isoDate = v.pipe(
  v.string(),
  v.maxLength(40),
  // One check, so that one bad value gets one message.
  v.check((s) => ISO_DATE.test(s) && !Number.isNaN(Date.parse(s)), 'must be an ISO 8601 date or date-time, e.g. 2026-11-30 or 2026-11-30T09:00:00Z'),
  v.transform((s) => new Date(s).toISOString()),
);

const typePattern = v.pipe(v.string(), v.maxLength(64), v.check(knownTypePattern, 'must be an audit record type, or a prefix ending in .* (docs/events.md)'));
const cursor = v.pipe(v.string(), v.minLength(1), v.maxLength(128));
const limit = intQuery(50, 1, 200);

const auditQuery = v.strictObject({ userId: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(128))), type: v.optional(typePattern), since: v.optional(isoDate), until: v.optional(isoDate), cursor: v.optional(cursor), limit });
const activityQuery = v.strictObject({ cursor: v.optional(cursor), limit });

/** One page of the log; an unknown cursor is a 400, like any other bad query value. */
async function page(audit: AuditLog, query: Omit<AuditQuery, 'after'> & { cursor?: string }) {
  const { cursor: given, ...rest } = query;
  let after: string | undefined;
  if (given !== undefined) {
    after = (await audit.cursorId(given)) ?? undefined;
    if (after === undefined) throw validationFailed([{ path: 'cursor', message: 'is not a cursor of this log (it may have expired)' }], 'The cursor is not one this log handed out: start again without it');
  }
  return audit.query({ ...rest, ...(after !== undefined ? { after } : {}) });
}

const tags = ['audit'];

/** `GET /auth/audit` (admin): every record, newest first (CONTRACT section 13). */
export const listAudit = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/audit',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataList' },
    schema: {
      summary: 'The audit log (admin)',
      description: 'Newest first. `type` may end in `.*`; `since` is inclusive, `until` exclusive; `limit` 1..200 (default 50); `nextCursor` continues.',
      tags,
      query: auditQuery,
    },
    handler: async (c, { query }) => c.json(await page(auth.audit, query)),
  });

/** `GET /auth/account/activity`: the caller's own records, newest first. */
export const ownActivity = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/account/activity',
    onRequest: auth.authenticate(),
    config: { type: 'dataList' },
    schema: { summary: 'What happened on my account', description: 'The audit records whose subject is the caller, newest first.', tags, query: activityQuery },
    handler: async (c, { query }) => c.json(await page(auth.audit, { ...query, userId: c.get('authUser')!.userId })),
  });
