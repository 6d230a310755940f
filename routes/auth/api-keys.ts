import * as v from 'valibot';
import { issueApiKey } from '../../src/auth/api-keys.ts';
import { adminActor } from '../../src/audit/log.ts';
import { notFound } from '../../src/http/errors.ts';
import { defineRoute } from '../../src/http/route.ts';
import { idParams } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';

// API keys (CONTRACT 15, docs/api-keys.md): a user's own, made with step-up; listed without the key.
// None of these routes takes a key itself: a key cannot make, list or revoke keys.

const tags = ['api-keys'];

/** A key's name: one line, 1-64 characters. */
export const keyName = v.pipe(v.string(), v.trim(), v.minLength(1), v.maxLength(64), v.regex(/^\P{Cc}*$/u, 'must not hold line breaks or control characters'));
/** Scopes a key asks for: `<pluginKey>:<action>` or `auth:admin`, checked against what the routes declare. */
export const scopesSchema = v.pipe(v.array(v.pipe(v.string(), v.minLength(1), v.maxLength(128))), v.maxLength(50));

const createBody = v.strictObject({
  name: keyName,
  scopes: scopesSchema,
  expiresAt: v.optional(
    v.nullable(
      v.pipe(
        v.string(),
        v.isoTimestamp('must be an ISO 8601 time'),
        v.check((at) => Date.parse(at) > Date.now(), 'must be in the future'),
        v.transform((at) => new Date(at).toISOString()),
      ),
    ),
  ),
});

const keyParams = v.object({ id: v.pipe(v.string(), v.minLength(1), v.maxLength(128)), keyId: v.pipe(v.string(), v.minLength(1), v.maxLength(128)) });

/** `POST /auth/api-keys`: a new key of the caller, shown once (step-up). */
export const createApiKey = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/api-keys',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    config: { type: 'dataCreate' },
    schema: {
      summary: 'Make an API key',
      description:
        '201 `{"id","name","key","prefix","scopes","createdAt","expiresAt"}`: `key` (`svc_...`) is shown this once. Scopes: those the loaded routes declare (`<pluginKey>:<action>`), and `auth:admin` for admins; any other -> 400 `validation_failed`. 409 `too_many_keys` past `auth.apiKeys.maxPerUser`; 403 `reauthentication_required` (step-up).',
      tags,
      body: createBody,
    },
    handler: async (c, { body }) => {
      const user = await auth.users.get(c.get('authUser')!.userId);
      const { key, view } = await issueApiKey(auth, c, user, body);
      const { lastUsedAt: _, ...shown } = view;
      return c.json({ ...shown, key }, 201);
    },
  });

/** `GET /auth/api-keys`: the caller's keys, without the keys. */
export const listApiKeys = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/api-keys',
    onRequest: auth.authenticate(),
    config: { type: 'dataList' },
    schema: { summary: 'Your API keys', description: '`{"items":[{"id","name","prefix","scopes","createdAt","expiresAt","lastUsedAt"}]}`', tags },
    handler: async (c) => c.json({ items: await auth.apiKeys.list(c.get('authUser')!.userId) }),
  });

/** `DELETE /auth/api-keys/:id`: revokes one of the caller's keys, on every instance within a second. */
export const deleteApiKey = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/api-keys/:id',
    onRequest: auth.authenticate(),
    config: { type: 'dataDelete' },
    schema: { summary: 'Revoke one of your API keys', description: '204; 404 `not_found` when it is not one of yours.', tags, params: idParams },
    handler: async (c, { params }) => {
      const userId = c.get('authUser')!.userId;
      if (!(await auth.apiKeys.revoke(userId, params.id))) throw notFound('No API key of yours has this id');
      await auth.audit.record(c, { type: 'api_key.revoked', subject: { userId }, details: { keyId: params.id, reason: 'revoked' } });
      return c.body(null, 204);
    },
  });

/** `GET /auth/users/:id/api-keys` (admin): a user's keys. */
export const listUserApiKeys = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/users/:id/api-keys',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataList' },
    schema: { summary: "A user's API keys (admin)", description: '`{"items":[...]}` as `GET /auth/api-keys`; 404 `not_found` for an unknown user.', tags: ['users'], params: idParams },
    handler: async (c, { params }) => {
      const user = await auth.users.get(params.id);
      return c.json({ items: await auth.apiKeys.list(user._id) });
    },
  });

/** `DELETE /auth/users/:id/api-keys/:keyId` (admin): revokes one key of a user. */
export const deleteUserApiKey = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/users/:id/api-keys/:keyId',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataDelete' },
    schema: { summary: "Revoke a user's API key (admin)", description: '204; 404 `not_found` when the user has no such key.', tags: ['users'], params: keyParams },
    handler: async (c, { params }) => {
      if (!(await auth.apiKeys.revoke(params.id, params.keyId))) throw notFound('This user has no API key with this id');
      await auth.audit.record(c, { type: 'api_key.revoked', actor: adminActor(c), subject: { userId: params.id }, details: { keyId: params.keyId, reason: 'admin' } });
      return c.body(null, 204);
    },
  });
