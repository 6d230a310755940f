/**
 * The session lookup's `GETEX` on a connection of svc's own, in plain RESP: the one command nearly every
 * request sends (`GET /auth/session`, every authenticated route), without ioredis' per-command work.
 *
 * Why: for 100,000 `GETEX` in batches of 50 on one connection, ioredis took 2.7-2.9 µs of CPU per command
 * (a Command object, its own stream write and command timer, its reply bookkeeping), this 1.3 µs: one
 * string written per turn of the event loop, replies parsed straight from the socket's buffers
 * (docs/benchmarks.md, "Where the local cache's time goes"). Everything else stays on ioredis.
 *
 * It only ever speeds things up, never decides anything: `RedisStore.getEx` uses it while it is `ready`
 * and ioredis otherwise (connecting, reconnecting, or given up for good after a refused set-up). Only a
 * plain single server (`redis://`, no TLS) gets one; a Cluster, Sentinel or TLS setup stays on ioredis.
 * An outage fails what is in flight as ioredis would (the caller maps it to `UnavailableError`): the
 * socket's own error at once, or a reply overdue by `timeoutMs` (ioredis' `commandTimeout`), after which
 * the connection is dropped and made again in the background.
 */
import { ReplyError } from 'ioredis';
import { openStoreSocket, type StoreSocket } from './store-socket.ts';

export interface GetExConnectionOptions {
  host?: string;
  port?: number;
  /** A Unix socket instead of host and port. */
  path?: string;
  username?: string;
  password?: string;
  db?: number;
  /** A reply overdue by this much fails its command and drops the connection. */
  timeoutMs: number;
  /** The connection's set-up was refused (AUTH, SELECT): it stays off, once. */
  onRefused?: (message: string) => void;
}

interface Pending {
  resolve: (value: string | null) => void;
  reject: (err: Error) => void;
}

const CR = 13;
const RETRY_MAX_MS = 1000;
/** Opening the connection: longer than this is a Redis that does not answer (RedisStore's own limit). */
const CONNECT_TIMEOUT_MS = 2000;

