/**
 * The socket under svc's own store connection (getex-connection.ts): node:net's on Node and Deno, Bun's own
 * (`Bun.connect`) on Bun.
 *
 * Why Bun's own: Bun's node:net is a JavaScript stream (a Duplex, with its buffering and events) over
 * that same native socket, and svc needs none of it: one write a turn, replies parsed from the chunks as
 * they come. Against node:net in the same runs (`npm run bench -- --pinned --only svc-bun --svc-b`), svc
 * on Bun served about 1.5% more requests a second in four runs of five, at 0.1-0.2 µs of CPU a request
 * less (13.1-13.2 against 13.3 µs; docs/benchmarks.md, stop 94). Small, but Bun / Node stood at 1.28-1.36
 * against its goal of 1.3. Deno keeps node:net: `Deno.connect` measured no gain (stop 87).
 */
import { connect } from 'node:net';

export interface StoreSocket {
  /** Sends the text; what the kernel does not take at once follows when it can, in order. */
  write(text: string): void;
  /** Closes it at once; `closed` follows. */
  destroy(): void;
}

export interface StoreSocketTarget {
  host: string;
  port: number;
  /** A Unix socket instead of host and port. */
  path?: string;
  /** Not connected by then: it is closed. */
  connectTimeoutMs: number;
}

export interface StoreSocketEvents {
  connected(): void;
  data(chunk: Buffer): void;
  /** Lost, refused, timed out or destroyed: once, and nothing comes after it. */
  closed(): void;
}

export function openStoreSocket(target: StoreSocketTarget, events: StoreSocketEvents): StoreSocket {
  return typeof Bun === 'undefined' ? openNodeSocket(target, events) : new BunStoreSocket(target, events);
}

function openNodeSocket({ host, port, path, connectTimeoutMs }: StoreSocketTarget, events: StoreSocketEvents): StoreSocket {
  const socket = path ? connect({ path }) : connect({ host, port });
  socket.setNoDelay(true);
  socket.setTimeout(connectTimeoutMs, () => socket.destroy());
  socket.on('data', events.data);
  socket.on('error', () => {}); // 'close' follows
  socket.on('close', events.closed);
  socket.on('connect', () => {
    socket.setTimeout(0);
    events.connected();
  });
  return socket;
}

/** The part of Bun's socket API used here (no @types/bun for it, as in src/server-bun.ts). */
interface BunSocket {
  /** The bytes the kernel took (fewer: the rest waits for `drain`), -1 once closed. */
  write(data: string | Uint8Array): number;
  terminate(): void;
  setNoDelay?(noDelay: boolean): void;
}
interface BunSocketHandlers {
  open(socket: BunSocket): void;
  data(socket: BunSocket, chunk: Buffer): void;
  drain(socket: BunSocket): void;
  /** The other end closed its side (FIN). */
  end(socket: BunSocket): void;
  close(socket: BunSocket): void;
  error(socket: BunSocket, err: Error): void;
  connectError(socket: BunSocket, err: Error): void;
}
declare const Bun: { connect(options: { hostname?: string; port?: number; unix?: string; socket: BunSocketHandlers }): Promise<BunSocket> } | undefined;

class BunStoreSocket implements StoreSocket {
  private socket?: BunSocket;
  /** What the kernel has not taken yet; later writes queue behind it. */
  private unsent?: Buffer;
  private done = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    { host, port, path, connectTimeoutMs }: StoreSocketTarget,
    private readonly events: StoreSocketEvents,
  ) {
    this.timer = setTimeout(() => this.destroy(), connectTimeoutMs);
    const destroy = () => this.destroy();
    Bun!
      .connect({
        ...(path ? { unix: path } : { hostname: host, port }),
        socket: {
          open: (socket) => {
            if (this.done) return socket.terminate(); // timed out first
            clearTimeout(this.timer);
            this.socket = socket;
            socket.setNoDelay?.(true);
            events.connected();
          },
          data: (_socket, chunk) => {
            if (!this.done) events.data(chunk);
          },
          drain: () => this.drain(),
          end: destroy,
          close: destroy,
          error: destroy,
          connectError: destroy,
        },
      })
      .catch(destroy);
  }

  write(text: string): void {
    if (!this.socket) return;
    if (this.unsent) {
      this.unsent = Buffer.concat([this.unsent, Buffer.from(text)]);
      return;
    }
    const sent = this.socket.write(text);
    // Commands are ASCII but for AUTH's password: a count of characters is a count of bytes for nearly all.
    if (sent !== text.length && sent < Buffer.byteLength(text)) this.unsent = Buffer.from(text).subarray(Math.max(sent, 0));
  }

  destroy(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.socket?.terminate();
    this.socket = this.unsent = undefined;
    this.events.closed();
  }

  private drain(): void {
    const unsent = this.unsent;
    if (!unsent || !this.socket) return;
    const sent = this.socket.write(unsent);
    this.unsent = sent < unsent.length ? unsent.subarray(Math.max(sent, 0)) : undefined;
  }
}
