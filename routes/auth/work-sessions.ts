import * as v from 'valibot';
import { toPublicWorkSession } from '../../src/auth/work-sessions.ts';
import { adminActor } from '../../src/audit/log.ts';
import { defineRoute } from '../../src/http/route.ts';
import { idParams, intQuery, plainRecord } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';

/**
 * Plugin keys as the loader names plugins: a folder key (`svc__todo`) or an npm package name
 * (`@svc/plugin-cli-connector`). No dots or `$`: the key becomes a document field name.
 */
const pluginKey = v.pipe(
  v.string(),
  v.maxLength(214),
  v.regex(/^(@[a-z0-9][a-z0-9_-]*\/)?[a-z0-9][a-z0-9_-]*$/, 'must be a plugin key such as svc__todo or @scope/name'),
);

/** Field names both databases store as given: none starting with `$` or containing `.`, at most 32 levels. */
function storable(value: unknown): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > 32) return false;
    for (const [key, child] of Object.entries(node)) {
      if (!Array.isArray(node) && (key.startsWith('$') || key.includes('.'))) return false;
      stack.push([child, depth + 1]);
    }
  }
  return true;
}

const pluginData = v.pipe(
  plainRecord(pluginKey, v.unknown()),
  v.check((data) => Object.keys(data).length > 0, 'needs at least one plugin key'),
  v.check((data: Record<string, unknown>) => storable(data), 'field names inside must not start with $ or contain a dot, and nest at most 32 levels'),
);

/** `2030-02-30` passes the format and `Date.parse` (it rolls over into March): check the day. */
function realDate(iso: string): boolean {
  const [y, m, d] = iso.slice(0, 10).split('-').map(Number) as [number, number, number];
  return !Number.isNaN(Date.parse(iso)) && new Date(Date.UTC(y, m - 1, d)).getUTCDate() === d;
}

/** An ISO 8601 date-time, stored as UTC with milliseconds; null: never expires. */
const expiresAt = v.nullable(
  v.pipe(
    v.string(),
    v.isoTimestamp('must be an ISO 8601 date-time such as 2030-01-31T12:00:00Z'),
    v.check(realDate, 'must be a real date'),
    v.transform((s) => new Date(s).toISOString()),
  ),
);

const label = v.pipe(v.string(), v.trim(), v.maxLength(200));

const createBody = v.strictObject({
  pluginData,
  composition: v.optional(v.nullable(v.pipe(v.string(), v.minLength(1), v.maxLength(128)))),
  expiresAt: v.optional(expiresAt),
  label: v.optional(label),
});

const patchBody = v.strictObject({
  isActive: v.optional(v.boolean()),
  expiresAt: v.optional(expiresAt),
  pluginData: v.optional(pluginData),
  label: v.optional(label),
});

const tags = ['work sessions'];

/** `POST /auth/work-sessions` (admin): a guest link's work session (CONTRACT section 6). */
export const createWorkSession = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/work-sessions',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataCreate' },
    schema: {
      summary: 'Create a work session (admin)',
      description:
        'Guests send its `id` as header `x-work-session-id` (HTTP) or `auth.sessionId` (socket.io) and may read the routes of the plugins named in `pluginData`.',
      tags,
      body: createBody,
    },
    handler: async (c, { body }) => {
      const created = toPublicWorkSession(await auth.workSessions.create(body));
      await auth.audit.record(c, { type: 'work_session.created', actor: adminActor(c), details: { workSessionId: created.id } });
      return c.json(created, 201);
    },
  });

export const listWorkSessions = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/work-sessions',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataList' },
    schema: {
      summary: 'List work sessions (admin)',
      tags,
      query: v.strictObject({ offset: intQuery(0, 0, 1_000_000_000), limit: intQuery(50, 1, 500) }),
    },
    handler: async (c, { query }) => {
      const { items, total } = await auth.workSessions.list(query);
      return c.json({ items: items.map(toPublicWorkSession), offset: query.offset, limit: query.limit, total });
    },
  });

export const getWorkSession = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/work-sessions/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataRead' },
    schema: { summary: 'One work session (admin)', tags, params: idParams },
    handler: async (c, { params }) => c.json(toPublicWorkSession(await auth.workSessions.get(params.id))),
  });

export const updateWorkSession = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'PATCH',
    path: '/auth/work-sessions/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataUpdate' },
    schema: {
      summary: 'Change a work session (admin)',
      description: '`isActive: false` or an `expiresAt` in the past ends guest access at once: the next request is refused and open sockets close within 5 s.',
      tags,
      params: idParams,
      body: patchBody,
    },
    handler: async (c, { params, body }) => {
      const updated = toPublicWorkSession(await auth.workSessions.update(params.id, body));
      await auth.audit.record(c, { type: 'work_session.updated', actor: adminActor(c), details: { workSessionId: updated.id, fields: Object.keys(body).filter((k) => body[k as keyof typeof body] !== undefined) } });
      return c.json(updated);
    },
  });

export const deleteWorkSession = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/work-sessions/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataDelete' },
    schema: { summary: 'Delete a work session and disconnect its guests (admin)', tags, params: idParams },
    handler: async (c, { params }) => {
      await auth.workSessions.delete(params.id);
      await auth.audit.record(c, { type: 'work_session.deleted', actor: adminActor(c), details: { workSessionId: params.id } });
      return c.body(null, 204);
    },
  });
