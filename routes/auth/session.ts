import type { Context } from 'hono';
import { Buffer } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { cookieOf, readCookie } from '../../src/http/cookie.ts';
import { publicSessionId, type LookedUp, type Session } from '../../src/auth/sessions.ts';
import { isPending } from '../../src/http/dispatch.ts';
import { DEFAULT_HEADERS, requestIdFor, type PresetHeadersResponse } from '../../src/http/response-headers.ts';
import { logRequest, requestStarted } from '../../src/logger.ts';
import type { Auth } from '../../src/auth/index.ts';
import { totpEnabled } from '../../src/auth/totp.ts';
import type { ApiKeyCaller, AppEnv, RuntimeBindings } from '../../src/http/env.ts';
import * as v from 'valibot';
import { MAX_PASSWORD_LENGTH } from '../../src/auth/passwords.ts';
import { captchaTokenSchema } from '../../src/defences/captcha.ts';
import { epochOf, toPublicUser, type UserDoc } from '../../src/auth/users.ts';
import { AppError } from '../../src/http/errors.ts';
import { isoTime } from '../../src/http/iso-time.ts';
import { defineRoute } from '../../src/http/route.ts';
import { emailSchema } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';

const loginBody = v.strictObject({
  email: emailSchema,
  password: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PASSWORD_LENGTH)),
  captchaToken: captchaTokenSchema,
});


/** `POST /auth/login`: email + password -> session cookie. Enumeration-safe and rate limited. */
export const login = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/login',
    config: { public: true, type: 'authLogin' },
    schema: {
      summary: 'Log in with email and password',
      description: 'Sets the session cookie. 401 `invalid_credentials` for an unknown email or a wrong password alike; 429 after repeated failures.',
      tags: ['auth'],
      body: loginBody,
    },
    handler: async (c, { body }) => {
      const user = await auth.audit.loginAttempt(c, () => ({ email: body.email }), async () => {
        const user = await auth.checkPassword(c, body.email, body.password, { token: body.captchaToken });
        if (!user) throw new AppError(401, 'invalid_credentials', 'The email or the password is wrong');
        // Only after the right password: a wrong one stays 401 and tells nothing about the account.
        if (auth.email.mustVerifyFirst(user)) throw new AppError(403, 'email_not_verified', 'Confirm your email address first: follow the link in the mail (POST /auth/email/verify/request sends a new one)');
        return user;
      });
      if (totpEnabled(user)) {
        // Second step: POST /auth/login/totp with the code, from this browser (CONTRACT section 10).
        await auth.startSecondStep(c, { userId: user._id, epoch: epochOf(user), provider: 'password' });
        return c.json({ mfaRequired: true });
      }
      return startSession(c, auth, user, 'password');
    },
  });

/**
 * The end of every successful login (password, second factor): the session, the cookie, and
 * CONTRACT's body. The password checked was `user.passwordHash`: a password changed meanwhile
 * refuses the login (security review, finding 3).
 */
export async function startSession(
  c: Context<AppEnv>,
  auth: Auth,
  user: UserDoc,
  provider: string,
  { returnTo, refused = () => new AppError(401, 'invalid_credentials', 'The email or the password is wrong'), proven, mfa }: { returnTo?: string; refused?: () => Error; proven?: boolean; mfa?: 'totp' | 'recovery_code' } = {},
): Promise<Response> {
  const started = await auth.login(c, user, provider, (fresh) => fresh.passwordHash === user.passwordHash, { proven, mfa });
  // The account changed since the credential was checked: `refused` says so in the caller's terms.
  if (!started) throw refused();
  const { id, email, firstname, lastname, isAdmin } = toPublicUser(started.user);
  return c.json({ user: { id, email, firstname, lastname, isAdmin }, expiresAt: isoTime(started.session.expiresAt), ...(returnTo ? { returnTo } : {}) });
}

/** `POST /auth/logout`: ends the current session (if any) and clears the cookie; always 204. */
export const logout = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/logout',
    config: { public: true, type: 'authLogout' },
    schema: { summary: 'Log out of this session', tags: ['auth'] },
    handler: async (c) => {
      const id = readCookie(c, auth.cookieName);
      const ended = id ? await auth.sessions.destroy(id) : null;
      if (ended) await auth.audit.record(c, { type: 'logout', actor: { type: 'user', id: ended.userId }, subject: { userId: ended.userId }, sessionId: publicSessionId(ended.hash) });
      auth.sessionCookie.clear(c);
      return c.body(null, 204);
    },
  });

