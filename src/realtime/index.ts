import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Logger } from 'pino';
import { createAdapter } from '@socket.io/redis-streams-adapter';
import { Server, type Namespace, type Socket } from 'socket.io';
import * as v from 'valibot';
import type { Auth } from '../auth/index.ts';
import type { WorkSessionDoc } from '../auth/work-sessions.ts';
import type { Config } from '../config/load.ts';
import type { Collection, Database, Doc } from '../db/index.ts';
import type { AuthUser, WorkSessionGuest } from '../http/env.ts';
import { COMPOSITION_COLLECTION } from '../plugins/collections.ts';
import type { Store, Subscription } from '../store/store.ts';
import { ConnectionRegistry, direct, type CheckResult } from './connections.ts';
import { RECOVERY_MS, Recovery, STREAM_MAX_LENGTH, type RecoveryRedis } from './recovery.ts';
import { guardListeners } from './guarded-listeners.ts';
import { handshake, HandshakeError, namespacePlugin, type Caller } from './handshake.ts';
import { rooms } from './rooms.ts';
import { loadSocketEngine, type SocketEngine } from './socket-engine.ts';

/** What core puts in `socket.data`: the same identities HTTP handlers see as `c.get(...)`. */
export interface SocketData {
  /** A logged-in user (`c.get('authUser')`), refreshed when an admin changes the user's admin status. */
  authUser?: AuthUser;
  /** A work-session guest (`c.get('workSession')`), refreshed when an admin changes the work session. */
  workSession?: WorkSessionGuest;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- plugins declare their own event maps
type AnyEvents = Record<string, (...args: any[]) => void>;
export type RealtimeServer = Server<AnyEvents, AnyEvents, AnyEvents, SocketData>;
export type RealtimeSocket = Socket<AnyEvents, AnyEvents, AnyEvents, SocketData>;

export { rooms };

/** What instances tell each other through the store: a subject whose sockets must end now, or be checked again. */
const messageSchema = v.object({
  o: v.string(),
  s: v.pipe(v.string(), v.regex(/^(session|work-session):[0-9a-f]{64}$/)),
  k: v.picklist(['end', 'check']),
});
type Message = v.InferOutput<typeof messageSchema>;

/**
 * Events one socket may send (issue 35 finding 9): a bucket of EVENT_BURST refilled at
 * EVENTS_PER_SECOND. Past it an event is dropped before any listener sees it (the client is told once
 * with `rate_limited`); a socket that keeps sending while empty (EVENT_DROPS_TO_DISCONNECT drops
 * before it calms down) is disconnected.
 */
export const EVENTS_PER_SECOND = 20;
export const EVENT_BURST = 60;
export const EVENT_DROPS_TO_DISCONNECT = 100;

function eventLimit(socket: Socket): (packet: unknown[], next: (err?: Error) => void) => void {
  let tokens = EVENT_BURST;
  let at = Date.now();
  let dropped = 0;
  return (_packet, next) => {
    const now = Date.now();
    tokens = Math.min(EVENT_BURST, tokens + ((now - at) / 1000) * EVENTS_PER_SECOND);
    at = now;
    if (tokens >= EVENT_BURST - 1) dropped = 0; // calm again
    if (tokens >= 1) {
      tokens--;
      return next();
    }
    // Direct: the disconnect below must not overtake it.
    if (dropped++ === 0) direct(socket).emit('rate_limited', { code: 'too_many_requests', message: `at most ${EVENTS_PER_SECOND} events per second (bursts of ${EVENT_BURST}); events were dropped` });
    if (dropped >= EVENT_DROPS_TO_DISCONNECT) socket.disconnect(true);
  };
}

/** socket.io on a Web-standard door (`Realtime.attachEngine`). */
export interface EngineRealtime {
  /** Whether `request` is socket.io's (else the app's). */
  isSocketRequest(request: Request): boolean;
  /** The answer to a socket.io request. `server`: Bun's, or what upgrades like it. */
  handle(request: Request, server: unknown): Promise<Response>;
  /** The WebSocket handlers `Bun.serve` calls. */
  websocket: unknown;
  engine: SocketEngine;
}

/** Paths socket.io answers at: the backend path and the one a proxy forwards unstripped (as for HTTP routes). */
export const SOCKET_PATH = '/socket.io';
const API_SOCKET_PATH = '/api/socket.io';

/**
 * Realtime: the socket.io server of this instance. Every connection is authenticated at the
 * handshake (a session cookie or a work session id) and tracked, so that a logout, a deactivated,
 * expired or deleted work session closes its sockets within moments on every instance: changes are
 * announced on the store's pub/sub channel `<keyPrefix>realtime` (hashes only, never ids), and
 * expiry is a timer per session or work session. Plugins use `io` (rooms, events, namespaces).
 */
export class Realtime {
  readonly io: RealtimeServer;
  /** Core's room names (`rooms.user(id)`, `rooms.workSession(id)`), for plugins to address those sockets. */
  readonly rooms = rooms;
  private readonly registry: ConnectionRegistry;
  private readonly channel: string;
  /** This process, so it can skip its own announcements coming back from the store. */
  private readonly origin = randomUUID();
  private subscription?: Subscription;
  private compositions?: Promise<Collection<Doc>>;
  private readonly identify: (socket: Socket) => Promise<Caller>;
  /** What to do with each admitted socket once its namespace connects it. */
  private readonly pending = new WeakMap<Socket, () => void>();
  /** The Redis connections of the cross-instance adapter (none on the embedded store, none before `attach`). */
  private adapterConnections?: AdapterConnection[];
  /** Connection state recovery, with the cross-instance adapter only (the embedded store has none). */
  private recovery?: Recovery;
  /** What every engine gets, Node's or Bun's: CORS with credentials for the frontends. */
  private readonly engineOptions: { cors?: { origin: string[]; credentials: true } };

