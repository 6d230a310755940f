import * as v from 'valibot';
import { totpEnabled } from '../../src/auth/totp.ts';
import { adminActor } from '../../src/audit/log.ts';
import { notFound } from '../../src/http/errors.ts';
import { isoTime } from '../../src/http/iso-time.ts';
import { defineRoute } from '../../src/http/route.ts';
import { idParams } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';

// What an admin sees and ends of a user's access (CONTRACT 16: "a user's sessions, ways in and API keys,
// ending them"): the admin console's user page. Sessions are shown as `GET /auth/sessions` shows one's
// own (the opaque public id, never the cookie value or the store hash); ways in say what exists, never a
// secret (no password hash, no TOTP secret, no passkey public key).

const tags = ['users'];

const sessionParams = v.strictObject({
  id: idParams.entries.id,
  // Any id that is not one of the user's live sessions is 404, a malformed one too (as `DELETE /auth/sessions/:id`).
  sessionId: v.pipe(v.string(), v.minLength(1), v.maxLength(128)),
});

/** `GET /auth/users/:id/sessions` (admin): a user's live sessions, newest first. */
export const listUserSessions = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/users/:id/sessions',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataList' },
    schema: {
      summary: "A user's live sessions (admin)",
      description: '`{"items":[{"id","createdAt","lastSeenAt","ip","device"}]}`, newest first, as `GET /auth/sessions` (`id` is the opaque public id). 404 `not_found` for an unknown user.',
      tags,
      params: idParams,
    },
    handler: async (c, { params }) => {
      const user = await auth.users.get(params.id);
      const items = (await auth.sessions.list(user._id)).map((s) => ({
        id: s.publicId,
        createdAt: isoTime(s.createdAt),
        lastSeenAt: isoTime(s.lastSeenAt),
        ip: s.ip ?? null,
        device: s.device ?? null,
      }));
      return c.json({ items });
    },
  });

/** `DELETE /auth/users/:id/sessions/:sessionId` (admin): ends one session of a user, on every instance at once. */
export const endUserSession = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/users/:id/sessions/:sessionId',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataDelete' },
    schema: {
      summary: "End one of a user's sessions (admin)",
      description: "204; 404 `not_found` for an unknown user or an id that is not one of the user's live sessions. Audited `session.revoked` (reason `admin`).",
      tags,
      params: sessionParams,
    },
    handler: async (c, { params }) => {
      const user = await auth.users.get(params.id);
      const ended = await auth.sessions.destroyByPublicId(user._id, params.sessionId);
      if (!ended) throw notFound('This user has no live session with this id');
      // The admin's own current session: ended like a logout (the cookie goes too).
      if (ended.hash === c.get('session')?.hash) auth.sessionCookie.clear(c);
      await auth.audit.record(c, { type: 'session.revoked', actor: adminActor(c), subject: { userId: user._id, email: user.email }, sessionId: params.sessionId, details: { reason: 'admin' } });
      return c.body(null, 204);
    },
  });

/** `DELETE /auth/users/:id/sessions` (admin): ends every session of a user, and what is half-finished (a second step). */
export const endUserSessions = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/users/:id/sessions',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataDelete' },
    schema: {
      summary: "End every session of a user (admin)",
      description:
        "204; 404 `not_found` for an unknown user. The user's credentials epoch moves (a pending second step or link dies), then every session ends, one `session.revoked` record each (reason `admin`). API keys stay (revoke them one by one).",
      tags,
      params: idParams,
    },
    handler: async (c, { params }) => {
      const user = await auth.users.get(params.id);
      await auth.users.advanceEpoch(user._id);
      await auth.endAllSessions(user._id, { reason: 'admin', c, actor: adminActor(c) });
      if (user._id === c.get('authUser')?.userId && c.get('session')) auth.sessionCookie.clear(c);
      return c.body(null, 204);
    },
  });

/** `GET /auth/users/:id/ways-in` (admin): how a user can log in, without any secret. */
export const userWaysIn = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/users/:id/ways-in',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataRead' },
    schema: {
      summary: "A user's ways in (admin)",
      description:
        '`{"password":bool,"totp":bool,"passkeys":[{"id","name","createdAt","lastUsedAt"}],"providers":[{"provider","providerAccountId","email","linkedAt"}]}`: whether a password is set and TOTP is on, the passkeys and the connected OAuth accounts. No secret. 404 `not_found` for an unknown user.',
      tags,
      params: idParams,
    },
    handler: async (c, { params }) => {
      const user = await auth.users.get(params.id);
      const [passkeys, providers] = await Promise.all([auth.passkeys.list(user._id), auth.accounts.listFor(user._id)]);
      return c.json({ password: user.passwordHash !== undefined, totp: totpEnabled(user), passkeys, providers });
    },
  });
