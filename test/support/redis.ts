import { spawnSync } from 'node:child_process';
import net from 'node:net';

function listening(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.setTimeout(500);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/**
 * A real Redis for the suites: `REDIS_TEST_URL`, else 127.0.0.1:6379, starting `redis-server` there
 * when nothing listens. Returns null (with the reason on stderr) when none can be had.
 */
export async function ensureRedis(): Promise<string | null> {
  if (process.env.REDIS_TEST_URL) return process.env.REDIS_TEST_URL;
  const url = 'redis://127.0.0.1:6379';
  if (await listening(6379)) return url;
  const started = spawnSync('redis-server', ['--daemonize', 'yes', '--bind', '127.0.0.1', '--port', '6379', '--save', '', '--appendonly', 'no'], {
    encoding: 'utf8',
  });
  if (started.error || started.status !== 0) {
    process.stderr.write(`cannot start redis-server: ${started.error?.message ?? started.stderr}\n`);
    return null;
  }
  for (let i = 0; i < 50; i++) {
    if (await listening(6379)) return url;
    await new Promise((r) => setTimeout(r, 100));
  }
  process.stderr.write('redis-server started but 127.0.0.1:6379 does not answer\n');
  return null;
}
