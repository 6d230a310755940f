/**
 * `@svc/client`: the browser's side of svc. Every call sends the session cookie
 * (`credentials: 'include'`), speaks JSON, and throws one error type, `SvcError`.
 *
 * ```ts
 * import { createClient, SvcError } from '@svc/client';
 * const svc = createClient();                       // API at '/api' (behind the reverse proxy)
 * const result = await svc.login({ email, password });
 * if ('mfaRequired' in result) await svc.loginTotp({ code });
 * try { await svc.totpEnroll(); } catch (e) {
 *   if (e instanceof SvcError && e.code === 'reauthentication_required') await svc.reauthenticate({ password });
 * }
 * ```
 */

import { startAuthentication, startRegistration } from '@simplewebauthn/browser';
import { routes, type Bodies, type LoggedIn, type LoginResult, type Responses, type RouteName, type Session, type SessionWithUser } from './routes.ts';

export * from './routes.ts';

export interface ClientOptions {
  /** Where the API is: `/api` (default, same origin behind the proxy) or e.g. `https://api.example.com/api`. */
  baseUrl?: string;
  /** A `fetch` to use instead of the global one (tests, SSR). */
  fetch?: typeof fetch;
}

export interface ErrorDetail {
  path: string;
  message: string;
}

/** Any answer other than 2xx (docs/api.md, error codes), or no answer at all (`status` 0, `network_error`). */
export class SvcError extends Error {
  override readonly name = 'SvcError';
  // Fields declared in the body, not as constructor parameter properties: the client ships as TypeScript
  // source, and apps compile it with `erasableSyntaxOnly` (Vite's templates) or Node's type stripping.
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetail[];
  constructor(status: number, code: string, message: string, details: ErrorDetail[] = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** A proof for step-up: the password, a TOTP code, or a passkey of this browser. */
export type Proof = { password: string } | { code: string } | { passkey: true };

type Params = Record<string, string>;
type Call = <K extends RouteName>(name: K, opts?: { body?: K extends keyof Bodies ? Bodies[K] : never; params?: Params; query?: Record<string, string | number | undefined>; init?: RequestInit }) => Promise<Responses[K]>;

/** `/auth/passkeys/:id` + `{id: 'a b'}` -> `/auth/passkeys/a%20b`. */
function fill(path: string, params: Params = {}): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`missing path parameter ${name}`);
    return encodeURIComponent(value);
  });
}

async function errorOf(res: Response): Promise<SvcError> {
  const body = (await res.json().catch(() => null)) as { error?: { code?: string; message?: string; details?: ErrorDetail[] } } | null;
  const error = body?.error;
  return new SvcError(res.status, error?.code ?? 'unexpected_response', error?.message ?? `HTTP ${res.status}`, error?.details ?? []);
}

