import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import * as v from 'valibot';
import { AppError } from '../../src/http/errors.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { totpEnabled } from '../../src/auth/totp.ts';
import { epochOf } from '../../src/auth/users.ts';
import { startSession } from './session.ts';

// Passkeys (CONTRACT section 11): register while signed in, log in without a password.

const tags = ['passkeys'];
const b64url = (max: number) => v.pipe(v.string(), v.maxLength(max), v.regex(/^[A-Za-z0-9_-]*={0,2}$/, 'must be base64url'));
/** The browser's JSON of a credential (`PublicKeyCredential.toJSON()`, @simplewebauthn/browser): bounded, extra fields kept. */
const credentialJson = (response: v.GenericSchema) =>
  v.looseObject({
    id: b64url(1024),
    rawId: b64url(1024),
    type: v.literal('public-key'),
    response,
    clientExtensionResults: v.optional(v.record(v.string(), v.unknown()), {}),
    authenticatorAttachment: v.nullish(v.pipe(v.string(), v.maxLength(32))),
  });
const registrationResponse = credentialJson(
  v.looseObject({ clientDataJSON: b64url(8192), attestationObject: b64url(65536), transports: v.optional(v.array(v.pipe(v.string(), v.maxLength(32)))) }),
);
// A signature of 8192 characters: @simplewebauthn offers ML-DSA-44 (post-quantum, 2420-byte signatures:
// 3227 characters) first where the runtime's Web Crypto has it (Bun does), and a browser that has it too picks it.
export const authenticationResponse = credentialJson(
  v.looseObject({ clientDataJSON: b64url(8192), authenticatorData: b64url(8192), signature: b64url(8192), userHandle: v.nullish(b64url(1024)) }),
);
const name = v.pipe(v.string(), v.trim(), v.minLength(1), v.maxLength(64));
// Like a session id: anything that is not one of the caller's passkeys is 404, a malformed id too.
const idParams = v.object({ id: v.pipe(v.string(), v.maxLength(128)) });

/** `POST /auth/passkeys/options`: creation options for a new passkey of the signed-in user. */
export const passkeyRegistrationOptions = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/passkeys/options',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    config: { optionalBody: true },
    schema: { summary: 'Options to create a passkey (navigator.credentials.create)', description: 'WebAuthn creation options (JSON form); the challenge works once, for 5 minutes, from this session.', tags, body: v.strictObject({}) },
    handler: async (c) => c.json(await auth.passkeys.registrationOptions(await auth.users.get(c.get('authUser')!.userId), c.get('session')!.hash)),
  });

/** `POST /auth/passkeys`: saves the passkey the browser created from those options. */
export const registerPasskey = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/passkeys',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: {
      summary: 'Save a new passkey',
      description: '`response`: the browser\'s RegistrationResponseJSON. 201 `{"id","name","createdAt"}`; 400 `invalid_passkey` (no pending options, wrong challenge, origin or RP id, the account changed since the options); 409 `passkey_exists`; 403 `reauthentication_required` (step-up).',
      tags,
      body: v.strictObject({ response: registrationResponse, name: v.optional(name) }),
    },
    handler: async (c, { body }) => {
      const userId = c.get('authUser')!.userId;
      const created = await auth.waysIn.addPasskey(userId, c.get('session')!.hash, body.response as unknown as RegistrationResponseJSON, body.name);
      await auth.audit.record(c, { type: 'passkey.added', subject: { userId }, details: { passkeyId: created.id, name: created.name } });
      return c.json({ id: created.id, name: created.name, createdAt: created.createdAt }, 201);
    },
  });

/** `GET /auth/passkeys`: the caller's passkeys. */
export const listPasskeys = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/passkeys',
    onRequest: auth.authenticate(),
    schema: { summary: 'Your passkeys', description: '`{"items":[{"id","name","createdAt","lastUsedAt"}]}`', tags },
    handler: async (c) => c.json({ items: await auth.passkeys.list(c.get('authUser')!.userId) }),
  });