  constructor(private readonly deps: { config: Config; logger: Logger; auth: Auth; db: Database; store: Store }) {
    const { config, logger, auth } = deps;
    this.registry = new ConnectionRegistry(logger);
    this.channel = `${config.auth.store.keyPrefix}realtime`;
    this.identify = handshake(auth, config);
    this.engineOptions = config.env.frontendUrls.length ? { cors: { origin: config.env.frontendUrls, credentials: true } } : {};
    this.io = new Server({
      path: SOCKET_PATH,
      serveClient: false, // frontends bundle socket.io-client
      // JSONP polling (`&j=`) is never served: its handshake is a <script> load, which sends no Origin,
      // so a page of another origin could carry the session cookie past the handshake's origin check
      // and read the connection's id from the script it gets back.
      allowRequest: (req, answer) => {
        // As Engine.IO reads the query: decoded (`%6A`), and with or without a value (`&j`).
        const jsonp = new URL(req.url ?? '/', 'http://localhost').searchParams.has('j');
        answer(jsonp ? 'JSONP polling is not served' : null, !jsonp);
      },
      // A client that lost its connection (an instance restarting, a network blip) and is back within
      // RECOVERY_MS gets its rooms and the events it missed, once its handshake has passed again
      // (`skipMiddlewares: false`, and see recovery.ts: core restores, after authenticating).
      ...(deps.store.dedicatedConnection ? { connectionStateRecovery: { maxDisconnectionDuration: RECOVERY_MS, skipMiddlewares: false } } : {}),
      ...this.engineOptions,
    });
    // Every namespace, the main one and those plugins create, admits only authenticated sockets.
    this.guard(this.io.of('/'));
    this.io.on('new_namespace', (nsp: Namespace) => this.guard(nsp));

    auth.onSessionEnd(async (hash) => this.announce({ s: `session:${hash}`, k: 'end' }));
    auth.onSessionChange(async (hash) => this.announce({ s: `session:${hash}`, k: 'check' }));
    auth.workSessions.onChange(async (id) => this.announce({ s: rooms.workSession(id), k: 'check' }));
  }