/** `POST /auth/logout-all`: ends every session of the current user. */
export const logoutAll = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/logout-all',
    onRequest: auth.authenticate(),
    config: { type: 'authLogout' },
    schema: { summary: 'Log out of every session of this user', tags: ['auth'] },
    handler: async (c) => {
      await auth.logoutEverywhere(c.get('authUser')!.userId, c);
      auth.sessionCookie.clear(c);
      return c.body(null, 204);
    },
  });

/** `GET /auth/session`: the current session; `?expand=user` adds the user. */
export const session = ({ auth }: ServerInstance) => {
  const withUser = async (c: Context<AppEnv>, body: object) => {
    const user = await auth.users.findById(c.get('authUser')!.userId);
    if (!user && c.get('apiKey')) {
      // The key of a user removed behind our back dies like a session would.
      await auth.apiKeys.revokeAll(c.get('apiKey')!.userId);
      throw new AppError(401, 'invalid_api_key', 'This API key is unknown, expired or revoked');
    }
    if (!user) {
      // The user was removed behind our back (e.g. in the database): this session dies, through
      // the auth API so its provider token blobs go too. Only this one: the id may belong to another
      // app sharing the store under the same key prefix, whose user simply is not in our database.
      await auth.endSession(readCookie(c, auth.cookieName)!);
      auth.sessionCookie.clear(c);
      throw new AppError(401, 'unauthenticated', 'You need to log in');
    }
    return c.json({ ...body, user: toPublicUser(user) });
  };
  return defineRoute({
    method: 'GET',
    path: '/auth/session',
    // Any API key may ask who it is (CONTRACT 15), whatever its scopes.
    onRequest: auth.authenticate({ scopes: [] }),
    config: { type: 'authSession' },
    schema: {
      summary: 'The current session',
      description: 'With an API key: `"provider":"api_key"` and `"apiKey":{"id","scopes"}`; `createdAt`/`expiresAt` are the key\'s (`expiresAt` null: never).',
      tags: ['auth'],
      query: v.strictObject({ expand: v.optional(v.picklist(['user'])) }),
    },
    // Not async: without `expand` the answer is ready at once (see `dispatchSynchronously`).
    handler: (c, { query }) => {
      const key = c.get('apiKey');
      const body = key ? keyAnswer(key, c.get('authUser')!.isAdmin) : sessionAnswer(c.get('session')!);
      return query.expand === 'user' ? withUser(c, body) : c.json(body);
    },
  });
};

/** The answer of `GET /auth/session` (without `expand`). */
const sessionAnswer = (s: Session) => ({ userId: s.userId, isAdmin: s.isAdmin, provider: s.provider, createdAt: isoTime(s.createdAt), expiresAt: isoTime(s.expiresAt), totp: s.totp === true });

/** Sessions whose answer `SessionAnswers` keeps; past that, it starts again empty (a bound, not an LRU). */
const KEPT_ANSWERS = 1024;

/** An answer of `GET /auth/session` as JSON, and its length in bytes once a lane needed it. */
interface SessionJson {
  json: string;
  bytes?: number;
}

/** A kept answer: the session it was made of, and its JSON around the expiry (`head` + ISO time + `tail`). */
interface KeptAnswer extends SessionJson {
  session: Session;
  head: string;
  tail: string;
}

const EXPIRES_AT = '"expiresAt":"';

/**
 * `sessionAnswer` as JSON, for the lanes, kept per session (by its hash). While every field it is made
 * of is the same, the kept answer is given again: a frontend polling its session from the local cache
 * (or an absolute session) gets the same answer until the TTL is pushed (`expiresAt`, once per
 * `touchInterval`) or the record changes. When only the expiry moved (on the default path every request
 * pushes it), the new time goes between the kept JSON's two parts. Formatting the answer each time cost
 * about 7,000 of the 120,000 instructions svc spent per request from the local cache (callgrind,
 * docs/benchmarks.md, stops 80 and 81).
 */
class SessionAnswers {
  private readonly kept = new Map<string, KeptAnswer>();

  of({ session }: LookedUp): SessionJson {
    const known = this.kept.get(session.hash);
    if (known && sameButExpiry(known.session, session)) {
      if (known.session.expiresAt === session.expiresAt) return known;
      const expires = isoTime(session.expiresAt);
      const moved: KeptAnswer = { session, head: known.head, tail: known.tail, json: known.head + expires + known.tail };
      // ISO times are ASCII: the length in bytes moves by the time's length alone.
      if (known.bytes !== undefined) moved.bytes = known.bytes - (known.json.length - moved.json.length);
      this.kept.set(session.hash, moved);
      return moved;
    }
    if (this.kept.size >= KEPT_ANSWERS) this.kept.clear();
    const json = JSON.stringify(sessionAnswer(session));
    const at = json.indexOf(EXPIRES_AT) + EXPIRES_AT.length;
    const answer: KeptAnswer = { session, json, head: json.slice(0, at), tail: json.slice(at + isoTime(session.expiresAt).length) };
    this.kept.set(session.hash, answer);
    return answer;
  }
}

