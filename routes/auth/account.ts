import * as v from 'valibot';
import { MAX_PASSWORD_LENGTH, newPasswordSchema } from '../../src/auth/passwords.ts';
import { epochOf } from '../../src/auth/users.ts';
import { AppError, notFound } from '../../src/http/errors.ts';
import { isoTime } from '../../src/http/iso-time.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

// Account self-service (CONTRACT section 10): what a signed-in user does without an admin.

const tags = ['account'];

/** `GET /auth/sessions`: the caller's live sessions, newest first, the current one marked. */
export const listOwnSessions = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/sessions',
    onRequest: auth.authenticate(),
    schema: {
      summary: 'Your live sessions',
      description: '`id` is an opaque public id (never the cookie value). `lastSeenAt` is precise to a minute.',
      tags,
    },
    handler: async (c) => {
      const current = c.get('session')!;
      const items = (await auth.sessions.list(current.userId)).map((s) => ({
        id: s.publicId,
        createdAt: isoTime(s.createdAt),
        lastSeenAt: isoTime(s.lastSeenAt),
        ip: s.ip ?? null,
        device: s.device ?? null,
        current: s.hash === current.hash,
      }));
      return c.json({ items });
    },
  });

/** `DELETE /auth/sessions/:id`: ends one of the caller's sessions, on every instance at once. */
export const endOwnSession = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/sessions/:id',
    onRequest: auth.authenticate(),
    schema: {
      summary: 'End one of your sessions',
      description: 'Ending the current session works like logout (the cookie is cleared).',
      tags,
      // Any id that is not one of the caller's live sessions is 404 (CONTRACT 10), a malformed one too.
      params: v.strictObject({ id: v.pipe(v.string(), v.maxLength(128)) }),
    },
    handler: async (c, { params }) => {
      const current = c.get('session')!;
      const ended = await auth.sessions.destroyByPublicId(current.userId, params.id);
      if (!ended) throw notFound('No live session of yours has this id');
      if (ended.hash === current.hash) auth.sessionCookie.clear(c);
      await auth.audit.record(c, { type: 'session.revoked', subject: { userId: current.userId }, sessionId: params.id, details: { reason: 'session_deleted' } });
      return c.body(null, 204);
    },
  });

const passwordBody = v.strictObject({
  currentPassword: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PASSWORD_LENGTH)),
  newPassword: newPasswordSchema,
});

/**
 * `POST /auth/password`: the caller changes their own password. The current password is checked
 * under the login limits (429 `too_many_attempts`); every other session of the user ends.
 */
export const changeOwnPassword = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/password',
    onRequest: auth.authenticate(),
    schema: {
      summary: 'Change your password',
      description: 'Ends every other session of yours. 401 `invalid_credentials` for a wrong current password, 409 `no_password` for an account without a password (made by an OAuth login, or a sign-up whose password a magic-link claim removed), 409 `account_changed` when a reset or a logout everywhere came between the check and the change (nothing changed).',
      tags,
      body: passwordBody,
    },
    handler: async (c, { body }) => {
      const current = c.get('session')!;
      const user = await auth.users.get(current.userId);
      if (!user.passwordHash) throw new AppError(409, 'no_password', 'This account has no password (it logs in with OAuth, a passkey or a mailed link): "Forgot password" sets one');
      if ((await auth.checkPassword(c, user.email, body.currentPassword))?._id !== user._id) {
        throw new AppError(401, 'invalid_credentials', 'The current password is wrong');
      }
      // Written only at the epoch the current password was checked at: a reset racing this keeps its password.
      await auth.updateUser(user._id, { password: body.newPassword }, { keepSessionHash: current.hash, epoch: epochOf(user) }, c);
      return c.body(null, 204);
    },
  });

/** `GET /auth/account/providers`: the OAuth identities connected to the caller. */
export const listConnectedAccounts = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/account/providers',
    onRequest: auth.authenticate(),
    schema: { summary: 'Your connected OAuth accounts', tags },
    handler: async (c) => c.json({ items: await auth.accounts.listFor(c.get('authUser')!.userId) }),
  });

/** Any id up to a bound: one no provider can have is simply not there, 404 (CONTRACT 10: unknown -> 404). */
const providerParam = v.pipe(v.string(), v.maxLength(200));

/**
 * `POST /auth/oauth/:provider/link`: the authorization URL that connects an identity of that
 * provider to the caller (providers without an email included). The callback links it, whatever
 * its email says, and redirects to the stored return path; another user's identity: `identity_in_use`.
 */
export const startConnect = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/oauth/:provider/link',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: {
      summary: 'Connect an OAuth account to yours',
      description: 'Answers `{"authorizationUrl"}`: send the browser there. The state is bound to this browser and to you. 403 `reauthentication_required` (step-up).',
      tags,
      params: v.strictObject({ provider: providerParam }),
    },
    handler: async (c, { params }) => {
      let authorizationUrl: string;
      try {
        authorizationUrl = await auth.oauth.start(c, params.provider, await auth.users.get(c.get('authUser')!.userId));
      } catch (err) {
        if ((err as { code?: string }).code === 'provider_not_found') throw notFound(`No enabled OAuth provider "${params.provider}"`);
        throw err;
      }
      c.header('Cache-Control', 'no-store');
      return c.json({ authorizationUrl });
    },
  });

/** `DELETE /auth/account/providers/:provider/:providerAccountId`: disconnects one identity. */
export const disconnectAccount = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/account/providers/:provider/:providerAccountId',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: {
      summary: 'Disconnect one of your OAuth accounts',
      description: '409 `last_login_method` when it is your only way to log in; 403 `reauthentication_required` (step-up).',
      tags,
      params: v.strictObject({ provider: providerParam, providerAccountId: v.pipe(v.string(), v.minLength(1), v.maxLength(256)) }),
    },
    handler: async (c, { params }) => {
      const userId = c.get('authUser')!.userId;
      await auth.waysIn.disconnect(userId, params.provider, params.providerAccountId);
      await auth.audit.record(c, { type: 'oauth.unlinked', subject: { userId }, details: { providerId: params.provider } });
      return c.body(null, 204);
    },
  });