  /**
   * Attaches socket.io to the HTTP server at `/socket.io` and `/api/socket.io`, after subscribing
   * to the announcements of other instances (a socket must never exist unsubscribed).
   */
  async attach(http: HttpServer): Promise<void> {
    await this.listenToOtherInstances();
    this.io.attach(http);
    // Engine.IO's answers are plain text or JSON: a browser must never run one as a script.
    const nosniff = (headers: Record<string, string>) => void (headers['X-Content-Type-Options'] = 'nosniff');
    this.io.engine.on('initial_headers', nosniff);
    this.io.engine.on('headers', nosniff);
    // socket.io serves one path; requests a proxy forwarded with `/api` kept are renamed before it looks.
    const unprefix = (req: IncomingMessage) => {
      if (req.url?.startsWith(`${API_SOCKET_PATH}/`)) req.url = req.url.slice(API_SOCKET_PATH.length - SOCKET_PATH.length);
    };
    http.prependListener('request', unprefix);
    http.prependListener('upgrade', unprefix);
  }

  /**
   * Attaches socket.io to a Web-standard door (src/server-bun.ts, src/server-deno.ts) through
   * @socket.io/bun-engine, socket.io's engine for `Request`/`Response` servers, with the rules of the Node
   * engine above (no JSONP, CORS, nosniff). Bun upgrades to WebSockets itself; Deno through
   * `denoUpgrades` (src/realtime/deno-websockets.ts).
   */
  async attachEngine(): Promise<EngineRealtime> {
    await this.listenToOtherInstances();
    const { Server: Engine } = await loadSocketEngine();
    const { cors } = this.engineOptions;
    const engine = new Engine({
      path: `${SOCKET_PATH}/`,
      allowRequest: async (req) => {
        if (new URL(req.url).searchParams.has('j')) throw 'JSONP polling is not served';
      },
      ...(cors ? { cors } : {}),
      editResponseHeaders: (headers) => headers.set('X-Content-Type-Options', 'nosniff'),
    });
    // socket.io binds any engine with its `Server`'s events; the package's types name Bun's, not socket.io's.
    this.io.bind(engine as unknown as Parameters<RealtimeServer['bind']>[0]);
    const { websocket } = engine.handler();
    return {
      engine,
      websocket,
      // Only the two socket.io paths (the engine itself does not look at the path): `/socket.io/` and the
      // one a proxy forwards with `/api` kept, found without parsing the URL of every other request.
      isSocketRequest: ({ url }) => {
        const at = url.indexOf('/', url.indexOf('//') + 2);
        return at > 0 && (url.startsWith(`${SOCKET_PATH}/`, at) || url.startsWith(`${API_SOCKET_PATH}/`, at));
      },
      handle: (request, server) => engine.handleRequest(request, server),
    };
  }

  /**
   * Rooms and broadcasts across instances, and the announcements of other instances, before the first
   * socket (a socket must never exist unsubscribed). Set up only by a process that serves sockets (an
   * app used in-process, as the tests do, opens no connections for it).
   */
  private async listenToOtherInstances(): Promise<void> {
    const connection = this.deps.store.dedicatedConnection?.() as AdapterConnection | undefined;
    if (connection) {
      this.recovery = new Recovery(connection, this.deps.config.auth.store.keyPrefix, `${this.deps.config.auth.store.keyPrefix}socket.io`, this.deps.logger);
      this.adapterConnections = streamsAdapter(this.io, connection, this.deps.config.auth.store.keyPrefix, this.deps.logger, this.recovery);
    }
    this.subscription = await this.deps.store.subscribe(
      this.channel,
      (raw) => this.receive(raw),
      () => void this.registry.recheckAll(),
    );
  }

  /** Closes every socket and stops listening to other instances (graceful shutdown). */
  async close(): Promise<void> {
    this.registry.clear();
    // At once (the caller stops accepting connections meanwhile): clients see their transport close
    // and reconnect, to another instance behind the load balancer, where they recover: each socket
    // writes its session through the adapter's connection as it closes, so that one closes last.
    (this.io.engine as { close(): void } | undefined)?.close();
    if (this.adapterConnections) {
      // Each namespace's adapter first (its heartbeat stops, its stream reader is told to end), then
      // the connections: a reader left running on a closed connection would retry in a tight loop.
      for (const nsp of this.io._nsps.values()) void nsp.adapter.close();
      const [main, ...copies] = this.adapterConnections;
      for (const conn of copies) conn.disconnect();
      await this.recovery?.flush();
      // QUIT after the sessions' writes queued on it (ioredis answers them first).
      await main?.quit().catch(() => main.disconnect());
    }
    const subscription = this.subscription;
    this.subscription = undefined;
    await subscription?.unsubscribe().catch(() => {});
  }

