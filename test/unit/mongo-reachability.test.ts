import { EventEmitter } from 'node:events';
import net from 'node:net';
import type { MongoClient } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { monitorSocketDestroyed, Reachability, unstickMonitor, type ReachabilityOptions } from '../../src/db/mongo.ts';
import { UnavailableError } from '../../src/http/errors.ts';

/** The driver's monitor, as Reachability sees it: heartbeat and server events on the client. */
function fakeDriver(opts: ReachabilityOptions = {}) {
  const client = new EventEmitter();
  const lines: { level: string; msg: string }[] = [];
  const logger = {
    error: (_: unknown, msg: string) => lines.push({ level: 'error', msg }),
    warn: (_: unknown, msg: string) => lines.push({ level: 'warn', msg }),
    info: (_: unknown, msg: string) => lines.push({ level: 'info', msg }),
  };
  const reach = new Reachability(client as unknown as MongoClient, logger as never, opts);
  return {
    reach,
    lines,
    started: (address = 'db:27017') => client.emit('serverHeartbeatStarted', { connectionId: address }),
    up: (address = 'db:27017') => client.emit('serverHeartbeatSucceeded', { connectionId: address }),
    down: (address = 'db:27017') => client.emit('serverHeartbeatFailed', { connectionId: address, failure: new Error('connect ECONNREFUSED') }),
    closed: (address = 'db:27017') => client.emit('serverClosed', { address }),
  };
}

/** A driver operation that settles when the test says so. */
function pendingOp<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { op: () => promise, resolve, reject };
}

const settled = async (p: Promise<unknown>) => {
  const result = await Promise.race([p.then(() => 'resolved', () => 'rejected'), new Promise((r) => setTimeout(() => r('pending'), 20))]);
  return result;
};

