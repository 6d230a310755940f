import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Socket } from 'socket.io';
import * as v from 'valibot';
import { rooms } from './rooms.ts';

/** How long a dropped connection may come back and recover (socket.io's default, 2 minutes). */
export const RECOVERY_MS = 2 * 60_000;
/** The adapter's cap on its stream (its `maxLen` default), kept by the markers added here too. */
export const STREAM_MAX_LENGTH = 10_000;

/** What socket.io's adapter keeps of a disconnected socket (`persistSession` / `restoreSession`). */
interface Session {
  sid: string;
  pid: string;
  rooms: string[];
  data: unknown;
  missedPackets?: unknown[][];
}

/** A packet as the adapter delivers it to this instance's sockets (`data`: `[event, ...args]`). */
interface Packet {
  type: number;
  id?: number;
  data: unknown[];
}

/** To whom (rooms, none: everyone) and not to whom; `volatile` packets are never kept for recovery. */
interface BroadcastOptions {
  rooms: Set<string>;
  except: Set<string>;
  flags?: { volatile?: boolean };
}

/** The parts of socket.io's Redis Streams adapter that recovery wraps. */
interface RecoverableAdapter {
  persistSession(session: Session): void;
  restoreSession(pid: string, offset: string): Promise<Session | null>;
  onRawMessage?(raw: unknown, offset: string): void;
  /** Called right before every broadcast is delivered to this instance's sockets: its own and the other instances'. */
  addOffsetIfNecessary?(packet: Packet, opts: BroadcastOptions, offset: string): void;
}

/** A broadcast delivered to this instance's sockets while a recovering socket was not yet connected. */
interface Delivered {
  id: string;
  data: unknown[];
  rooms: string[];
  except: string[];
}

/** At most this many deliveries are kept while recoveries run (one takes a few round trips). */
const RECORDING_LIMIT = 10_000;
/** How long a recovery records (its socket may never connect: a later middleware refused it), and how long after it duplicates are held back. */
const RECORDING_MS = 30_000;

/** The adapter's own methods, before `wrap` replaced them. */
interface Originals {
  persist(session: Session): void;
  restore(pid: string, offset: string): Promise<Session | null>;
  /** The id of the last stream entry this namespace read: where a client that has no offset resumes. */
  lastOffset?: string;
  /**
   * What this instance delivered while recoveries run (emptied when none does): one log for all of
   * them, each recovery knowing where it started (mass reconnection after a restart: one copy).
   */
  log: { entries: Delivered[]; base: number; overflowed: boolean; recordings: Set<number> };
  /** Stream id -> sockets just recovered that were sent it then: a live delivery of it skips them. */
  heldBack: Map<string, Set<string>>;
}

/** What `restore` gives back: the missed packets, and those delivered here while it ran (call once connected). */
export interface Restored {
  missed: unknown[][];
  caughtUp(): unknown[][];
}

/** What recovery needs of the adapter's Redis connection (ioredis client or Cluster). */
export interface RecoveryRedis {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, px: 'PX', ms: number): Promise<unknown>;
  xadd(key: string, ...args: (string | number)[]): Promise<string | null>;
}

/** Who owns a socket: `user:<id>` for a login, `work-session:<sha256 of id>` for a guest (core's rooms). */
type Owner = string;

/** What a reconnecting client presents (socket.io-client sends both in `auth`, next to the app's own fields). */
const claimSchema = v.object({
  pid: v.optional(v.pipe(v.string(), v.maxLength(64))),
  offset: v.optional(v.pipe(v.string(), v.regex(/^\d{1,20}-\d{1,20}$/))),
});

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Stream ids (`<ms>-<seq>`): whether `id` comes after `than`. */
function laterId(id: string, than: string): boolean {
  const [ms, seq] = id.split('-').map(BigInt) as [bigint, bigint];
  const [thanMs, thanSeq] = than.split('-').map(BigInt) as [bigint, bigint];
  return ms > thanMs || (ms === thanMs && seq > thanSeq);
}