  /**
   * The handshake, on one namespace; what it admits is tracked once connected (a later middleware
   * of a plugin may still refuse the socket: then there is nothing to track and no room to leave).
   */
  private guard(nsp: Namespace): void {
    nsp.use((socket, next) => {
      this.admit(socket, Date.now()).then(
        async ({ owner, onConnected }) => {
          // A reconnecting client's rooms and missed events, only now that it proved who it is.
          const restored = await this.recovery?.restore(socket, owner).catch((err: unknown) => {
            this.deps.logger.warn({ err: (err as Error).message }, 'realtime: cannot recover a connection; it starts fresh');
            return undefined;
          });
          this.pending.set(socket, () => {
            // As they were sent (each ends with its stream offset), on this socket only, not stored
            // again: the missed ones, then those handed over while the socket was not yet connected.
            if (restored) for (const packet of [...restored.missed, ...restored.caughtUp()]) direct(socket).emit(...(packet as [string, ...unknown[]]));
            onConnected();
          });
          next();
        },
        (err: unknown) => {
          if (err instanceof HandshakeError) return next(err);
          this.deps.logger.error({ err }, 'realtime: handshake failed');
          next(new HandshakeError('internal_error', 'Something went wrong on our side'));
        },
      );
    });
    // Registered when the namespace is made, so before any listener of a plugin.
    nsp.on('connection', (socket) => {
      this.pending.get(socket)?.();
      this.pending.delete(socket);
      this.recovery?.track(socket);
      socket.use(eventLimit(socket));
      guardListeners(socket, this.deps.logger, `socket of namespace ${nsp.name}`);
    });
    guardListeners(nsp, this.deps.logger, `namespace ${nsp.name}`);
  }

  /**
   * Proves who the socket is; returns its owner (core's room for the caller) and what to do once it is
   * connected: rooms, tracking, `joinConfirmation`.
   */
  private async admit(socket: Socket, startedAt: number): Promise<{ owner: string; onConnected: () => void }> {
    const caller = await this.identify(socket);
    if (caller.kind === 'session') {
      const { session } = caller;
      socket.data = { authUser: { userId: session.userId, isAdmin: session.isAdmin, provider: session.provider } } satisfies SocketData;
      const check = async (): Promise<CheckResult> => {
        const live = await this.deps.auth.sessions.remaining(session.hash);
        if (!live) return { valid: false, code: 'unauthenticated' };
        const { userId, isAdmin, provider } = live.record;
        // An admin tag removed or added applies to the sockets too (as to the next request).
        return { valid: true, until: Date.now() + live.left, refresh: (s) => ((s.data = { authUser: { userId, isAdmin, provider } }), true) };
      };
      const owner = rooms.user(session.userId);
      const onConnected = () => {
        socket.join(owner);
        this.registry.add(`session:${session.hash}`, socket, check, session.expiresAt, startedAt);
      };
      return { owner, onConnected };
    }
    const doc = caller.workSession;
    socket.data = { workSession: guestOf(doc) } satisfies SocketData;
    const composition = socket.nsp.name === '/' ? await this.composition(doc.composition) : undefined;
    const check = async (): Promise<CheckResult> => {
      const fresh = await this.deps.auth.workSessions.valid(doc._id);
      if (!fresh) return { valid: false, code: 'invalid_work_session' };
      return {
        valid: true,
        until: expiryOf(fresh),
        refresh: (s) => {
          const plugin = namespacePlugin(s);
          if (plugin !== undefined && !Object.hasOwn(fresh.pluginData, plugin)) return false;
          s.data = { workSession: guestOf(fresh) };
          return true;
        },
      };
    };
    const owner = rooms.workSession(doc._id);
    const onConnected = () => {
      socket.join(owner);
      this.registry.add(owner, socket, check, expiryOf(doc), startedAt); // a guest's subject is its room
      // SPEC.md "Events": the guest's work session and the composition it opens.
      // Direct: it carries the work session id, the guest's credential, which must not be written to
      // the store (a reconnect is told again).
      if (composition !== undefined) direct(socket).emit('joinConfirmation', { workSessionId: doc._id, composition });
    };
    return { owner, onConnected };
  }

