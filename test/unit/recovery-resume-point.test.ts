// Where a client that has no offset resumes (src/realtime/recovery.ts, `track` and the start marker),
// step by step, with the adapter and Redis as stand-ins. The end-to-end proofs with two instances on a
// real Redis are in test/e2e/realtime-recovery.test.ts.
import { EventEmitter } from 'node:events';
import pino from 'pino';
import type { Socket } from 'socket.io';
import { describe, expect, it } from 'vitest';
import { Recovery } from '../../src/realtime/recovery.ts';

function setup(xadd: () => Promise<string | null> = async () => '1-0') {
  const written: string[] = [];
  const redis = { get: async () => null, set: async (_key: string, value: string) => void written.push(value), xadd };
  const recovery = new Recovery(redis, 'p:', 'p:socket.io', pino({ level: 'silent' }));
  const adapter = {
    persistSession(_session: { sid: string; pid: string; rooms: string[]; data: unknown }) {},
    restoreSession: async () => null,
    onRawMessage(_raw: unknown, _offset: string) {},
  };
  recovery.wrap(adapter);
  /** The instance's reader read the entry `offset` of this namespace (and delivered it). */
  const read = (offset: string) => adapter.onRawMessage({}, offset);
  const connect = (id: string) => {
    const conn = new EventEmitter();
    const socket = Object.assign(new EventEmitter(), { id, nsp: { adapter }, conn });
    recovery.track(socket as unknown as Socket);
    return { heartbeat: () => conn.emit('heartbeat') };
  };
  /** socket.io closing the socket: the session, then its resume point, written. */
  const close = async (sid: string) => {
    adapter.persistSession({ sid, pid: `pid-${sid}`, rooms: [], data: {} });
    await recovery.flush();
    return written.at(-1);
  };
  return { read, connect, close };
}

describe('the resume point of a client without an offset', () => {
  it('is where the instance was when the socket connected, not where it was at the close', async () => {
    const { read, connect, close } = setup();
    read('10-0');
    connect('s1');
    read('20-0'); // delivered into a connection that may be dead already
    expect(await close('s1')).toBe('10-0');
  });

  it('moves on by one heartbeat: the point taken at one answer to a ping holds from the next', async () => {
    const { read, connect, close } = setup();
    read('10-0');
    const { heartbeat } = connect('s1');
    read('20-0');
    heartbeat(); // proves what was written before its ping, which may have gone before 20-0
    expect(await close('s1')).toBe('10-0');
    const second = connect('s2');
    read('30-0');
    second.heartbeat();
    read('40-0');
    second.heartbeat(); // its ping went after the first answer, so after 30-0
    read('50-0');
    expect(await close('s2')).toBe('30-0');
  });

  it('on an instance that has read nothing, is the marker added when it started, even when the reader reads a later entry before the marker is answered', async () => {
    let answer!: (id: string) => void;
    const { read, connect, close } = setup(() => new Promise((resolve) => (answer = resolve)));
    connect('s1');
    read('90-0'); // another instance's emit, after the marker was sent
    answer('80-0');
    expect(await close('s1')).toBe('80-0');
  });

  it('for a socket it does not track, is the last entry read', async () => {
    const { read, close } = setup();
    read('10-0');
    expect(await close('s9')).toBe('10-0');
  });
});