/** Whether two sessions give the same `sessionAnswer` but for `expiresAt`. */
const sameButExpiry = (a: Session, b: Session) =>
  a.userId === b.userId && a.isAdmin === b.isAdmin && a.provider === b.provider && a.createdAt === b.createdAt && (a.totp === true) === (b.totp === true);

/** The answer of `GET /auth/session` to an API key (CONTRACT 15). */
const keyAnswer = (k: ApiKeyCaller, isAdmin: boolean) => ({
  userId: k.userId,
  isAdmin,
  provider: 'api_key',
  createdAt: isoTime(k.createdAt),
  expiresAt: k.expiresAt === null ? null : isoTime(k.expiresAt),
  apiKey: { id: k.id, scopes: k.scopes },
});

/** Node's listener as server.ts serves it: its responses are `PresetHeadersResponse`s. */
type NodeListener = (req: IncomingMessage, res: PresetHeadersResponse) => void;

const DEFAULT_LINES = DEFAULT_HEADERS.map(([name, value]) => `${name}: ${value}\r\n`).join('');

/**
 * `laneHead` as the header lines of Node's head (`PresetHeadersResponse.writeOwnHead`). Every value is
 * plain: a request id the client sent passed `requestIdFor`'s pattern, and the cookie is refreshed only
 * for an id that matched the session id's pattern and holds a session.
 */
const laneLines = (reqId: string, cookie: string | null): string =>
  'X-Request-Id: ' + reqId + '\r\n' + DEFAULT_LINES + (cookie === null ? '' : 'Set-Cookie: ' + cookie + '\r\n') + 'Content-Type: application/json\r\n';

/**
 * The lane's answer head on the Web-standard doors (Node's: `laneLines`, the same headers): the request id, DEFAULT_HEADERS, the refreshed session cookie
 * (null: none), JSON. A plain object: on Bun 1.4, `new Response` with these headers took 1.2-1.4 µs
 * from one against 1.6-2.4 µs from name-value pairs (Deno: no difference).
 */
function laneHead(reqId: string, cookie: string | null): Record<string, string> {
  const head: Record<string, string> = { 'X-Request-Id': reqId };
  for (const [name, value] of DEFAULT_HEADERS) head[name] = value;
  if (cookie !== null) head['Set-Cookie'] = cookie;
  head['Content-Type'] = 'application/json';
  return head;
}

/**
 * Tells Node that the request has no body to read off the connection: the lane takes only requests
 * without `Content-Length` or `Transfer-Encoding`, whose body is empty (RFC 9112, section 6.3). Once an
 * answer is sent, Node drains a request nobody read (`IncomingMessage._dump`, from `resOnFinish`): it sets
 * the stream flowing and ends it, then destroys and closes it, three `nextTick`s and their events for
 * nothing to read. `_dumped` is the flag `_dump` sets and checks (the same in Node 20 to 24): set before
 * the answer, Node skips all of it. The request is never read, so it emits no `end` or `close`, which
 * nothing on the lane listens for; Node's parser holds it until the connection's next request or its
 * close, as it holds any request. Measured on the lane with the local cache (`--trace-gc-nvp`,
 * `npm run bench:instructions`): 7.2-7.4 -> 5.6-5.9 KB allocated a request (scavenges 4.0 -> 3.2-3.3 per
 * 1,000 requests), about 9,000 fewer instructions a request (89-90k -> 81-82k).
 * test/e2e/session-lane-connection.test.ts: pipelined answers and the app's on the same connection.
 */
function bodyless(req: IncomingMessage): void {
  (req as IncomingMessage & { _dumped: boolean })._dumped = true;
}

/**
 * `GET /auth/session` as a frontend polls it, answered on Node's request and response in front of
 * the app (`next`: @hono/node-server's listener), the way the route above answers it: the same
 * body, status and headers (request id, DEFAULT_HEADERS, the refreshed session cookie, JSON), the
 * same session lookup (one GETEX, or none from the local cache) and the same access log line. It
 * takes only the plainest form of the request: exactly this path (or `/api/auth/session`), no query,
 * no body, no `Origin` (no CORS, no origin check to apply), no `Authorization`, and a session cookie that holds a
 * session. Everything else goes to the app, which answers it as before (a cookie found to hold no
 * session is not looked up twice, and a store's failure is answered there without asking again:
 * `auth.lookedUp`). Why: a Request, a Context, the router and a Response per request were
 * most of what this route cost above Node's own HTTP work (bench/README.md, "The session lane"),
 * on the one route every open tab of every frontend calls.
 */
