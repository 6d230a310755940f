import type { Logger } from 'pino';
import type { BroadcastOperator, DefaultEventsMap, Socket } from 'socket.io';

/** Why a socket was closed, as its client reads it in the `sessionEnded` event (CONTRACT error codes). */
export type EndCode = 'unauthenticated' | 'invalid_work_session';

/**
 * One socket, past the adapter: what is emitted is written to it now and stored nowhere. With connection
 * state recovery `socket.emit` goes through the adapter's Redis stream first, so it is kept there and
 * arrives after a disconnect that follows it: this is for notices that come before a disconnect, that
 * carry a credential, or that were stored already (recovered packets).
 */
export const direct = (socket: Socket): BroadcastOperator<DefaultEventsMap, unknown> => socket.nsp.local.to(socket.id);

/**
 * What re-checking a subject concluded: still valid (until `until`, epoch ms, when an end is known;
 * `refresh` updates each socket's data and answers false for a socket that lost its access), or over.
 */
export type CheckResult = { valid: true; until?: number; refresh?: (socket: Socket) => boolean } | { valid: false; code: EndCode };

interface Group {
  sockets: Set<Socket>;
  check: () => Promise<CheckResult>;
  timer?: NodeJS.Timeout;
  running?: Promise<void>;
  /** A recheck was asked for while one ran: its answer may predate the change, so run again. */
  again?: boolean;
}

/**
 * Tells the client why (`sessionEnded`), then disconnects it (the client does not reconnect by itself
 * after a server disconnect). `whole`: close the connection too, with every namespace on it.
 */
function close(socket: Socket, code: EndCode, whole = true): void {
  // Every namespace on the connection is told when it closes with this one: a frontend listens on the
  // main socket, whichever namespace was tracked first (socket.io's Client keeps them in `sockets`).
  const onConnection = (socket.client as unknown as { sockets?: Map<string, Socket> }).sockets;
  const told = whole && onConnection?.size ? [...onConnection.values()] : [socket];
  // Before the disconnect, and not kept for recovery: access is over.
  for (const s of told) direct(s).emit('sessionEnded', { code });
  socket.disconnect(whole);
}

/** setTimeout's ceiling (~24.8 days); a later end is re-checked then and scheduled again. */
const MAX_DELAY = 2 ** 31 - 1;
/** When a check cannot be made (store or database down): try again after this long. */
const RETRY_MS = 2000;
/** How long an announcement is remembered for sockets whose handshake it may have raced. */
const RECENT_MS = 60_000;
const RECENT_MAX = 10_000;

/**
 * The sockets of this process, grouped by what they stand on: `session:<sha256>` (a login) or
 * `work-session:<sha256>` (a guest). A group is re-checked when someone announces a change to its
 * subject (pub/sub, any instance) and when its known end arrives (one timer per group, set to the
 * session's or work session's expiry); a failed check closes its sockets. Nothing polls.
 */
export class ConnectionRegistry {
  private readonly groups = new Map<string, Group>();
  private readonly recent = new Map<string, number>();

  constructor(private readonly logger: Logger) {}

  /**
   * Tracks a connected socket. `startedAt` is when its handshake began: an announcement about its
   * subject since then may have been handled before the socket was here to see it, so it is checked.
   */
  add(subject: string, socket: Socket, check: () => Promise<CheckResult>, until: number | undefined, startedAt: number): void {
    let group = this.groups.get(subject);
    if (!group) {
      group = { sockets: new Set(), check };
      this.groups.set(subject, group);
      this.schedule(group, subject, until);
    }
    const g = group;
    g.sockets.add(socket);
    socket.once('disconnect', () => {
      g.sockets.delete(socket);
      if (g.sockets.size === 0 && this.groups.get(subject) === g) {
        clearTimeout(g.timer);
        this.groups.delete(subject);
      }
    });
    if ((this.recent.get(subject) ?? -Infinity) >= startedAt) void this.recheck(subject);
  }

  /** Remembers that `subject` was announced now (see `add`). */
  note(subject: string): void {
    const now = Date.now();
    this.recent.delete(subject);
    this.recent.set(subject, now);
    for (const [key, at] of this.recent) {
      // Insertion order: the rest is newer. A flood of logouts is capped, oldest first.
      if (at > now - RECENT_MS && this.recent.size <= RECENT_MAX) break;
      this.recent.delete(key);
    }
  }

  /** Closes every socket of `subject`, telling each client why. */
  end(subject: string, code: EndCode): void {
    const group = this.groups.get(subject);
    if (!group) return;
    this.groups.delete(subject);
    clearTimeout(group.timer);
    for (const socket of group.sockets) close(socket, code);
  }

  private codeOf(subject: string): EndCode {
    return subject.startsWith('work-session:') ? 'invalid_work_session' : 'unauthenticated';
  }

  /** Checks `subject` again and closes its sockets when it is no longer valid. */
  recheck(subject: string): Promise<void> {
    const group = this.groups.get(subject);
    if (!group) return Promise.resolve();
    if (group.running) {
      group.again = true;
      return group.running;
    }
    group.running = (async () => {
      do {
        group.again = false;
        let result: CheckResult;
        try {
          result = await group.check();
        } catch (err) {
          // The store or the database is out of reach: keep the sockets (they may be fine) and ask again soon.
          this.logger.warn({ err: (err as Error).message }, 'realtime: cannot check a connection, retrying');
          if (this.groups.get(subject) === group) this.schedule(group, subject, Date.now() + RETRY_MS);
          return;
        }
        if (this.groups.get(subject) !== group) return;
        if (!result.valid) {
          this.end(subject, result.code);
          return;
        }
        for (const socket of group.sockets) if (result.refresh?.(socket) === false) close(socket, this.codeOf(subject), false);
        this.schedule(group, subject, result.until);
      } while (group.again);
    })().finally(() => {
      group.running = undefined;
    });
    return group.running;
  }

  /** Re-checks every group: after a lost pub/sub connection, announcements may have been missed. */
  recheckAll(): Promise<void> {
    return Promise.all([...this.groups.keys()].map((subject) => this.recheck(subject))).then(() => {});
  }

  /** Stops every timer (the sockets themselves close with the engine). */
  clear(): void {
    for (const group of this.groups.values()) clearTimeout(group.timer);
    this.groups.clear();
    this.recent.clear();
  }

  private schedule(group: Group, subject: string, until: number | undefined): void {
    clearTimeout(group.timer);
    group.timer = undefined;
    if (until === undefined) return;
    // A few ms past the end, so the check sees it as reached.
    const delay = Math.min(Math.max(until - Date.now() + 25, 0), MAX_DELAY);
    group.timer = setTimeout(() => void this.recheck(subject), delay);
    group.timer.unref();
  }
}
