import type { TLSSocket } from 'node:tls';
import { parse as parseCookies } from 'hono/utils/cookie';
import type { Socket } from 'socket.io';
import type { Auth } from '../auth/index.ts';
import type { Session } from '../auth/sessions.ts';
import type { WorkSessionDoc } from '../auth/work-sessions.ts';
import type { Config } from '../config/load.ts';
import { AppError } from '../http/errors.ts';
import { allowedOrigins, originFromHeaders } from '../http/origins.ts';

/** Who a handshake proved to be: a logged-in session, or a guest of a usable work session. */
export type Caller = { kind: 'session'; session: Session } | { kind: 'guest'; workSession: WorkSessionDoc };

/**
 * A refused handshake as the client sees it: `connect_error` with `err.message` and `err.data.code`
 * (the HTTP error codes: `unauthenticated`, `invalid_work_session`, `csrf_failed`, `unavailable`).
 */
export class HandshakeError extends Error {
  readonly data: { code: string };
  constructor(code: string, message: string) {
    super(message);
    this.data = { code };
  }
}

/**
 * The plugin a namespace belongs to: `/<plugin key>` (e.g. `/svc__todo`), where a guest needs a work
 * session that grants that plugin, as on the plugin's HTTP routes. The main namespace `/` has none.
 */
export function namespacePlugin(socket: Socket): string | undefined {
  return socket.nsp.name === '/' ? undefined : socket.nsp.name.slice(1);
}

/**
 * The socket.io handshake (SPEC.md Authentication rule 5): the session cookie (`auth.cookieName`,
 * as for HTTP), else `auth.sessionId` = a usable work session id. A cookie handshake from a foreign
 * `Origin` is refused like a cross-site POST (a page elsewhere must not ride the user's cookie).
 */
export function handshake(auth: Auth, config: Config) {
  const allowed = new Set(allowedOrigins(config).csrf);
  return async function identify(socket: Socket): Promise<Caller> {
    const { headers } = socket.request;
    try {
      const cookie = headers.cookie ? parseCookies(headers.cookie, auth.cookieName)[auth.cookieName] : undefined;
      const session = cookie ? ((await auth.sessions.lookup(cookie))?.session ?? null) : null;
      if (session) {
        const origin = headers.origin;
        // Node's request has its socket; the engine of the Bun and Deno doors gives `connection: { encrypted }`.
        const encrypted = ((socket.request.socket as TLSSocket | undefined) ?? (socket.request.connection as TLSSocket | undefined))?.encrypted === true;
        const own = originFromHeaders(headers, encrypted, config.server.trustProxy);
        if (origin && (origin === 'null' || (!allowed.has(origin) && origin !== own))) throw new HandshakeError('csrf_failed', 'This connection comes from an origin that is not allowed');
        return { kind: 'session', session };
      }
      const claimed: unknown = (socket.handshake.auth as Record<string, unknown> | undefined)?.sessionId;
      if (claimed === undefined) throw new HandshakeError('unauthenticated', 'Log in, or connect with auth.sessionId = a work session id');
      const workSession = typeof claimed === 'string' ? await auth.workSessions.valid(claimed, namespacePlugin(socket)) : null;
      if (!workSession) {
        // As on HTTP: a plugin's namespace needs a work session that grants the plugin.
        const what = namespacePlugin(socket) === undefined ? 'does not exist or has ended' : 'does not exist, has ended, or does not grant this plugin';
        throw new HandshakeError('invalid_work_session', `This work session ${what}`);
      }
      return { kind: 'guest', workSession };
    } catch (err) {
      if (err instanceof HandshakeError) throw err;
      if (err instanceof AppError && err.code === 'unavailable') throw new HandshakeError('unavailable', err.message);
      throw err;
    }
  };
}
