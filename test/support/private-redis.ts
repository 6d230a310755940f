// A redis-server of the test's own (not the shared one at 6379), on a port of its choosing, so a
// test can kill it, freeze it or pause it and start it again on the same port. No persistence.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';

export const redisServerAvailable: boolean = (() => {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return !r.error && r.status === 0;
})();

const live = new Set<ChildProcess>();
let exitHook = false;

export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  /** Sends `signal` (default SIGKILL) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** SIGSTOP / SIGCONT: the server keeps its connections but stops answering. */
  freeze(): void;
  thaw(): void;
  /** One command on a fresh connection (RESP), e.g. `command(['CLIENT', 'PAUSE', '1000', 'ALL'])`. */
  command(args: string[]): Promise<string>;
}

function connectable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.setTimeout(500);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

function sendCommand(port: number, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.setTimeout(3000);
    let reply = '';
    s.once('connect', () => s.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`));
    s.on('data', (d: Buffer) => {
      reply += d.toString('utf8');
      if (reply.endsWith('\r\n')) {
        s.end();
        resolve(reply.trim());
      }
    });
    s.once('error', reject);
    s.once('timeout', () => {
      s.destroy();
      reject(new Error(`redis on ${port}: no reply to ${args.join(' ')}`));
    });
  });
}

/** Starts `redis-server` on `port` and waits until it accepts connections (retrying a busy port). */
export async function startPrivateRedis(port: number, timeoutMs = 10_000): Promise<PrivateRedis> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    live.add(child);
    if (!exitHook) {
      exitHook = true;
      process.on('exit', () => {
        for (const c of live) c.kill('SIGKILL');
      });
    }
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString('utf8')));
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    let gone = false;
    void exited.then(() => {
      gone = true;
      live.delete(child);
    });

    while (!gone && Date.now() < deadline) {
      if (await connectable(port)) {
        try {
          if ((await sendCommand(port, ['PING'])) === '+PONG') break;
        } catch {
          // not ready yet
        }
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!gone && Date.now() <= deadline) {
      return {
        port,
        url: `redis://127.0.0.1:${port}`,
        pid: child.pid!,
        async kill(signal = 'SIGKILL') {
          if (gone) return;
          child.kill('SIGCONT'); // a frozen server would not handle SIGTERM
          child.kill(signal);
          await exited;
        },
        freeze: () => child.kill('SIGSTOP'),
        thaw: () => child.kill('SIGCONT'),
        command: (args) => sendCommand(port, args),
      };
    }
    child.kill('SIGKILL');
    await exited;
    if (Date.now() > deadline) throw new Error(`redis-server did not start on port ${port}:\n${output}`);
    await new Promise((r) => setTimeout(r, 200)); // port still busy: try again
  }
}