/** Whether a broadcast reaches a socket in `socketRooms` (as the adapter decides for missed packets). */
function addressedTo(socketRooms: string[], { rooms: to, except }: { rooms: string[]; except: string[] }): boolean {
  return (to.length === 0 || socketRooms.some((room) => to.includes(room))) && socketRooms.every((room) => !except.includes(room));
}
/** Where a stored session keeps the room of the caller it belonged to (core's `socket.data` fields are not stored). */
const OWNER_KEY = '__svcOwner';

/**
 * `socket.data` as a session keeps it in the store for RECOVERY_MS: the data a plugin put there, and,
 * instead of core's fields, the owner's room. A guest's work session id is its credential; only the
 * room name, which carries a hash of it, leaves the process.
 */
function storedData(data: unknown): Record<string, unknown> {
  const { authUser, workSession, ...pluginData } = (data ?? {}) as { authUser?: { userId?: string }; workSession?: { id?: string } } & Record<string, unknown>;
  const owner = authUser?.userId !== undefined ? rooms.user(authUser.userId) : workSession?.id !== undefined ? rooms.workSession(workSession.id) : undefined;
  return { ...pluginData, [OWNER_KEY]: owner };
}

/** The rooms core derives from the caller; a restored one must be the caller's own. */
const CORE_ROOM = /^(user|work-session):/;

/**
 * Connection state recovery (socket.io's `connectionStateRecovery`) with a guard. socket.io restores a
 * socket from the private id (`pid`) and offset its client presents, before any middleware runs: the
 * rooms, `socket.data` and the packets missed meanwhile (written to the client at once). A leaked pid
 * would then hand one user another's rooms and events. So socket.io never restores by itself here
 * (`restoreSession` answers nothing); core's handshake middleware authenticates the caller exactly as
 * a new connection, then calls `restore`, which keeps the session only when it belonged to the same
 * caller: the same user (any of their sessions) or the same work session. Anything else, or a core
 * room (`user:` / `work-session:`) that is not the caller's, and the socket starts fresh (logged at
 * warn) and the session is put back for its owner. Rooms a plugin joined come back with the session,
 * so only to the owner they were joined for.
 *
 * Store keys carry a hash of the pid, never the pid (a credential). A client that received no event
 * yet has no offset (socket.io resumes after the last event received); it resumes from a point its
 * instance keeps for it (`track`), stored when the socket closes (`<keyPrefix>socket.io-offset:<hash>`).
 */
export class Recovery {
  private readonly originals = new WeakMap<object, Originals>();
  /** Offsets being written; `flush` waits for them (and, on the same connection, the sessions before them). */
  private readonly writing = new Set<Promise<unknown>>();
  /** The id of a marker entry added when the first namespace is wrapped (see `resumePoint`). */
  private marker?: Promise<string | undefined>;
  /** Socket id -> where its client resumes when it has no offset (see `track`). */
  private readonly points = new Map<string, () => Promise<string | undefined>>();

  constructor(
    private readonly redis: RecoveryRedis,
    private readonly keyPrefix: string,
    private readonly streamName: string,
    private readonly logger: Logger,
  ) {}

