import * as v from 'valibot';
import { captchaTokenSchema } from '../../src/defences/captcha.ts';
import { MAX_PASSWORD_LENGTH, newPasswordSchema } from '../../src/auth/passwords.ts';
import { invalidToken } from '../../src/auth/self-service.ts';
import { totpEnabled } from '../../src/auth/totp.ts';
import { epochOf } from '../../src/auth/users.ts';
import { defineRoute } from '../../src/http/route.ts';
import { emailSchema, nameSchema } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { startSession } from './session.ts';

// Sign-up, verification, password reset and magic links (CONTRACT 12). Every route is public, needs
// SVC_SMTP_URL (else 501 `email_not_configured`) and counts toward one per-IP limit (100 per 15 min).
// The routes that take an address answer 202 `{}` whoever it belongs to; the mail goes out later.

const tags = ['email'];
/** Any string a link may carry: a wrong one is 400 `invalid_token` like a used one, not a validation error. */
const token = v.pipe(v.string(), v.maxLength(512));

const accepted = 'Answers 202 `{}` for a known and an unknown address alike (at most 3 mails per address per 15 minutes). 501 `email_not_configured`, 429 `too_many_attempts`.';

/** `POST /auth/password/forgot`: a reset link to the address, if it has an account. */
export const forgotPassword = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/password/forgot',
    onRequest: auth.email.guard(),
    config: { public: true },
    schema: { summary: 'Ask for a password reset link', description: accepted, tags, body: v.strictObject({ email: emailSchema, captchaToken: captchaTokenSchema }) },
    handler: async (c, { body }) => {
      await auth.captcha.requireFor(c, body.email, body.captchaToken);
      await auth.email.forgot(body.email);
      return c.json({}, 202);
    },
  });

/** `POST /auth/password/reset`: the token of the mail and a new password. */
export const resetPassword = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/password/reset',
    onRequest: auth.email.guard(),
    config: { public: true },
    schema: {
      summary: 'Set a new password with the token of a reset mail',
      description: 'Ends every session of the user; the email counts as verified; TOTP stays on. 400 `invalid_token` (bad, used, expired after 30 minutes, or the password changed since), 400 `validation_failed` for a weak password (the token stays usable).',
      tags,
      body: v.strictObject({ token, newPassword: newPasswordSchema }),
    },
    handler: async (c, { body }) => {
      await auth.email.reset(c, body.token, body.newPassword);
      return c.body(null, 204);
    },
  });

/**
 * `POST /auth/password/reset/check`: whether the token of a reset mail still works, without using it,
 * so the page can offer a new link before asking for a password. The token travels in the body, never
 * in a URL (logs, Referer).
 */
export const checkResetToken = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/password/reset/check',
    onRequest: auth.email.guard(),
    config: { public: true },
    schema: {
      summary: 'Check the token of a reset mail without using it',
      description: '204 when `POST /auth/password/reset` would take the token now; the token stays usable. 400 `invalid_token` (bad, used, expired after 30 minutes, or the password changed since).',
      tags,
      body: v.strictObject({ token }),
    },
    handler: async (c, { body }) => {
      await auth.email.checkReset(body.token);
      return c.body(null, 204);
    },
  });

/** `POST /auth/signup` (`auth.signup.enabled`). */
export const signup = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/signup',
    onRequest: auth.email.guard('signup'),
    config: { public: true },
    schema: {
      summary: 'Sign up',
      description: `A new address: an unverified user and a verification mail; a known one: nothing changes and its owner gets a mail. ${accepted} 403 \`signup_disabled\`.`,
      tags,
      body: v.strictObject({ email: emailSchema, password: newPasswordSchema, firstname: v.optional(nameSchema), lastname: v.optional(nameSchema), captchaToken: captchaTokenSchema }),
    },
    handler: async (c, { body: { captchaToken, ...body } }) => {
      await auth.captcha.requireFor(c, body.email, captchaToken);
      await auth.email.signup(c, body);
      return c.json({}, 202);
    },
  });

/** `POST /auth/email/verify/request`: a new verification mail. */
export const requestVerification = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/email/verify/request',
    onRequest: auth.email.guard(),
    config: { public: true },
    schema: { summary: 'Ask for a verification mail', description: `A mail only to an existing user whose email is not verified. ${accepted}`, tags, body: v.strictObject({ email: emailSchema }) },
    handler: async (c, { body }) => {
      await auth.email.requestVerification(body.email);
      return c.json({}, 202);
    },
  });

/** `POST /auth/email/verify`: the token of a verification mail. */
export const verifyEmail = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/email/verify',
    onRequest: auth.email.guard(),
    config: { public: true },
    schema: {
      summary: 'Verify an email address',
      description:
        '200 `{"email","emailVerified":true}`. A sign-up verified from the browser that signed up (its `svc_signup` cookie) or with the sign-up\'s `password` keeps that password; any other verification is a claim by the mailbox\'s owner: the sign-up\'s password and every way in added since are removed, and the answer adds `"passwordResetToken"` (single use, 30 minutes) for `POST /auth/password/reset`. 400 `invalid_token` (bad, used, or older than 24 hours); 401 `invalid_credentials` (a wrong `password`: nothing changes, counted like a failed login); 429 `too_many_attempts`.',
      tags,
      body: v.strictObject({ token, password: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PASSWORD_LENGTH))) }),
    },
    handler: async (c, { body }) => {
      const { user, passwordResetToken } = await auth.email.verify(c, body.token, body.password);
      c.header('Cache-Control', 'no-store');
      return c.json({ email: user.email, emailVerified: true as const, ...(passwordResetToken ? { passwordResetToken } : {}) });
    },
  });

/** `POST /auth/login/link` (`auth.magicLink.enabled`): a login link by mail, bound to this browser. */
export const requestMagicLink = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/login/link',
    onRequest: auth.email.guard('magicLink'),
    config: { public: true },
    schema: {
      summary: 'Ask for a login link',
      description: `Sets the HttpOnly \`svc_magic\` cookie (10 minutes): the link works only in this browser. No account is created. ${accepted} 403 \`magic_link_disabled\`.`,
      tags,
      body: v.strictObject({ email: emailSchema, captchaToken: captchaTokenSchema }),
    },
    handler: async (c, { body }) => {
      await auth.captcha.requireFor(c, body.email, body.captchaToken);
      await auth.email.startMagicLink(c, body.email);
      return c.json({}, 202);
    },
  });

/** `POST /auth/login/link/verify`: the token of the login mail, from the browser that asked. */
export const useMagicLink = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/login/link/verify',
    onRequest: auth.email.guard('magicLink'),
    config: { public: true, type: 'authLogin' },
    schema: {
      summary: 'Log in with the token of a login mail',
      description: 'Answers like a password login, or `{"mfaRequired":true}` when TOTP is on. 400 `invalid_token` (bad, used, expired after 10 minutes, or another browser).',
      tags,
      body: v.strictObject({ token }),
    },
    handler: async (c, { body }) => {
      const user = await auth.email.useMagicLink(c, body.token);
      if (totpEnabled(user)) {
        await auth.startSecondStep(c, { userId: user._id, epoch: epochOf(user), provider: 'email' });
        return c.json({ mfaRequired: true });
      }
      return startSession(c, auth, user, 'email', { refused: invalidToken }); // a link spent by an account change
    },
  });
