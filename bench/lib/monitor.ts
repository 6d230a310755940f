import { connect } from 'node:net';

/**
 * Redis' `MONITOR` on a socket of its own: for each command Redis runs, where it came from (the `ip:port`
 * of the connection that sent it, or `lua` for a script's own commands).
 *
 * Not ioredis' `monitor()`: when `MONITOR`'s first lines arrive in the same chunk as its `+OK`, ioredis has
 * not yet put its connection in monitor mode and fails it ("Command queue state error", redis/ioredis#1981).
 * On a busy Redis that failed a bench round (stop 94).
 */
export async function monitorSources(host: string, port: number, onCommand: (source: string) => void): Promise<{ close(): void }> {
  const socket = connect({ host, port });
  socket.setEncoding('latin1');
  let rest = '';
  let started = false;
  await new Promise<void>((resolve, rejected) => {
    // A failed start closes the socket too (nothing else holds it). Both listeners stay on after the start,
    // when rejecting does nothing: an error then is `close`'s to end.
    const reject = (err: Error) => {
      rejected(err);
      socket.destroy();
    };
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('MONITOR: the connection closed before its +OK')));
    socket.on('data', (text: string) => {
      const lines = (rest + text).split('\r\n');
      rest = lines.pop()!;
      for (const line of lines) {
        if (!started) {
          if (line !== '+OK') return reject(new Error(`MONITOR was answered ${JSON.stringify(line)}`));
          started = true;
          resolve();
          continue;
        }
        // `+1796650054.233879 [0 127.0.0.1:48774] "getex" ...`: the database, then the source.
        const source = /^\+[\d.]+ \[\d+ ([^\]]+)\]/.exec(line)?.[1];
        if (source) onCommand(source);
      }
    });
    socket.write('MONITOR\r\n');
  });
  return { close: () => socket.destroy() };
}