  private async composition(id: string | null | undefined): Promise<Doc | null> {
    if (!id) return null;
    this.compositions ??= this.deps.db.collection<Doc>(COMPOSITION_COLLECTION);
    return (await this.compositions).findOne({ _id: id });
  }

  /** Acts on an announcement here, then tells the other instances. A store outage only costs them the news. */
  private async announce(message: Omit<Message, 'o'>): Promise<void> {
    this.handle(message);
    try {
      await this.deps.store.publish(this.channel, JSON.stringify({ ...message, o: this.origin }));
    } catch (err) {
      this.deps.logger.warn({ err: (err as Error).message }, 'realtime: cannot tell the other instances; their sockets are checked when their store connection recovers');
    }
  }

  private receive(raw: string): void {
    let parsed: v.SafeParseResult<typeof messageSchema>;
    try {
      parsed = v.safeParse(messageSchema, JSON.parse(raw));
    } catch {
      return;
    }
    if (!parsed.success) {
      this.deps.logger.warn('realtime: ignored a malformed message on the pub/sub channel');
      return;
    }
    if (parsed.output.o !== this.origin) this.handle(parsed.output);
  }

  private handle(message: Omit<Message, 'o'>): void {
    this.registry.note(message.s);
    if (message.k === 'end') this.registry.end(message.s, 'unauthenticated');
    else void this.registry.recheck(message.s);
  }
}

/** What svc needs of an ioredis client or Cluster here: the adapter makes its own copies of it. */
interface AdapterConnection extends RecoveryRedis {
  duplicate(...args: unknown[]): AdapterConnection;
  disconnect(): void;
  quit(): Promise<unknown>;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/**
 * Rooms and broadcasts across instances: socket.io's Redis Streams adapter (packets go through one
 * Redis stream, `<keyPrefix>socket.io`). Chosen over the pub/sub adapter because a stream survives a
 * reconnect of an instance to Redis (a reader resumes at its last id: nothing published meanwhile is
 * lost); it works on one Redis, Sentinel and a Cluster (one stream key, one node).
 * Returns every connection it uses, for `close` (the adapter duplicates the one it is given).
 */
function streamsAdapter(io: RealtimeServer, connection: AdapterConnection, keyPrefix: string, logger: Logger, recovery: Recovery): AdapterConnection[] {
  // ioredis reconnects by itself; the store's own connection already reports an outage, so once is enough here.
  let reported = false;
  connection.on('error', (err) => {
    if (!reported) logger.debug({ err: err.message }, 'realtime adapter: Redis connection lost; reconnecting');
    reported = true;
  });
  const connections = [connection];
  const duplicate = connection.duplicate.bind(connection);
  connection.duplicate = (...args: unknown[]) => {
    const copy = duplicate(...args);
    connections.push(copy);
    return copy;
  };
  const adapterOf = createAdapter(connection, { streamName: `${keyPrefix}socket.io`, sessionKeyPrefix: `${keyPrefix}socket.io-session:`, maxLen: STREAM_MAX_LENGTH, blockTimeInMs: 5000 });
  // socket.io calls it with `new` (a function, not an arrow); what it returns is the adapter.
  io.adapter(function (nsp: Namespace) {
    return recovery.wrap(adapterOf(nsp));
  });
  return connections;
}

function guestOf(doc: WorkSessionDoc): WorkSessionGuest {
  return { id: doc._id, pluginData: doc.pluginData, composition: doc.composition ?? null };
}

function expiryOf(doc: WorkSessionDoc): number | undefined {
  return doc.expiresAt === null ? undefined : Date.parse(doc.expiresAt);
}
