// svc's own store connection (src/store/getex-connection.ts) on the runtime under test: Node (npm test),
// and Bun's own socket and Deno's node:net (src/store/store-socket.ts) when `npm run test:runtimes` runs this
// file with SVC_TEST_RUNTIME=bun|deno (svc's other suites there reach it only through the session route).
// Against a real Redis of its own (database 3: its set-up's SELECT is sent too): values as Redis holds them,
// a 3 MB reply, 20,000 reads written at once (more than the kernel takes in one write), its connection
// killed by Redis, a close with reads in flight, and a port nothing listens on. Then against servers on
// loopback: replies a byte at a time, a malformed reply, no reply, a refused AUTH
// (test/fixtures/getex-connection/run.ts does them and reports).
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { redisServerAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis.ts';
import { freePort, PROJECT_DIR, RUNTIME } from '../support/spawn.ts';

let redis: PrivateRedis | undefined;
afterAll(() => redis?.kill());

const FIXTURE = path.join(PROJECT_DIR, 'test/fixtures/getex-connection/run.ts');

function command(): [string, string[]] {
  if (RUNTIME === 'bun') return ['bun', [FIXTURE]];
  if (RUNTIME === 'deno') return ['deno', ['run', '--allow-all', FIXTURE]];
  return [process.execPath, ['--import', 'tsx', FIXTURE]];
}

describe.skipIf(!redisServerAvailable)(`the store connection on ${RUNTIME}`, () => {
  it('reads values whole, many at once, fails on a killed connection and connects again, stays off where nothing listens; fails in flight on a bad or missing reply', async () => {
    redis = await startPrivateRedis(await freePort());
    const prefix = `svctest:${randomUUID().slice(0, 8)}:wire:`;
    const [file, args] = command();
    const run = spawnSync(file, args, {
      cwd: PROJECT_DIR,
      env: { ...process.env, REDIS_URL: `${redis.url}/3`, PREFIX: prefix, CLOSED_PORT: String(await freePort()) },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    expect(result).toEqual({
      small: true,
      large: true,
      missing: null,
      ttlPushed: true,
      many: { answers: 20_000, found: [[12_345, 'found']] },
      killed: { connections: 1, afterKill: expect.stringMatching(/^failed: the store connection (was lost|is closed)$/) },
      again: true,
      closeAnswered: 100,
      refusedReady: false,
      byteAtATime: ['hello', 'hello', 'hello'],
      malformed: { failed: 'failed: the store connection was lost', again: 'ok', connections: 2 },
      overdue: { failed: 'failed: the store connection was lost', again: 'ok', connections: 2 },
      authRefused: { reason: 'WRONGPASS invalid username-password pair or user is disabled.', ready: false, connections: 1 },
    });
  });
});
