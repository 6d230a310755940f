import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCheckout } from '../support/checkout-build.ts';
import { RUNTIME, startSvc, stopAll } from '../support/spawn.ts';

// svc started as a user of Bun or Deno starts it (docs/runtimes.md, "Start it"): `bin/start.js`, which on Bun
// sets its allocator to keep freed memory for reuse and starts itself again in place (docs/runtimes.md,
// "Memory on Bun"). Read from the environment the serving process was started with (Linux's /proc).
const command = (): [string, string[]] => (RUNTIME === 'deno' ? ['deno', ['run', '--allow-all', 'bin/start.js']] : [RUNTIME === 'bun' ? 'bun' : process.execPath, ['bin/start.js']]);
const purgeDelay = (pid: number) =>
  readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .find((kv) => kv.startsWith('MIMALLOC_PURGE_DELAY='));

// bin/start.js runs dist/: built here when it is missing or stale (CI's earlier stages have built it), so the
// start below is not a build racing the test's time.
beforeAll(buildCheckout, 180_000);
afterAll(stopAll);

describe.runIf(process.platform === 'linux')(`bin/start.js on ${RUNTIME}`, () => {
  it(RUNTIME === 'bun' ? 'serves in the process started, with MIMALLOC_PURGE_DELAY=-1' : 'adds no allocator setting', async () => {
    const svc = await startSvc({ command: command(), startTimeoutMs: 180_000 });
    expect(svc.ready, svc.output()).toBe(true);
    expect((await fetch(`${svc.url}/health`)).status).toBe(200);
    // The pid spawned is the one serving: `process.execve` replaced the image, nothing waits in front of it.
    expect(purgeDelay(svc.pid)).toBe(RUNTIME === 'bun' ? 'MIMALLOC_PURGE_DELAY=-1' : undefined);
    expect(await svc.stop('SIGTERM')).toBe(0);
  });

  it("keeps the operator's MIMALLOC_PURGE_DELAY", async () => {
    const svc = await startSvc({ command: command(), env: { MIMALLOC_PURGE_DELAY: '250' }, startTimeoutMs: 180_000 });
    expect(svc.ready, svc.output()).toBe(true);
    expect(purgeDelay(svc.pid)).toBe('MIMALLOC_PURGE_DELAY=250');
    expect(await svc.stop('SIGTERM')).toBe(0);
  });
});