describe('MongoDB Reachability (fail fast from the driver monitor)', () => {
  it('runs operations while the monitor reaches the server', async () => {
    const d = fakeDriver();
    d.up();
    expect(await d.reach.read(async () => 1)).toBe(1);
    expect(await d.reach.write(async () => 2)).toBe(2);
  });

  it('once the last check failed: new operations 503 at once without reaching the driver; waiting reads 503 too, waiting writes keep waiting', async () => {
    const d = fakeDriver();
    d.up();
    const read = pendingOp<number>();
    const write = pendingOp<number>();
    const reading = d.reach.read(read.op);
    const writing = d.reach.write(write.op);

    d.down();
    await expect(reading).rejects.toBeInstanceOf(UnavailableError);
    expect(await settled(writing), 'a write may still be sent by the driver: not abandoned').toBe('pending');
    let called = false;
    await expect(
      d.reach.write(async () => {
        called = true;
      }),
    ).rejects.toBeInstanceOf(UnavailableError);
    await expect(d.reach.read(async () => (called = true))).rejects.toBeInstanceOf(UnavailableError);
    expect(called, 'the driver is not asked while the server is known unreachable').toBe(false);

    // The abandoned read ends later in the driver: handled, no unhandled rejection.
    read.reject(new Error('server selection timed out'));
    write.reject(new Error('server selection timed out'));
    await expect(writing).rejects.toThrow('server selection timed out');
  });

  it('the first successful check ends it; one error line per outage, one info line when back', async () => {
    const d = fakeDriver();
    d.up();
    d.down();
    d.down();
    d.down();
    await expect(d.reach.read(async () => 1)).rejects.toBeInstanceOf(UnavailableError);
    d.up();
    expect(await d.reach.read(async () => 1)).toBe(1);
    expect(d.lines).toEqual([
      { level: 'error', msg: 'database unreachable: answering 503 until it is back' },
      { level: 'info', msg: 'database reachable again' },
    ]);
  });

  it('before the first good check (start-up still connecting, and saying itself why it gives up): no outage lines', async () => {
    const d = fakeDriver();
    d.down();
    await expect(d.reach.read(async () => 1)).rejects.toBeInstanceOf(UnavailableError);
    d.up();
    expect(d.lines).toEqual([]);
    d.down();
    expect(d.lines).toEqual([{ level: 'error', msg: 'database unreachable: answering 503 until it is back' }]);
  });

  it('several servers: unreachable only when every one failed its last check; closed servers do not count', async () => {
    const d = fakeDriver();
    d.up('a:1');
    d.up('b:1');
    d.down('a:1');
    expect(await d.reach.read(async () => 1)).toBe(1);
    d.down('b:1');
    await expect(d.reach.read(async () => 1)).rejects.toBeInstanceOf(UnavailableError);
    d.up('b:1');
    d.closed('b:1');
    await expect(d.reach.read(async () => 1)).rejects.toBeInstanceOf(UnavailableError);
    d.closed('a:1');
    expect(await d.reach.read(async () => 1), 'a closed client is not "unreachable": the driver answers').toBe(1);
    expect(d.lines.map((l) => l.level)).toEqual(['error', 'info', 'error']);
  });

  it('no checks at all (load-balanced mode): operations always reach the driver', async () => {
    const d = fakeDriver();
    expect(await d.reach.write(async () => 'ok')).toBe('ok');
  });

  it('an operation that throws synchronously rejects and is not kept', async () => {
    const d = fakeDriver();
    d.up();
    await expect(
      d.reach.read(() => {
        throw new Error('bad filter');
      }),
    ).rejects.toThrow('bad filter');
    d.down();
    expect(d.lines).toHaveLength(1);
  });

  it('a check the driver never ends: after stuckAfterMs it is ended, its server counts as unreachable, and the next good check brings it back', async () => {
    const ended: string[] = [];
    const d = fakeDriver({ stuckAfterMs: 60, watchEveryMs: 10, unstick: (address) => ended.push(address) > 0 });
    try {
      d.up();
      d.started(); // ... and nothing more: the driver hangs in this check
      expect(await d.reach.read(async () => 1), 'not yet: a check may take a while').toBe(1);
      await new Promise((r) => setTimeout(r, 120));
      expect(ended).toEqual(['db:27017']);
      await expect(d.reach.read(async () => 1)).rejects.toBeInstanceOf(UnavailableError);
      expect(d.lines.map((l) => l.level)).toEqual(['warn', 'error']);
      d.started();
      d.up();
      expect(await d.reach.read(async () => 1)).toBe(1);
    } finally {
      d.reach.close();
    }
  });

  it('a check on a destroyed socket is ended at once, long before stuckAfterMs', async () => {
    const ended: string[] = [];
    let dead = false;
    const d = fakeDriver({ stuckAfterMs: 60_000, watchEveryMs: 10, onDeadSocket: () => dead, unstick: (address) => ended.push(address) > 0 });
    try {
      d.up();
      d.started();
      await new Promise((r) => setTimeout(r, 40));
      expect(ended, 'a live socket: the check may take its time').toEqual([]);
      dead = true;
      await new Promise((r) => setTimeout(r, 40));
      expect(ended).toEqual(['db:27017']);
      await expect(d.reach.read(async () => 1)).rejects.toBeInstanceOf(UnavailableError);
    } finally {
      d.reach.close();
    }
  });

  it('checks that end in time are never ended', async () => {
    const ended: string[] = [];
    // Checks of ~20 ms against a 2 s bound: a busy machine (a 20 ms timer firing after 60+ ms under load 17
    // ended a check before) must be 100x slower to end one; the bound's own firing is the test above's.
    const d = fakeDriver({ stuckAfterMs: 2000, watchEveryMs: 10, unstick: (address) => ended.push(address) > 0 });
    try {
      for (let i = 0; i < 6; i++) {
        d.started();
        await new Promise((r) => setTimeout(r, 20));
        if (i % 2) d.up();
        else d.down();
      }
      await new Promise((r) => setTimeout(r, 100));
      expect(ended).toEqual([]);
    } finally {
      d.reach.close();
    }
  });

  it("unstickMonitor hands the monitor connection's socket an error, and says when the driver has no such monitor; monitorSocketDestroyed reads the socket's state", () => {
    const socket = new EventEmitter();
    const errors: Error[] = [];
    socket.on('error', (err: Error) => errors.push(err));
    const client = { topology: { s: { servers: new Map([['db:27017', { monitor: { connection: { socket } } }]]) } } };
    expect(unstickMonitor(client as unknown as MongoClient, 'db:27017')).toBe(true);
    expect(errors[0]?.message).toMatch(/hung on a connection the server had closed/);
    expect(unstickMonitor(client as unknown as MongoClient, 'other:27017')).toBe(false);
    expect(unstickMonitor({} as MongoClient, 'db:27017')).toBe(false);
    expect(monitorSocketDestroyed(client as unknown as MongoClient, 'db:27017')).toBe(false);
    Object.assign(socket, { destroyed: true });
    expect(monitorSocketDestroyed(client as unknown as MongoClient, 'db:27017')).toBe(true);
    expect(monitorSocketDestroyed({} as MongoClient, 'db:27017')).toBe(false);
    const deaf = { topology: { s: { servers: new Map([['db:27017', { monitor: { connection: { socket: new EventEmitter() } } }]]) } } };
    expect(unstickMonitor(deaf as unknown as MongoClient, 'db:27017'), 'a socket without error listeners is left alone').toBe(false);
  });

  it("why: Node reports a write to a socket the peer closed, made before the socket's 'close', to the write's callback only", async () => {
    const server = net.createServer((s) => s.end()).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    const events: string[] = [];
    socket.on('error', () => events.push('error'));
    socket.on('drain', () => events.push('drain'));
    await new Promise((r) => socket.once('end', r));
    await new Promise((r) => setImmediate(r));
    // Destroyed, 'close' not yet emitted: the driver still counts the connection as open here.
    expect(socket.destroyed).toBe(true);
    const callback = new Promise<string | undefined>((r) => socket.write('hello', (err) => r((err as NodeJS.ErrnoException | undefined)?.code)));
    expect(await callback).toBe('EPIPE');
    await new Promise((r) => setTimeout(r, 50));
    expect(events, "neither 'drain' nor 'error': whoever waits for one of them waits forever").toEqual([]);
    server.close();
  });
});