  /** Takes over one namespace's adapter (called for each adapter the factory makes). */
  wrap<A extends object>(adapter: A): A {
    const a = adapter as unknown as RecoverableAdapter;
    const originals: Originals = {
      persist: a.persistSession.bind(a),
      restore: a.restoreSession.bind(a),
      log: { entries: [], base: 0, overflowed: false, recordings: new Set() },
      heldBack: new Map(),
    };
    this.originals.set(adapter, originals);
    void this.startMarker();
    a.restoreSession = () => Promise.resolve(null); // socket.io's own restore, before authentication: never
    a.persistSession = (session) => {
      const key = sha256(session.pid);
      originals.persist({ ...session, pid: key, data: storedData(session.data) });
      const write = (this.points.get(session.sid)?.() ?? this.resumePoint(originals))
        .then((offset) => offset !== undefined && this.redis.set(this.offsetKey(key), offset, 'PX', RECOVERY_MS))
        .catch(() => {});
      this.writing.add(write);
      void write.finally(() => this.writing.delete(write));
    };
    const onRawMessage = a.onRawMessage?.bind(a);
    if (onRawMessage) {
      a.onRawMessage = (raw, offset) => {
        originals.lastOffset = offset;
        onRawMessage(raw, offset);
      };
    }
    const addOffset = a.addOffsetIfNecessary?.bind(a);
    if (addOffset) {
      const { log } = originals;
      a.addOffsetIfNecessary = (packet, opts, offset) => {
        if (log.recordings.size && packet.type === 2 && packet.id === undefined && opts.flags?.volatile === undefined) {
          if (log.entries.length < RECORDING_LIMIT) log.entries.push({ id: offset, data: [...packet.data], rooms: [...opts.rooms], except: [...opts.except] });
          else log.overflowed = true;
        }
        addOffset(packet, opts, offset);
        const skip = originals.heldBack.get(offset);
        // A new set: the one in `opts` may be a broadcast operator's, which later emits reuse.
        if (skip) opts.except = new Set([...opts.except, ...skip]);
      };
    }
    return adapter;
  }

  /**
   * Keeps, for a socket just connected, where its client resumes if it has no offset then. Such a client
   * received no event of its rooms, so everything this instance delivered to it since it connected is
   * in question: it resumes from where the instance was in the stream then, moved on by engine.io's
   * heartbeat (a ping every 25 s, sent only once the last was answered). An answer proves that all
   * written before its ping arrived (one connection, in order), so all before the previous answer: the
   * point taken at one answer holds from the next. Not from where the instance was when the socket
   * closed: a connection that died unnoticed (no FIN; the server knows at the ping timeout) swallowed
   * what was delivered meanwhile.
   */
  track(socket: Socket): void {
    const originals = this.originals.get(socket.nsp.adapter);
    if (!originals) return;
    let confirmed = this.resumePoint(originals);
    let taken = confirmed;
    const heartbeat = () => {
      confirmed = taken;
      taken = this.resumePoint(originals);
    };
    const conn = socket.conn;
    conn.on('heartbeat', heartbeat);
    this.points.set(socket.id, () => confirmed);
    // After `persistSession`, which socket.io calls first.
    socket.once('disconnect', () => {
      conn.off('heartbeat', heartbeat);
      this.points.delete(socket.id);
    });
  }

