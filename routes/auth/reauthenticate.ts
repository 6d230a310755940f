import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import * as v from 'valibot';
import { MAX_PASSWORD_LENGTH } from '../../src/auth/passwords.ts';
import { AppError } from '../../src/http/errors.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { authenticationResponse } from './passkeys.ts';
import { code } from './totp.ts';

/**
 * `POST /auth/reauthenticate` (CONTRACT 10, step-up): the signed-in user proves who they are again
 * (the password, a TOTP code, or a passkey whose authenticator verified the user), and the session
 * may add a way in for `auth.session.freshAge` seconds. Wrong answers count like login failures
 * (the password under the login limits, codes under the per-user code limit).
 */
export const reauthenticate = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/reauthenticate',
    onRequest: auth.authenticate(),
    schema: {
      summary: 'Confirm it is you (step-up)',
      description:
        'Body `{"password"}`, `{"code"}` (TOTP) or `{"response"}` (a passkey assertion to the options of `POST /auth/login/passkey/options`, with user verification). 204: for `auth.session.freshAge` seconds the session may add a passkey, TOTP or an identity and turn TOTP off. 401 `invalid_credentials` | `invalid_code` | `invalid_passkey`; 429 `too_many_attempts`.',
      tags: ['account'],
      body: v.union([
        v.strictObject({ password: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PASSWORD_LENGTH)) }),
        v.strictObject({ code }),
        v.strictObject({ response: authenticationResponse }),
      ], 'must be one of {"password"}, {"code"} or {"response"}'),
    },
    handler: async (c, { body }) => {
      const session = c.get('session')!;
      const user = await auth.users.get(session.userId);
      if ('password' in body) {
        if (!user.passwordHash || (await auth.checkPassword(c, user.email, body.password))?._id !== user._id) {
          throw new AppError(401, 'invalid_credentials', 'The password is wrong');
        }
      } else if ('code' in body) {
        const codeTry = await auth.codeLimit.take(user._id);
        if (!(await auth.totp.verifyCode(user, body.code))) throw new AppError(401, 'invalid_code', 'The code is wrong or was already used');
        await codeTry.succeeded();
      } else {
        const proof = await auth.passkeys.authenticate(c, body.response as unknown as AuthenticationResponseJSON);
        if (proof.userId !== user._id) throw new AppError(401, 'invalid_passkey', 'The passkey was not accepted: it is not one of yours');
        if (!proof.userVerified) throw new AppError(401, 'invalid_passkey', 'The passkey was not accepted: the authenticator did not verify you (PIN or biometrics)');
      }
      await auth.sessions.markAuthenticated(session.hash);
      await auth.audit.record(c, { type: 'reauthenticated', subject: { userId: user._id, email: user.email }, details: { method: 'password' in body ? 'password' : 'code' in body ? 'totp' : 'passkey' } });
      return c.body(null, 204);
    },
  });
