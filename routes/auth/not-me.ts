import * as v from 'valibot';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

/**
 * `POST /auth/not-me` (public, CONTRACT 14): the token of a new-device notice's "this wasn't me" link.
 * The frontend's page (`auth.email.paths.notMe`) POSTs it; a GET never uses it (mail scanners follow links).
 */
export const notMe = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/not-me',
    config: { public: true },
    schema: {
      summary: 'Report a new-device login that was not you',
      description:
        '204: the session that login made ends, and every session the same device (`svc_device`) made since; the password stops working until a reset (a right password: 403 `password_reset_required`; a reset link is mailed), pending second steps and link flows die, API keys are revoked. 400 `invalid_token` (bad, used, or older than 7 days).',
      tags: ['auth'],
      body: v.strictObject({ token: v.pipe(v.string(), v.maxLength(512)) }),
    },
    handler: async (c, { body }) => {
      await auth.devices.notMe(c, body.token);
      return c.body(null, 204);
    },
  });
