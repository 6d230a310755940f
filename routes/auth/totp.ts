import * as v from 'valibot';
import { MAX_PASSWORD_LENGTH } from '../../src/auth/passwords.ts';
import { expired } from '../../src/auth/mfa.ts';
import { totpEnabled } from '../../src/auth/totp.ts';
import { epochOf } from '../../src/auth/users.ts';
import { AppError } from '../../src/http/errors.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { startSession } from './session.ts';

// TOTP second factor (CONTRACT section 10): enrol, confirm, disable, and the second login step.

const tags = ['account'];
export const code = v.pipe(v.string(), v.regex(/^\d{6}$/, 'must be the 6-digit code of the authenticator app'));
const recoveryCode = v.pipe(v.string(), v.minLength(1), v.maxLength(32));

/** `POST /auth/totp/enroll`: a new secret, pending until a first code confirms it. */
export const enrollTotp = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/totp/enroll',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: {
      summary: 'Start turning on two-factor authentication',
      description: '`otpauthUri` and `qrCode` (an SVG data URL, `data:image/svg+xml;base64,...`) for an authenticator app. Enrolling again replaces a pending secret; 409 `totp_enabled` when it is already on; 403 `reauthentication_required` for a session not authenticated within `auth.session.freshAge`.',
      tags,
    },
    handler: async (c) => {
      c.header('Cache-Control', 'no-store');
      return c.json(await auth.totp.enroll(await auth.users.get(c.get('authUser')!.userId)));
    },
  });

/** `POST /auth/totp/confirm`: the first code turns TOTP on; the recovery codes are shown this once. */
export const confirmTotp = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/totp/confirm',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: {
      summary: 'Confirm two-factor authentication with a first code',
      description: 'Answers 10 single-use recovery codes, shown only here. 400 `invalid_code` for a wrong code; 429 `too_many_attempts` (wrong codes count toward the per-user limit of the second login step); 403 `reauthentication_required` (step-up).',
      tags,
      body: v.strictObject({ code }),
    },
    handler: async (c, { body }) => {
      const userId = c.get('authUser')!.userId;
      // Counted before the code is checked (CONTRACT 10), like every other place a code is checked.
      const codeTry = await auth.codeLimit.take(userId);
      const recoveryCodes = await auth.totp.confirm(await auth.users.get(userId), body.code);
      await codeTry.succeeded();
      await auth.refreshSessions(userId);
      await auth.audit.record(c, { type: 'totp.enabled', subject: { userId } });
      c.header('Cache-Control', 'no-store');
      return c.json({ recoveryCodes });
    },
  });

/** `DELETE /auth/totp`: turns TOTP off with a current code or the password (a fresh session only). */
export const disableTotp = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/totp',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: {
      summary: 'Turn two-factor authentication off',
      description:
        'Body `{"code"}` (a current code) or `{"password"}`. 400 `invalid_code`, 401 `invalid_credentials`, 409 `totp_not_enabled`, 409 `account_changed` (a reset or another change of your ways in came meanwhile: TOTP stays on), 429 `too_many_attempts` (wrong codes count toward the per-user limit of the second login step), 403 `reauthentication_required`.',
      tags,
      body: v.union([v.strictObject({ code }), v.strictObject({ password: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PASSWORD_LENGTH)) })], 'must be one of {"code"} or {"password"}'),
    },
    handler: async (c, { body }) => {
      const user = await auth.users.get(c.get('authUser')!.userId);
      if (!totpEnabled(user)) throw new AppError(409, 'totp_not_enabled', 'Two-factor authentication is not on');
      if ('code' in body) {
        const codeTry = await auth.codeLimit.take(user._id);
        if (!(await auth.totp.verifyCode(user, body.code))) throw new AppError(400, 'invalid_code', 'The code is wrong or was already used');
        await codeTry.succeeded();
      } else if ((await auth.checkPassword(c, user.email, body.password))?._id !== user._id) {
        throw new AppError(401, 'invalid_credentials', 'The password is wrong');
      }
      await auth.totp.disable(user);
      await auth.refreshSessions(user._id);
      await auth.audit.record(c, { type: 'totp.disabled', subject: { userId: user._id, email: user.email } });
      auth.email.notify(user, 'totpDisabled');
      return c.body(null, 204);
    },
  });

/** `POST /auth/login/totp`: the second step of a login with TOTP on. */
export const loginTotp = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/login/totp',
    config: { public: true, type: 'authLogin' },
    schema: {
      summary: 'Finish a login with a TOTP or recovery code',
      description:
        'Needs the `svc_mfa` cookie of `POST /auth/login` (`{"mfaRequired":true}`) or of an OAuth callback that redirected to `/login?mfa=totp`. Answers like a password login (OAuth: plus `returnTo`). 401 `invalid_code` (5 codes checked end the login), 401 `mfa_expired`, 429 `too_many_attempts` (10 codes per user in 15 minutes).',
      tags: ['auth'],
      body: v.union([v.strictObject({ code }), v.strictObject({ recoveryCode })], 'must be one of {"code"} or {"recoveryCode"}'),
    },
    handler: async (c, { body }) => {
      const pending = await auth.mfa.current(c);
      const user = await auth.users.findById(pending.userId);
      // Any lifecycle event since the first step (a claim, a reset, TOTP off and on) ends this login.
      if (!user || epochOf(user) !== pending.epoch) {
        await auth.mfa.end(c);
        throw expired();
      }
      const subject = { userId: user._id, email: user.email };
      // Both counted before the code is checked (CONTRACT 10): parallel codes cannot outrun the limits.
      const { tries, codeTry } = await auth.audit.loginAttempt(c, () => subject, async () => ({ tries: await auth.mfa.countTry(c), codeTry: await auth.codeLimit.take(user._id) }));
      const held = await auth.mfa.hold(c);
      const recovery = 'code' in body ? null : await auth.totp.useRecoveryCode(user, body.recoveryCode);
      try {
        const ok = 'code' in body ? await auth.totp.verifyCode(user, body.code) : recovery !== null;
        if (!ok) await auth.audit.loginAttempt(c, () => subject, () => auth.mfa.wrong(c, held, tries));
        await codeTry.succeeded();
        await auth.mfa.end(c);
        // An account change since the first step (the epoch check above raced it) ends this login: mfa_expired, as above.
        const mfa = recovery ? 'recovery_code' : 'totp';
        const answer = await startSession(c, auth, user, held.provider, { returnTo: held.returnTo, refused: expired, mfa });
        if (recovery) await auth.audit.record(c, { type: 'recovery_code.used', actor: { type: 'user', id: user._id }, subject });
        return answer;
      } catch (err) {
        // No session came of it (an account change, the store failing): the code is still the user's.
        // A give-back that fails too must not hide the answer.
        await recovery?.giveBack().catch(() => {});
        throw err;
      }
    },
  });
