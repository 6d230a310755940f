import type { Context } from 'hono';
import { timingSafeEqual } from 'node:crypto';
import * as v from 'valibot';
import { OAuthFlowError } from '../../src/auth/oauth/client.ts';
import { RETURN_TO_CSRF_COOKIE } from '../../src/auth/oauth/flow.ts';
import { PROVIDER_ID } from '../../src/auth/oauth/providers.ts';
import { AppError } from '../../src/http/errors.ts';
import { printable, requestOrigin } from '../../src/http/origins.ts';
import type { AppEnv } from '../../src/http/env.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

const tags = ['oauth'];

const sameToken = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** Every OAuth failure becomes a redirect to `/?auth_error=<code>`; the login page shows it. */
function failure(c: Context, err: unknown, instance: ServerInstance): Response {
  const code = err instanceof OAuthFlowError ? err.code : 'server_error';
  if (code === 'server_error' && (err as AppError).code === 'unavailable') throw err; // store/db down: 503
  const log = code === 'server_error' ? instance.logger.error.bind(instance.logger) : instance.logger.warn.bind(instance.logger);
  // The reason may quote a provider's answer (arctic's OAuth2RequestError): one line of bounded size.
  const reason = String((err as Error).message);
  log({ reqId: c.get('requestId'), auth_error: code, reason: reason.length > 500 ? `${reason.slice(0, 500)}… (${reason.length} characters)` : reason }, 'OAuth login failed');
  c.header('Cache-Control', 'no-store');
  return c.redirect(landing(c, instance, `/?auth_error=${code}`), 302);
}

/**
 * Where the browser lands after the provider: a path of the origin svc answers on, or of `app.url`
 * when the app is on another origin (docs/deployment-topologies.md, topologies 2 and 3: svc's own
 * host serves no app page, so a bare path left the person there). The admin console's pages are
 * svc's own and stay.
 */
function landing(c: Context, { config }: ServerInstance, path: string): string {
  const app = config.app.url ? new URL(config.app.url).origin : undefined;
  if (!app || app === requestOrigin(c, config.server.trustProxy) || /^\/(?:api\/)?admin(?:[/?#]|$)/.test(path)) return path;
  return `${app}${path}`;
}

/** `GET /auth/oauth/providers`: enabled providers for the login page; no secrets. */
export const oauthProviders = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/oauth/providers',
    config: { public: true },
    schema: { summary: 'Enabled OAuth providers for the login page', tags },
    handler: async (c) => c.json((await auth.providers.listEnabled()).map(({ providerId, label, type }) => ({ providerId, label, type }))),
  });

/** `GET /auth/oauth/return-to/csrf`: the token the login page sends back with the return path. */
export const returnToCsrf = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/oauth/return-to/csrf',
    config: { public: true },
    schema: { summary: 'CSRF token for storing the post-login path', tags },
    handler: (c) => {
      c.header('Cache-Control', 'no-store');
      return c.json({ csrfToken: auth.oauth.issueReturnToCsrf(c) });
    },
  });

/**
 * `POST /auth/oauth/return-to`: only from a listed frontend's `/login` page, with the CSRF header
 * equal to its cookie; the path is sanitized to a same-site path (else `/`).
 */
export const returnTo = ({ auth, config }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/oauth/return-to',
    config: { public: true },
    schema: {
      summary: 'Store the post-login path',
      description: 'Needs header `X-Svc-OAuth-Return-To-CSRF` equal to the cookie from `/auth/oauth/return-to/csrf`, and a Referer of a listed frontend\'s `/login` (or of the admin console at `/admin`, `/api/admin`).',
      tags,
      body: v.strictObject({ returnTo: v.pipe(v.string(), v.maxLength(2048)) }),
    },
    handler: (c, { body }) => {
      const frontends = config.env.frontendUrls;
      let referer: URL | undefined;
      try {
        referer = new URL(c.req.header('referer') ?? '');
      } catch {
        referer = undefined;
      }
      const origin = c.req.header('origin') ?? referer?.origin;
      const cookie = auth.flowCookies.read(c, RETURN_TO_CSRF_COOKIE) ?? '';
      const header = c.req.header('x-svc-oauth-return-to-csrf') ?? '';
      // Each refusal says which condition failed (issue 26 §6); the Origin is the caller's own value.
      const refuse = (why: string) => new AppError(403, 'csrf_failed', `The return path was refused: ${why}`);
      if (!origin || !frontends.includes(origin)) throw refuse(`Origin "${printable(origin ?? '(none)')}" is not listed in SVC_FRONTEND_URLS`);
      // The admin console (docs/console.md) is a login page too: its OAuth buttons come back to it.
      const loginPages = config.admin.console.enabled ? ['/login', '/admin', '/api/admin'] : ['/login'];
      if (!referer || !frontends.includes(referer.origin) || !loginPages.includes(referer.pathname)) {
        throw refuse("it must be posted from a listed frontend's /login page (Referer), or from the admin console");
      }
      if (!cookie || !sameToken(cookie, header)) {
        throw refuse('the X-Svc-OAuth-Return-To-CSRF header must equal the token from GET /auth/oauth/return-to/csrf (and its cookie)');
      }
      auth.oauth.storeReturnTo(c, body.returnTo);
      return c.body(null, 204);
    },
  });