/** One RESP value as a command's argument: `$<bytes>\r\n<text>\r\n`. */
const bulk = (text: string) => `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
const command = (...args: string[]) => `*${args.length}\r\n${args.map(bulk).join('')}`;

/**
 * Where the line from `from` ends (its CR), or -1 before it has all arrived. A loop rather than
 * `indexOf`: a reply's first line is a few bytes, fewer than a native call costs.
 */
function lineEnd(buf: Uint8Array, from: number): number {
  for (let i = from; i < buf.length; i++) if (buf[i] === CR) return i;
  return -1;
}

/** A bulk reply's length, `-1` or digits, read from the bytes between `from` and `to` (NaN: neither). */
function bulkLength(buf: Uint8Array, from: number, to: number): number {
  if (buf[from] === 0x2d /* - */) return to === from + 2 && buf[from + 1] === 0x31 /* 1 */ ? -1 : NaN;
  if (from === to) return NaN;
  let length = 0;
  for (let i = from; i < to; i++) {
    const digit = buf[i]! - 0x30;
    if (digit < 0 || digit > 9) return NaN;
    length = length * 10 + digit;
  }
  return length;
}

export class GetExConnection {
  /** True while commands can be sent on it (set up, not lost). */
  ready = false;
  private socket?: StoreSocket;
  private closed = false;
  private retries = 0;
  private retryTimer?: NodeJS.Timeout;
  /** Commands sent or to be sent, in order: Redis answers them in that order (empty: length 0, `take`). */
  private queue: (Pending | undefined)[] = [];
  private head = 0;
  /** What this turn sends, written once at its end (`setImmediate`), as RedisStore batches ioredis' writes. */
  private out = '';
  /** The part of a reply that has not fully arrived. */
  private rest?: Buffer;
  /**
   * What a `GETEX` command holds around its key, kept for the last key length and TTL (every session key
   * has the same length, every lookup the same TTL): one concatenation a command, no strings of its own.
   * With the reply read from its bytes (`lineEnd`, `bulkLength`: no `indexOf`, no string for the length),
   * svc on Node ran 94.5k -> 91.0-91.8k instructions a request (`npm run bench:instructions -- --only svc
   * --windows 3`), and svc on Bun made one native allocation a request fewer (19.5 against 20.5).
   */
  private keyBytes = -1;
  private before = '';
  private ttl = -1;
  private after = '';
  /** The overdue check: the command at the head of the queue, and since when it is there. */
  private watched?: Pending;
  private watchedSince = 0;
  private watchTimer?: NodeJS.Timeout;

  constructor(private readonly options: GetExConnectionOptions) {}

  /** Connects (and again after every loss, until `close`); `ready` once AUTH and SELECT are answered. */
  open(): void {
    if (this.closed || this.socket) return;
    const { host = '127.0.0.1', port = 6379, path } = this.options;
    const socket = openStoreSocket(
      { host, port, path, connectTimeoutMs: CONNECT_TIMEOUT_MS },
      {
        connected: () => this.setUp(socket),
        data: (chunk) => this.received(chunk),
        closed: () => this.lost(socket), // ends what is in flight
      },
    );
    this.socket = socket;
    this.watchTimer ??= setInterval(() => this.checkOverdue(), Math.max(10, Math.min(100, this.options.timeoutMs / 10))).unref();
  }

  /** AUTH and SELECT, as the URL asks: `ready` once they are answered; a refusal leaves it off for good. */
  private setUp(socket: StoreSocket): void {
    const setUp: Promise<string | null>[] = [];
    const { username, password, db } = this.options;
    if (password) setUp.push(this.send(username ? command('AUTH', username, password) : command('AUTH', password)));
    if (db) setUp.push(this.send(command('SELECT', String(db))));
    Promise.all(setUp).then(
      () => {
        if (this.socket !== socket) return;
        this.retries = 0;
        this.ready = true;
      },
      (err: Error) => {
        if (!(err instanceof ReplyError) || this.socket !== socket) return; // lost: tried again
        this.close();
        this.options.onRefused?.(err.message);
      },
    );
  }

  /** `GETEX key EX ttl`: the value, or null when there is none. Only while `ready`. */
  getEx(key: string, ttl: number): Promise<string | null> {
    const bytes = Buffer.byteLength(key);
    if (bytes !== this.keyBytes) this.before = `*4\r\n$5\r\nGETEX\r\n$${(this.keyBytes = bytes)}\r\n`;
    if (ttl !== this.ttl) this.after = `\r\n$2\r\nEX\r\n${bulk(String((this.ttl = ttl)))}`;
    return this.send(this.before + key + this.after);
  }

  /**
   * Stops for good (no new command, no reconnect), as ioredis' `quit` does: the reads in flight get
   * their replies first, within the overdue check's bound.
   */
  close(): void {
    this.closed = true;
    this.ready = false;
    clearTimeout(this.retryTimer);
    if (!this.socket) clearInterval(this.watchTimer);
    else if (this.queue.length === 0) this.socket.destroy(); // else once the last reply is in (`received`)
  }

  private send(text: string): Promise<string | null> {
    return new Promise((resolve, reject) => {
      if (!this.socket) return reject(new Error('the store connection is closed'));
      this.queue.push({ resolve, reject });
      if (this.out === '') setImmediate(this.flush);
      this.out += text;
    });
  }

  private readonly flush = () => {
    const text = this.out;
    this.out = '';
    if (text) this.socket?.write(text);
  };

  private take(): Pending | undefined {
    const p = this.queue[this.head];
    this.queue[this.head++] = undefined;
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    return p;
  }

  private received(chunk: Buffer): void {
    const buf = this.rest ? Buffer.concat([this.rest, chunk]) : chunk;
    this.rest = undefined;
    let at = 0;
    while (at < buf.length) {
      const eol = lineEnd(buf, at);
      if (eol < 0 || eol + 1 >= buf.length) break; // the line is not complete yet
      const type = buf[at];
      if (type === 0x24 /* $ */) {
        const length = bulkLength(buf, at + 1, eol);
        if (Number.isNaN(length)) return this.unexpected(); // a bulk length that is not a number
        if (length < 0) {
          at = eol + 2;
          this.take()?.resolve(null);
          continue;
        }
        const end = eol + 2 + length;
        if (end + 2 > buf.length) break; // the value is not complete yet
        const value = buf.toString('utf8', eol + 2, end);
        at = end + 2;
        this.take()?.resolve(value);
      } else if (type === 0x2b /* + */ || type === 0x3a /* : */) {
        const value = buf.toString('latin1', at + 1, eol);
        at = eol + 2;
        this.take()?.resolve(value);
      } else if (type === 0x2d /* - */) {
        const message = buf.toString('utf8', at + 1, eol);
        at = eol + 2;
        this.take()?.reject(new ReplyError(message));
      } else {
        return this.unexpected(); // a reply of a type no command here asks for
      }
    }
    if (at < buf.length) this.rest = buf.subarray(at);
    else if (this.closed && this.queue.length === 0) this.socket?.destroy(); // the last reply of a close
  }

  /** Nothing sent here is answered that way: the stream cannot be trusted any more, so it is made again. */
  private unexpected(): void {
    this.socket?.destroy();
  }

  /** A reply overdue: its command and all behind it fail, and the connection is made again. */
  private checkOverdue(): void {
    const headNow = this.queue[this.head];
    if (!headNow) return void (this.watched = undefined);
    const now = Date.now();
    if (headNow !== this.watched) {
      this.watched = headNow;
      this.watchedSince = now;
    } else if (now - this.watchedSince >= this.options.timeoutMs) {
      this.socket?.destroy();
    }
  }

  private lost(socket: StoreSocket): void {
    if (this.socket !== socket) return;
    this.socket = undefined;
    this.ready = false;
    this.rest = undefined;
    this.out = '';
    const failed = this.queue;
    const from = this.head;
    this.queue = [];
    this.head = 0;
    this.watched = undefined;
    const err = new Error('the store connection was lost');
    for (let i = from; i < failed.length; i++) failed[i]?.reject(err);
    if (this.closed) return clearInterval(this.watchTimer);
    const delay = Math.min(100 * ++this.retries, RETRY_MAX_MS);
    this.retryTimer = setTimeout(() => this.open(), delay).unref();
  }
}
