import type { Context } from 'hono';
import * as v from 'valibot';
import { issueApiKey } from '../../src/auth/api-keys.ts';
import { clientIp } from '../../src/auth/client-ip.ts';
import { DeviceTokenError } from '../../src/auth/device-flow.ts';
import { epochOf, isAdmin } from '../../src/auth/users.ts';
import type { AppEnv } from '../../src/http/env.ts';
import { AppError } from '../../src/http/errors.ts';
import { isoTime } from '../../src/http/iso-time.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { keyName, scopesSchema } from './api-keys.ts';

// Device login (RFC 8628, CONTRACT 15, docs/api-keys.md#device-login): a command-line tool asks for a
// code (public), the signed-in user approves it on the device page (step-up), the tool's poll gets an
// API key named after the request.

const tags = ['device'];
const userCode = v.pipe(v.string(), v.minLength(1), v.maxLength(32));
const noStore = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

/** `POST /auth/device/code`: a device code for a tool, and the user code the person enters. */
export const deviceCode = ({ auth, config }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/device/code',
    config: { public: true },
    schema: {
      summary: 'Start a device login (RFC 8628)',
      description:
        '`{"name","scopes"}` -> `{"device_code","user_code","verification_uri","verification_uri_complete","expires_in","interval"}`. The scopes are those routes declare (`auth:admin` only an admin may approve); unknown -> 400 `validation_failed`. 429 `too_many_attempts` past 30 codes per address in 15 minutes.',
      tags,
      body: v.strictObject({ name: keyName, scopes: scopesSchema }),
    },
    handler: async (c, { body }) => {
      const scopes = auth.apiKeys.checkScopes(body.scopes, true);
      return c.json(await auth.device.start({ name: body.name, scopes }, clientIp(c, config.server.trustProxy)), 200, noStore);
    },
  });

/** An RFC 8628 section 3.5 error answer, exactly CONTRACT 15's body (`{"error"}`). */
const rfcError = (c: Context<AppEnv>, err: DeviceTokenError) => c.json({ error: err.error }, 400, noStore);

/** `POST /auth/device/token`: the tool's poll; once approved, once only, the API key. */
export const deviceToken = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/device/token',
    config: { public: true },
    schema: {
      summary: 'Poll a device login (RFC 8628)',
      description:
        '`{"device_code"}` (`grant_type` `urn:ietf:params:oauth:grant-type:device_code` and `client_id` may come along) -> 200 `{"access_token":"svc_...","token_type":"Bearer","scope"}` once approved, once only; else 400 `{"error"}`: `authorization_pending`, `slow_down` (polled sooner than `interval`; add 5 s), `access_denied`, `expired_token`, `invalid_grant` (unknown or used).',
      tags,
      body: v.strictObject({
        // Any string: one that cannot be a device code is invalid_grant, as an unknown one (CONTRACT 15).
        device_code: v.string(),
        grant_type: v.optional(v.literal('urn:ietf:params:oauth:grant-type:device_code')),
        client_id: v.optional(v.pipe(v.string(), v.maxLength(128))),
      }),
    },
    handler: async (c, { body }) => {
      try {
        // The approval is claimed, not used up: it is taken only with its key made (issueApiKey's
        // `confirm`), so a failure on the way (503, 500) leaves it for the tool's next poll, and no key.
        const claim = await auth.device.poll(body.device_code);
        const approved = claim.request;
        let issued;
        try {
          const user = await auth.users.findById(approved.userId);
          if (!user || epochOf(user) !== approved.epoch) throw new DeviceTokenError('access_denied', 'The account changed since the approval: start again');
          issued = await issueApiKey(auth, c, user, { name: approved.name, scopes: approved.scopes }, async () => {
            if (!(await auth.device.take(claim))) throw new DeviceTokenError('invalid_grant', 'This device code was used already');
          });
          await auth.audit.record(c, { type: 'login.succeeded', actor: { type: 'user', id: user._id }, subject: { userId: user._id, email: user.email }, sessionId: null, details: { method: 'device', keyId: issued.view.id } });
        } catch (err) {
          // Too many keys meanwhile, a scope no longer declared, admin rights gone: this request cannot be served.
          const ended = err instanceof DeviceTokenError ? err : err instanceof AppError && err.status < 500 ? new DeviceTokenError('access_denied', err.message) : null;
          if (!ended) {
            await auth.device.release(claim); // the store or the database failed: the approval waits for the next poll
            throw err;
          }
          if (ended.error === 'access_denied') {
            // Reported once, as a denial is; a store failure here leaves it to the next poll.
            const taken = await auth.device.take(claim).catch(async (failed: unknown) => {
              await auth.device.release(claim);
              throw failed;
            });
            if (!taken) throw new DeviceTokenError('invalid_grant', 'This device code was used already');
          }
          throw ended;
        }
        return c.json({ access_token: issued.key, token_type: 'Bearer', scope: issued.view.scopes.join(' ') }, 200, noStore);
      } catch (err) {
        if (err instanceof DeviceTokenError) return rfcError(c, err);
        throw err;
      }
    },
  });