/** Runs one step of the browser's OAuth journey: 302 to where it leads, or to `/?auth_error=`. */
function redirectStep(instance: ServerInstance, step: (c: Context<AppEnv>, providerId: string) => Promise<string>) {
  return async (c: Context<AppEnv>) => {
    const providerId = c.req.param('provider') ?? '';
    try {
      if (!PROVIDER_ID.test(providerId)) throw new OAuthFlowError('provider_not_found', 'malformed provider id');
      c.header('Cache-Control', 'no-store');
      return c.redirect(await step(c, providerId), 302);
    } catch (err) {
      return failure(c, err, instance);
    }
  };
}

/** `GET /auth/oauth/:provider`: 302 to the provider's authorize URL. */
export const oauthStart = (instance: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/oauth/:provider',
    config: { public: true },
    schema: { summary: 'Start an OAuth login (redirects to the provider)', tags },
    handler: redirectStep(instance, (c, providerId) => instance.auth.oauth.start(c, providerId)),
  });

/** `GET /auth/oauth/:provider/callback`: 302 to the stored path with the session cookie, or to `/?auth_error=`. */
export const oauthCallback = (instance: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/oauth/:provider/callback',
    config: { public: true },
    schema: { summary: 'OAuth callback (the provider redirects here)', tags },
    handler: redirectStep(instance, async (c, providerId) => landing(c, instance, await instance.auth.oauth.callback(c, providerId))),
  });

/** What a `response_mode=form_post` callback may carry; bounded like any other input. */
const formPostFields = v.object({
  state: v.pipe(v.string(), v.minLength(1), v.maxLength(512)),
  code: v.optional(v.pipe(v.string(), v.maxLength(4096))),
  error: v.optional(v.pipe(v.string(), v.maxLength(256))),
  user: v.optional(v.pipe(v.string(), v.maxLength(4096))),
  iss: v.optional(v.pipe(v.string(), v.maxLength(512))),
});

/**
 * `POST /auth/oauth/:provider/callback`: the form_post callback (Sign in with Apple). It keeps the
 * posted fields and answers 303 to the GET callback, which completes the login in the browser that
 * holds the state cookie (`OAuthFlow.formPost` says why). The only POST that the Origin check lets
 * through from another site (`originCheck`): it changes nothing on its own.
 */
export const oauthFormPostCallback = (instance: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/oauth/:provider/callback',
    config: { public: true },
    schema: {
      summary: 'OAuth callback with response_mode=form_post (redirects to the GET callback)',
      description: 'Body `application/x-www-form-urlencoded` with `state` and `code` (or `error`), and Apple\'s `user` on a first login. Answers 303 to `?state=`.',
      tags,
    },
    handler: async (c) => {
      const providerId = c.req.param('provider') ?? '';
      if (!(c.req.header('content-type') ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) {
        throw new AppError(415, 'unsupported_media_type', 'The form_post callback must be application/x-www-form-urlencoded');
      }
      const parsed = v.safeParse(formPostFields, Object.fromEntries(new URLSearchParams(await c.req.text())));
      if (!parsed.success || !PROVIDER_ID.test(providerId)) return failure(c, new OAuthFlowError('invalid_state', 'the form_post callback has no valid state'), instance);
      c.header('Cache-Control', 'no-store');
      return c.redirect(await instance.auth.oauth.formPost(parsed.output), 303);
    },
  });