  /**
   * For a socket whose handshake proved `owner`: restores the session its client presented (`auth.pid`,
   * `auth.offset`) when it is the same owner's: joins its rooms, keeps the data a plugin put in
   * `socket.data` (core's fields are the fresh ones) and returns the missed packets, to be sent once
   * connected. Returns undefined when there is nothing to restore (the socket starts fresh).
   *
   * The adapter reads the missed packets from the stream before the socket is connected: a broadcast
   * written after that read but delivered here before the socket could receive it reached nobody
   * (it was lost now and then: a flaky scale-out test). So what this instance delivers from the start
   * of a recovery is recorded, and `caughtUp()`, called once the socket is connected, gives the
   * socket's packets among them that the read did not have. A packet the read had can still be
   * delivered live once connected (this instance's reader lags behind the stream): that one is
   * held back for this socket, so each arrives once.
   */
  async restore(socket: Socket, owner: Owner): Promise<Restored | undefined> {
    const originals = this.originals.get(socket.nsp.adapter);
    const claim = v.safeParse(claimSchema, socket.handshake.auth);
    if (!originals || !claim.success || claim.output.pid === undefined) return undefined;
    const { pid } = claim.output;
    const key = sha256(pid);
    const { log, heldBack } = originals;
    const start = log.base + log.entries.length;
    log.recordings.add(start);
    let recorded: Delivered[] | undefined;
    const stopRecording = () => {
      if (recorded) return;
      recorded = log.entries.slice(start - log.base);
      if (log.overflowed) this.logger.warn({ kept: RECORDING_LIMIT }, 'realtime: more was delivered during a recovery than it keeps; the socket may miss some of it');
      log.recordings.delete(start);
      if (log.recordings.size === 0) {
        log.base += log.entries.length;
        log.entries = [];
        log.overflowed = false;
      }
    };
    setTimeout(stopRecording, RECORDING_MS).unref();
    let connecting = false; // restored: recording goes on until `caughtUp`
    try {
      const offset = claim.output.offset ?? (await this.redis.get(this.offsetKey(key)));
      if (typeof offset !== 'string') return undefined;
      const session = await originals.restore(key, offset).catch(() => null); // unknown, expired or trimmed away
      if (!session) return undefined;
      const { [OWNER_KEY]: was, ...pluginData } = (session.data ?? {}) as Record<string, unknown>;
      const restored = session.rooms.filter((room) => room !== session.sid);
      const foreign = restored.filter((room) => CORE_ROOM.test(room) && room !== owner);
      if (was !== owner || foreign.length > 0) {
        this.logger.warn(
          { caller: owner.slice(0, owner.indexOf(':')), sameOwner: was === owner, foreignRooms: foreign.length },
          'realtime: refused to recover a connection for a caller it did not belong to; the socket starts fresh',
        );
        const { missedPackets: _dropped, ...kept } = session;
        originals.persist(kept); // still its owner's to recover
        return undefined;
      }
      socket.data = { ...pluginData, ...socket.data };
      void socket.join(restored);
      // What the client presented, so it knows it recovered (`socket.recovered` on both ends).
      Object.assign(socket, { pid, recovered: true });
      const missed = session.missedPackets ?? [];
      connecting = true;
      return {
        missed,
        caughtUp: () => {
          stopRecording();
          const sent = new Set(missed.map((packet) => String(packet.at(-1))));
          const caught = recorded!
            .filter((d) => !sent.has(d.id) && laterId(d.id, offset) && addressedTo(session.rooms, d))
            .sort((x, y) => (laterId(x.id, y.id) ? 1 : -1))
            .map((d) => (sent.add(d.id), [...d.data, d.id]));
          for (const id of sent) heldBack.set(id, (heldBack.get(id) ?? new Set()).add(socket.id));
          let forgotten = false;
          const forget = () => {
            if (forgotten) return;
            forgotten = true;
            for (const id of sent) {
              const sockets = heldBack.get(id);
              sockets?.delete(socket.id);
              if (sockets?.size === 0) heldBack.delete(id);
            }
          };
          setTimeout(forget, RECORDING_MS).unref();
          socket.once('disconnect', forget);
          return caught;
        },
      };
    } finally {
      if (!connecting) stopRecording();
    }
  }

  /**
   * Where a client that has no offset resumes: the last entry of the namespace this instance read,
   * else (nothing read since it started) the marker entry added when it started.
   */
  private resumePoint(originals: Originals): Promise<string | undefined> {
    return originals.lastOffset !== undefined ? Promise.resolve(originals.lastOffset) : this.startMarker();
  }

  /**
   * A marker entry that no adapter acts on, added once, when this instance starts serving sockets (again
   * when that failed). Not when the first socket closes: then the marker could land after an event
   * emitted on another instance right after the close (this instance's connection busy, its reader
   * quicker), and the socket would resume past that event (lost: a flaky scale-out test).
   */
  private startMarker(): Promise<string | undefined> {
    this.marker ??= this.redis.xadd(this.streamName, 'MAXLEN', '~', STREAM_MAX_LENGTH, '*', 'nsp', '', 'type', '0').then(
      (id) => id ?? undefined,
      () => ((this.marker = undefined), undefined),
    );
    return this.marker;
  }

  /** Waits for the sessions of sockets that just closed to be written (graceful shutdown). */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.writing]);
  }

  private offsetKey(hash: string): string {
    return `${this.keyPrefix}socket.io-offset:${hash}`;
  }
}