/** `GET /auth/device?user_code=`: what the device asks for, for the signed-in person to check. */
export const devicePending = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/device',
    onRequest: auth.authenticate(),
    schema: {
      summary: 'A device login waiting for its user code',
      description: '200 `{"name","scopes","createdAt"}`; 404 `not_found` (unknown, used or expired); wrong codes count: 10 per session per 15 minutes, then 429 `too_many_attempts`. The code in any case, with or without the hyphen.',
      tags,
      query: v.strictObject({ user_code: userCode }),
    },
    handler: async (c, { query }) => {
      const { request } = await auth.device.pending(query.user_code, c.get('session')!.hash);
      return c.json({ name: request.name, scopes: request.scopes, createdAt: isoTime(request.createdAt) });
    },
  });

/** `POST /auth/device/approve`: the signed-in user approves (step-up); the tool's next poll gets the key. */
export const approveDevice = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/device/approve',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: {
      summary: 'Approve a device login (step-up)',
      description: '`{"user_code"}` -> 204. 404 `not_found` (unknown, used, expired; counted as for `GET /auth/device`); 400 `validation_failed` for `auth:admin` asked of a non-admin; 409 `too_many_keys`; 403 `reauthentication_required`.',
      tags,
      body: v.strictObject({ user_code: userCode }),
    },
    handler: async (c, { body }) => {
      const found = await auth.device.pending(body.user_code, c.get('session')!.hash);
      const user = await auth.users.get(c.get('authUser')!.userId);
      auth.apiKeys.checkScopes(found.request.scopes, isAdmin(user));
      await auth.apiKeys.assertRoom(user._id);
      await auth.device.decide(found, { status: 'approved', userId: user._id, epoch: epochOf(user) });
      await auth.audit.record(c, { type: 'device.approved', subject: { userId: user._id, email: user.email }, details: { name: found.request.name, scopes: found.request.scopes } });
      return c.body(null, 204);
    },
  });

/** `POST /auth/device/deny`: the signed-in user refuses; the tool's next poll gets `access_denied`. */
export const denyDevice = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/device/deny',
    onRequest: auth.authenticate(),
    schema: { summary: 'Deny a device login', description: '`{"user_code"}` -> 204; 404 `not_found` as for approving.', tags, body: v.strictObject({ user_code: userCode }) },
    handler: async (c, { body }) => {
      const found = await auth.device.pending(body.user_code, c.get('session')!.hash);
      const userId = c.get('authUser')!.userId;
      await auth.device.decide(found, { status: 'denied', userId });
      await auth.audit.record(c, { type: 'device.denied', subject: { userId }, details: { name: found.request.name, scopes: found.request.scopes } });
      return c.body(null, 204);
    },
  });