/** `PATCH /auth/passkeys/:id`: renames one. */
export const renamePasskey = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'PATCH',
    path: '/auth/passkeys/:id',
    onRequest: auth.authenticate(),
    schema: { summary: 'Rename a passkey', tags, params: idParams, body: v.strictObject({ name }) },
    handler: async (c, { params, body }) => c.json(await auth.passkeys.rename(c.get('authUser')!.userId, params.id, body.name)),
  });

/** `DELETE /auth/passkeys/:id`: removes one (not the last way to log in). */
export const deletePasskey = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/passkeys/:id',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: { summary: 'Remove a passkey', description: '404 `not_found` for an id that is not one of yours; 409 `last_login_method` for your only way to log in; 403 `reauthentication_required` (step-up).', tags, params: idParams },
    handler: async (c, { params }) => {
      const userId = c.get('authUser')!.userId;
      await auth.waysIn.removePasskey(userId, params.id);
      await auth.audit.record(c, { type: 'passkey.removed', subject: { userId }, details: { passkeyId: params.id } });
      return c.body(null, 204);
    },
  });

/** `POST /auth/login/passkey/options`: request options for any passkey of this site (no email needed). */
export const passkeyLoginOptions = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/login/passkey/options',
    config: { public: true, optionalBody: true },
    schema: {
      summary: 'Options to log in with a passkey (navigator.credentials.get)',
      description: 'WebAuthn request options (discoverable credentials); the challenge is bound to this browser by the HttpOnly cookie `svc_passkey` and works once, for 5 minutes.',
      tags,
      body: v.strictObject({}),
    },
    handler: async (c) => c.json(await auth.passkeys.loginOptions(c)),
  });

/**
 * `POST /auth/login/passkey`: logs in like a password login. A passkey whose authenticator verified
 * the user (UV) is both factors; without UV, a user with TOTP on gets the second step (`mfaRequired`)
 * like after a password (CONTRACT 11).
 */
export const loginPasskey = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/login/passkey',
    config: { public: true, type: 'authLogin' },
    schema: {
      summary: 'Log in with a passkey',
      description: '`response`: the browser\'s AuthenticationResponseJSON. Answers like `POST /auth/login` (a user with TOTP on and an authenticator that did not verify the user: `{"mfaRequired":true}`, then `POST /auth/login/totp`); 401 `invalid_passkey` for anything wrong (no pending options in this browser, unknown passkey, wrong origin or RP id, a bad signature, a counter that went back).',
      tags,
      body: v.strictObject({ response: authenticationResponse }),
    },
    handler: async (c, { body }) => {
      let subject = {};
      const { user, userVerified } = await auth.audit.loginAttempt(c, () => subject, async () => {
        const { userId, passkeyId, userVerified } = await auth.passkeys.authenticate(c, body.response as unknown as AuthenticationResponseJSON);
        subject = { userId };
        const user = await auth.users.findById(userId);
        // Read the user (its epoch) before checking the passkey is still there: a removal that races
        // this login either shows here or moves the epoch that `Auth.login` checks again.
        if (!user || !(await auth.passkeys.exists(passkeyId))) throw new AppError(401, 'invalid_passkey', 'The passkey was not accepted: it or its user is gone');
        return { user, userVerified };
      });
      if (totpEnabled(user) && !userVerified) {
        await auth.startSecondStep(c, { userId: user._id, epoch: epochOf(user), provider: 'passkey' });
        return c.json({ mfaRequired: true });
      }
      // Without UV the session is no proof for step-up, as `POST /auth/reauthenticate` refuses such an assertion.
      return startSession(c, auth, user, 'passkey', { proven: userVerified, refused: () => new AppError(401, 'invalid_passkey', 'The passkey was not accepted: the account changed during the login; try again') });
    },
  });