export function sessionLane({ auth, logger }: ServerInstance, next: NodeListener): NodeListener {
  const answers = new SessionAnswers();
  const answer = (req: IncomingMessage, res: PresetHeadersResponse, id: string, found: LookedUp | null, started: number) => {
    if (!found) {
      auth.lookedUp.set(req, { started, failed: false });
      return next(req, res);
    }
    const reqId = requestIdFor(req.headers['x-request-id'] as string | undefined);
    const body = answers.of(found);
    const bytes = (body.bytes ??= Buffer.byteLength(body.json));
    const cookie = auth.refreshedCookie(id, found);
    bodyless(req);
    res.writeOwnHead(laneLines(reqId, cookie), bytes);
    res.end(body.json);
    logRequest(logger, started, reqId, 'GET', '/auth/session', 200);
  };
  // Nothing above throws but a defect: that request ends, the service goes on.
  const failed = (res: PresetHeadersResponse, err: unknown) => {
    logger.error({ err }, 'GET /auth/session could not be answered');
    res.destroy();
  };
  return (req, res) => {
    if (req.method !== 'GET' || (req.url !== '/auth/session' && req.url !== '/api/auth/session')) return next(req, res);
    const { headers } = req;
    // An Authorization header (an API key wins over the cookie) goes to the app too.
    if (headers.origin !== undefined || headers.authorization !== undefined || headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined) return next(req, res);
    const id = cookieOf(headers.cookie, auth.cookieName);
    if (!id) return next(req, res);
    const started = requestStarted(logger);
    try {
      const found = auth.sessions.lookup(id);
      if (!isPending(found)) return answer(req, res, id, found, started);
      found.then(
        (looked) => answer(req, res, id, looked, started),
        (error: unknown) => {
          auth.lookedUp.set(req, { started, failed: true, error });
          next(req, res);
        },
      ).catch((err: unknown) => failed(res, err));
    } catch (err) {
      failed(res, err);
    }
  };
}

type WebHandler = (request: Request, bindings: RuntimeBindings) => Response | Promise<Response>;

/**
 * `sessionLane` for the Web-standard doors (src/server-bun.ts, src/server-deno.ts): the same plainest
 * `GET /auth/session`, answered from the `Request` in front of the app (`next`: the app's `fetch`), with
 * the same body, headers, lookup and log line; everything else, and a cookie that holds no session or
 * a store that failed, goes to the app (`auth.lookedUp`, keyed by the `Request`).
 */
export function webSessionLane({ auth, logger }: ServerInstance, next: WebHandler): WebHandler {
  const answers = new SessionAnswers();
  const answer = (request: Request, bindings: RuntimeBindings, id: string, found: LookedUp | null, started: number): Response | Promise<Response> => {
    if (!found) {
      auth.lookedUp.set(request, { started, failed: false });
      return next(request, bindings);
    }
    const reqId = requestIdFor(request.headers.get('x-request-id') ?? undefined);
    const headers = laneHead(reqId, auth.refreshedCookie(id, found));
    logRequest(logger, started, reqId, 'GET', '/auth/session', 200);
    return new Response(answers.of(found).json, { status: 200, headers });
  };
  return (request, bindings) => {
    if (request.method !== 'GET') return next(request, bindings);
    // The path without parsing the URL: from the first `/` after the scheme's `//`, with no query.
    const { url } = request;
    const path = url.slice(url.indexOf('/', url.indexOf('//') + 2));
    if (path !== '/auth/session' && path !== '/api/auth/session') return next(request, bindings);
    const { headers } = request;
    if (headers.has('origin') || headers.has('authorization') || headers.has('content-length') || headers.has('transfer-encoding')) return next(request, bindings);
    const id = cookieOf(headers.get('cookie') ?? undefined, auth.cookieName);
    if (!id) return next(request, bindings);
    const started = requestStarted(logger);
    let found: ReturnType<typeof auth.sessions.lookup>;
    try {
      found = auth.sessions.lookup(id);
    } catch (error) {
      auth.lookedUp.set(request, { started, failed: true, error }); // the app answers the store's failure
      return next(request, bindings);
    }
    if (!isPending(found)) return answer(request, bindings, id, found, started);
    return found.then(
      (looked) => answer(request, bindings, id, looked, started),
      (error: unknown) => {
        auth.lookedUp.set(request, { started, failed: true, error });
        return next(request, bindings);
      },
    );
  };
}
