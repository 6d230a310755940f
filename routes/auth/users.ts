import * as v from 'valibot';
import { newPasswordSchema } from '../../src/auth/passwords.ts';
import { isAdmin, toPublicUser } from '../../src/auth/users.ts';
import { adminActor } from '../../src/audit/log.ts';
import { defineRoute } from '../../src/http/route.ts';
import { emailSchema, idParams, intQuery, nameSchema } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';

// Step-up (CONTRACT 10): an admin granting admin, setting another's password or deleting a user needs a
// session authenticated within `auth.session.freshAge`, so a stale or stolen admin cookie cannot mint a
// lasting admin login of its own. Reading and editing names do not.
const stepUp = '403 `reauthentication_required` (step-up) when a session not authenticated within `auth.session.freshAge`';

const createBody = v.strictObject({
  email: emailSchema,
  password: newPasswordSchema,
  firstname: v.optional(nameSchema),
  lastname: v.optional(nameSchema),
  isAdmin: v.optional(v.boolean()),
});

const patchBody = v.strictObject({
  firstname: v.optional(nameSchema),
  lastname: v.optional(nameSchema),
  password: v.optional(newPasswordSchema),
  isAdmin: v.optional(v.boolean()),
});

const tags = ['users'];

/** Admin user management (CONTRACT section 3): what operators use instead of editing the database. */
export const createUser = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/users',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataCreate' },
    schema: { summary: 'Create a user (admin)', description: `${stepUp} makes an admin.`, tags, body: createBody },
    handler: async (c, { body }) => {
      if (body.isAdmin) await auth.assertFresh(c);
      await auth.breachedPasswords.check(body.password);
      const user = await auth.users.create({ ...body, email_verified: false, createdVia: 'admin' });
      await auth.audit.record(c, { type: 'user.created', actor: adminActor(c), subject: { userId: user._id, email: user.email }, details: { via: 'admin', ...(isAdmin(user) ? { isAdmin: true } : {}) } });
      return c.json(toPublicUser(user), 201);
    },
  });

export const listUsers = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/users',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataList' },
    schema: {
      summary: 'List users (admin)',
      tags,
      query: v.strictObject({ offset: intQuery(0, 0, 1_000_000_000), limit: intQuery(50, 1, 500), email: v.optional(emailSchema) }),
    },
    handler: async (c, { query }) => {
      const { items, total } = await auth.users.list(query);
      return c.json({ items: items.map(toPublicUser), offset: query.offset, limit: query.limit, total });
    },
  });

export const getUser = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/users/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataRead' },
    schema: { summary: 'One user (admin)', tags, params: idParams },
    handler: async (c, { params }) => c.json(toPublicUser(await auth.users.get(params.id))),
  });

export const updateUser = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'PATCH',
    path: '/auth/users/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataUpdate' },
    schema: {
      summary: 'Change a user (admin)',
      description: `A new password ends the user's other sessions; \`isAdmin\` takes effect on the user's next request. ${stepUp} sets a password or changes \`isAdmin\`.`,
      tags,
      params: idParams,
      body: patchBody,
    },
    handler: async (c, { params, body }) => {
      if (body.password !== undefined || (body.isAdmin !== undefined && body.isAdmin !== isAdmin(await auth.users.get(params.id)))) await auth.assertFresh(c);
      const keep = c.get('authUser')!.userId === params.id ? c.get('session')?.hash : undefined; // no session: an admin's API key
      const user = await auth.updateUser(params.id, body, { keepSessionHash: keep }, c);
      const fields = Object.keys(body).filter((k) => body[k as keyof typeof body] !== undefined);
      await auth.audit.record(c, { type: 'user.updated', actor: adminActor(c), subject: { userId: user._id, email: user.email }, details: { fields } });
      return c.json(toPublicUser(user));
    },
  });

export const deleteUser = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/users/:id',
    onRequest: [auth.authenticate({ admin: true }), auth.requireFresh()],
    config: { type: 'dataDelete' },
    schema: { summary: 'Delete a user and end their sessions (admin)', description: `${stepUp}.`, tags, params: idParams },
    handler: async (c, { params }) => {
      const user = await auth.users.get(params.id);
      await auth.deleteUser(params.id, c);
      await auth.audit.record(c, { type: 'user.deleted', actor: adminActor(c), subject: { userId: user._id, email: user.email } });
      return c.body(null, 204);
    },
  });