export function createClient(options: ClientOptions = {}) {
  const base = (options.baseUrl ?? '/api').replace(/\/$/, '');
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));

  const call: Call = async (name, { body, params, query, init } = {}) => {
    const [method, path] = routes[name];
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query ?? {})) if (value !== undefined) search.set(key, String(value));
    const qs = search.toString() ? `?${search}` : '';
    const headers = new Headers(init?.headers);
    if (body !== undefined) headers.set('content-type', 'application/json');
    let res: Response;
    try {
      res = await doFetch(`${base}${fill(path, params)}${qs}`, {
        ...init,
        method,
        headers,
        credentials: 'include',
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (cause) {
      throw new SvcError(0, 'network_error', `The service cannot be reached (${String(cause)})`);
    }
    if (!res.ok) throw await errorOf(res);
    // 204, and the 202 `{}` of the email routes, carry nothing the caller needs.
    if (res.status === 204 || res.status === 202) return undefined as never;
    // A 2xx that is not JSON is no answer of svc: e.g. a dev server's index.html for every path.
    try {
      return (await res.json()) as never;
    } catch {
      throw new SvcError(res.status, 'unexpected_response', `HTTP ${res.status} from ${base}${path} is not JSON: is baseUrl the service's API?`);
    }
  };

  /** Registers a passkey in this browser (the session must be fresh: step-up). */
  async function registerPasskey(name?: string) {
    const optionsJSON = await call('passkeyOptions', { body: {} });
    const response = await startRegistration({ optionsJSON });
    return call('addPasskey', { body: { response, ...(name ? { name } : {}) } });
  }

  /** The current session; `{user: true}` adds the user (typed as there). 401 `unauthenticated` without one. */
  function session(opts: { user: true }): Promise<SessionWithUser>;
  function session(opts?: { user?: boolean }): Promise<Session>;
  function session(opts: { user?: boolean } = {}): Promise<Session> {
    return call('session', { query: { expand: opts.user ? 'user' : undefined } });
  }

  /** The session, or null when nobody is signed in (other errors are thrown); `{user: true}` as `session`. */
  function currentSession(opts: { user: true }): Promise<SessionWithUser | null>;
  function currentSession(opts?: { user?: boolean }): Promise<Session | null>;
  async function currentSession(opts: { user?: boolean } = {}): Promise<Session | null> {
    try {
      return await session(opts);
    } catch (e) {
      if (e instanceof SvcError && e.status === 401) return null;
      throw e;
    }
  }

  /** A passkey assertion for the options of `POST /auth/login/passkey/options` (login and step-up). */
  async function passkeyAssertion() {
    const optionsJSON = await call('passkeyLoginOptions', { body: {} });
    return startAuthentication({ optionsJSON });
  }

  const client = {
    /** The base URL every call goes to. */
    baseUrl: base,
    /** Any route of the table by name (what the named functions below use). */
    call,

    // 3. Sessions
    /** `{user, expiresAt}`, or `{mfaRequired: true}`: then `loginTotp`. */
    login: (body: Bodies['login']) => call('login', { body }),
    logout: () => call('logout'),
    logoutAll: () => call('logoutAll'),
    session,
    currentSession,

    // 10. Account self-service
    sessions: () => call('sessions'),
    /** What happened on your account (audit records), newest first. */
    activity: (query: { cursor?: string; limit?: number } = {}) => call('activity', { query }),
    endSession: (id: string) => call('endSession', { params: { id } }),
    changePassword: (body: Bodies['changePassword']) => call('changePassword', { body }),
    totpEnroll: () => call('totpEnroll'),
    totpConfirm: (code: string) => call('totpConfirm', { body: { code } }),
    totpDisable: (body: Bodies['totpDisable']) => call('totpDisable', { body }),
    /** The second step of a login: a TOTP code or a recovery code. */
    loginTotp: (body: Bodies['loginTotp']) => call('loginTotp', { body }),
    /** Step-up: prove it is you again, by password, TOTP code or passkey (`{passkey: true}`). */
    async reauthenticate(body: Proof): Promise<void> {
      return call('reauthenticate', { body: 'passkey' in body ? { response: await passkeyAssertion() } : body });
    },
    /**
     * Runs `action`; when it answers 403 `reauthentication_required`, asks `prove` for a proof
     * (null: the person gave up, the error is thrown), sends it, and runs `action` once more.
     */
    async withStepUp<T>(action: () => Promise<T>, prove: () => Promise<Proof | null>): Promise<T> {
      try {
        return await action();
      } catch (e) {
        if (!(e instanceof SvcError) || e.code !== 'reauthentication_required') throw e;
        const proof = await prove();
        if (!proof) throw e;
        await client.reauthenticate(proof);
        return action();
      }
    },
    accountProviders: () => call('accountProviders'),
    /** Starts linking `provider` to the signed-in user; go to the returned `authorizationUrl`. */
    linkProvider: (provider: string) => call('linkProvider', { params: { provider } }),
    unlinkProvider: (provider: string, providerAccountId: string) => call('unlinkProvider', { params: { provider, providerAccountId } }),

    // 15. API keys (step-up to make one: see `withStepUp`)
    /** A new API key; keep the answer's `key` (shown once). */
    createApiKey: (body: Bodies['createApiKey']) => call('createApiKey', { body }),
    apiKeys: () => call('apiKeys'),
    deleteApiKey: (id: string) => call('deleteApiKey', { params: { id } }),
    /** What a device login asks for (the code as the tool shows it: any case, hyphen optional). */
    pendingDevice: (userCode: string) => call('pendingDevice', { query: { user_code: userCode } }),
    /** Approves it (step-up: see `withStepUp`); the tool's next poll gets its API key. */
    approveDevice: (userCode: string) => call('approveDevice', { body: { user_code: userCode } }),
    denyDevice: (userCode: string) => call('denyDevice', { body: { user_code: userCode } }),

    // 11. Passkeys
    registerPasskey,
    passkeys: () => call('passkeys'),
    renamePasskey: (id: string, name: string) => call('renamePasskey', { params: { id }, body: { name } }),
    deletePasskey: (id: string) => call('deletePasskey', { params: { id } }),
    /** Logs in with any passkey of this site (the browser asks which). */
    async loginWithPasskey(): Promise<LoginResult> {
      return call('loginPasskey', { body: { response: await passkeyAssertion() } });
    },

    // 5. OAuth
    oauthProviders: () => call('oauthProviders'),
    /** What the login page offers: the captcha widget to show after `captcha_required`, sign-up, magic link, passkeys, providers. */
    authConfig: () => call('authConfig'),
    /** The token of a new-device notice's "this wasn't me" link: ends that login, locks the password until a reset. */
    notMe: (token: string) => call('notMe', { body: { token } }),
    /** The URL that starts a login with `provider` (a full-page navigation, not a fetch). */
    oauthLoginUrl: (provider: string) => `${base}${fill(routes.oauthStart[1], { provider })}`,
    /**
     * Stores where to land after the OAuth login (a same-site path). Must run on the frontend's
     * `/login` page: the service checks the Referer, which is why the full URL is sent.
     */
    async setReturnTo(returnTo: string) {
      const { csrfToken } = await call('returnToCsrf');
      await call('returnTo', { body: { returnTo }, init: { headers: { 'x-svc-oauth-return-to-csrf': csrfToken }, referrerPolicy: 'no-referrer-when-downgrade' } });
    },
    /** `setReturnTo` (when given), then leaves the page for the provider. */
    async startOAuthLogin(provider: string, opts: { returnTo?: string } = {}): Promise<void> {
      if (opts.returnTo) await client.setReturnTo(opts.returnTo);
      location.assign(client.oauthLoginUrl(provider));
    },
    pendingLink: () => call('pendingLink'),
    confirmLink: () => call('confirmLink'),
    cancelLink: () => call('cancelLink'),

    // 12. Email
    signup: (body: Bodies['signup']) => call('signup', { body }),
    requestVerification: (email: string) => call('requestVerification', { body: { email } }),
    /** `password`: the sign-up's password, which keeps it when verifying from another browser. */
    verifyEmail: (token: string, password?: string) => call('verifyEmail', { body: password === undefined ? { token } : { token, password } }),
    forgotPassword: (email: string, captchaToken?: string) => call('forgotPassword', { body: captchaToken === undefined ? { email } : { email, captchaToken } }),
    resetPassword: (body: Bodies['resetPassword']) => call('resetPassword', { body }),
    /** Whether a reset link still works, without using it: resolves, or throws `invalid_token` (ask for a new link). */
    checkResetToken: (token: string) => call('checkResetToken', { body: { token } }),
    requestMagicLink: (email: string, captchaToken?: string) => call('requestMagicLink', { body: captchaToken === undefined ? { email } : { email, captchaToken } }),
    verifyMagicLink: (token: string) => call('verifyMagicLink', { body: { token } }),

    // Admin (3, 5, 6)
    admin: {
      listUsers: (query: { offset?: number; limit?: number; email?: string } = {}) => call('listUsers', { query }),
      getUser: (id: string) => call('getUser', { params: { id } }),
      createUser: (body: Bodies['createUser']) => call('createUser', { body }),
      updateUser: (id: string, body: Bodies['updateUser']) => call('updateUser', { params: { id }, body }),
      deleteUser: (id: string) => call('deleteUser', { params: { id } }),
      /** A user's live sessions, newest first (public ids, as `sessions`). */
      userSessions: (id: string) => call('userSessions', { params: { id } }),
      endUserSession: (id: string, sessionId: string) => call('endUserSession', { params: { id, sessionId } }),
      /** Ends every session of the user (API keys stay). */
      endUserSessions: (id: string) => call('endUserSessions', { params: { id } }),
      /** Password set or not, TOTP on or off, passkeys, connected OAuth accounts. */
      userWaysIn: (id: string) => call('userWaysIn', { params: { id } }),
      userApiKeys: (id: string) => call('userApiKeys', { params: { id } }),
      deleteUserApiKey: (id: string, keyId: string) => call('deleteUserApiKey', { params: { id, keyId } }),
      availableProviders: () => call('availableProviders'),
      listProviders: () => call('listProviders'),
      createProvider: (body: Bodies['createProvider']) => call('createProvider', { body }),
      updateProvider: (id: string, body: Bodies['updateProvider']) => call('updateProvider', { params: { id }, body }),
      deleteProvider: (id: string) => call('deleteProvider', { params: { id } }),
      /** svc's server requests the provider (OpenID discovery document, or the authorization URL) and says how it went. */
      testProvider: (id: string) => call('testProvider', { params: { id } }),
      /** Work sessions (guest links, CONTRACT 6). */
      createWorkSession: (body: Bodies['createWorkSession']) => call('createWorkSession', { body }),
      listWorkSessions: (query: { offset?: number; limit?: number } = {}) => call('listWorkSessions', { query }),
      getWorkSession: (id: string) => call('getWorkSession', { params: { id } }),
      updateWorkSession: (id: string, body: Bodies['updateWorkSession']) => call('updateWorkSession', { params: { id }, body }),
      deleteWorkSession: (id: string) => call('deleteWorkSession', { params: { id } }),
      /** The audit log: `type` may end in `.*`; `since`/`until` ISO 8601. */
      audit: (query: { userId?: string; type?: string; since?: string; until?: string; cursor?: string; limit?: number } = {}) => call('audit', { query }),
      /** What svc sees of this request, its cookie and frontends, and what is wrong with the deployment (findings). */
      diagnostics: () => call('diagnostics'),
      /** Adds a webhook endpoint; keep the answer's `secret` (shown once) for the receiver. */
      createWebhook: (body: Bodies['createWebhook']) => call('createWebhook', { body }),
      listWebhooks: () => call('listWebhooks'),
      updateWebhook: (id: string, body: Bodies['updateWebhook']) => call('updateWebhook', { params: { id }, body }),
      deleteWebhook: (id: string) => call('deleteWebhook', { params: { id } }),
      /** Queues a `webhook.test` event to the endpoint. */
      testWebhook: (id: string) => call('testWebhook', { params: { id } }),
      /** The endpoint's recent deliveries, newest first (`limit` 1..200, default 50). */
      webhookDeliveries: (id: string, query: { limit?: number } = {}) => call('webhookDeliveries', { params: { id }, query }),
      /** Sends a failed delivery again (same `webhook-id`, the retry schedule from its start); 409 unless it failed. */
      resendWebhookDelivery: (id: string, eventId: string) => call('resendWebhookDelivery', { params: { id, eventId } }),
    },
  };
  return client;
}

export type SvcClient = ReturnType<typeof createClient>;

/** Whether a login finished (a session exists) or needs the second step. */
export const isLoggedIn = (result: LoginResult): result is LoggedIn => 'user' in result;
