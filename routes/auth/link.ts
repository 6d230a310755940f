import { OAuthFlowError } from '../../src/auth/oauth/client.ts';
import { AppError } from '../../src/http/errors.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

const tags = ['oauth'];
const noPendingLink = () => new AppError(404, 'no_pending_link', 'There is no pending account link for you');

/**
 * `GET /auth/link/confirm`: the pending link of the logged-in user (CONTRACT section 5), only in the
 * browser that ran that OAuth flow; with the identity's account id and display name to recognise it.
 */
export const getPendingLink = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/link/confirm',
    onRequest: auth.authenticate(),
    schema: { summary: 'The pending OAuth account link', description: 'Only in the browser that ran the OAuth flow (cookie `svc_pending_link`), and only for the user the identity claims to be.', tags },
    handler: async (c) => {
      const pending = await auth.oauth.pendingLink(c, c.get('authUser')!.userId);
      if (!pending) throw noPendingLink();
      return c.json({ provider: pending.provider, email: pending.email, expiresAt: pending.expiresAt, providerAccountId: pending.providerAccountId, name: pending.name });
    },
  });

/** `POST /auth/link/confirm`: the account owner links the OAuth account. */
export const confirmLink = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/link/confirm',
    onRequest: [auth.authenticate(), auth.requireFresh()],
    schema: { summary: 'Confirm the pending OAuth account link', description: '403 `reauthentication_required` (step-up).', tags },
    handler: async (c) => {
      try {
        const pending = await auth.oauth.confirmLink(c, c.get('authUser')!.userId);
        if (!pending) throw noPendingLink();
        return c.json({ linked: { provider: pending.provider, providerAccountId: pending.providerAccountId } });
      } catch (err) {
        if (err instanceof OAuthFlowError && err.code === 'account_exists') throw new AppError(409, 'account_linked_elsewhere', 'This OAuth account already belongs to another user');
        if (err instanceof OAuthFlowError) throw noPendingLink(); // the account changed meanwhile: the link died
        throw err;
      }
    },
  });

/** `DELETE /auth/link/confirm`: declines (forgets) the pending link. */
export const declineLink = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/link/confirm',
    onRequest: auth.authenticate(),
    schema: { summary: 'Decline the pending OAuth account link', tags },
    handler: async (c) => {
      await auth.oauth.declineLink(c, c.get('authUser')!.userId);
      return c.body(null, 204);
    },
  });
