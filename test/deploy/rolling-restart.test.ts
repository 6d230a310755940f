// A rolling restart behind deploy/nginx.conf: while POSTs stream through nginx, each instance in turn
// gets SIGTERM and is started again. nginx keeps idle connections to svc (keepalive 16) and does not
// retry a POST whose connection reset; svc used to close its idle connections at once on SIGTERM, so a
// POST nginx had just sent on one met a reset: 502 (1-2 per restart, an operator's audit). Behind a
// proxy (`server.trustProxy`), svc now leaves idle connections to end as they always do (nginx first).

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReadySvc, stopAll, tempDir, type SvcProcess } from '../support/spawn.ts';
import { deploySite, missingPrograms, pickPort, startNginx, type Nginx } from './support/deployment.ts';

const noNginx = missingPrograms().some((p) => p.startsWith('nginx'));
if (noNginx && process.env.CI === 'true') throw new Error('CI=true but nginx (nginx-light) is missing');

describe.skipIf(noNginx)('a rolling restart behind nginx', () => {
  const instances: SvcProcess[] = [];
  let nginx: Nginx;
  let app: string;
  let appRoot: string;
  const ports: number[] = [];

  beforeAll(async () => {
    appRoot = tempDir('svc-rolling-');
    writeFileSync(path.join(appRoot, 'svc.config.json'), JSON.stringify({ server: { trustProxy: 1 } }));
    ports.push(await pickPort(), await pickPort());
    // Each its own embedded store and database: POST /auth/logout without a cookie needs neither shared.
    for (const port of ports) instances.push(await startReadySvc({ appRoot, port }));
    const [appPort, otherPort, deadPort] = await Promise.all([pickPort(), pickPort(), pickPort()]);
    const site = deploySite({ app: [ports[0]!, ports[1]!], workbench: deadPort, appPort, workbenchPort: otherPort });
    app = `http://127.0.0.1:${appPort}`;
    nginx = await startNginx(site, [`${app}/config.js`]);
  });
  afterAll(async () => {
    await nginx?.stop();
    await stopAll();
  });

  it('2 restarts, one instance after the other, under rounds of 8 POSTs: every POST answered by svc (204), none 502', async () => {
    const statuses: Record<number, number> = {};
    let streaming = true;
    const post = async () => {
      const res = await fetch(`${app}/api/auth/logout`, { method: 'POST' });
      await res.arrayBuffer();
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    };
    // Rounds of 8 POSTs at once, the next when all are answered: nginx (one worker, round robin)
    // sends 4 of each round to each instance, so once warm it always holds the connections a round
    // needs and opens none to an instance that serves. A connection nginx opens in the instant svc
    // stops listening completes its handshake in the kernel's accept queue and is reset with the
    // listener, a POST nginx does not retry (502): the kernel's race, not svc's (docs/operations.md,
    // "Shutdown"), which 8 free-running streams met about once in ten runs (nginx opens one whenever an
    // instance's share of them exceeds its idle connections). What this test is about stays: at each
    // signal, POSTs in flight and idle keep-alive connections that nginx sends the next round on.
    const rounds = (async () => {
      while (streaming) await Promise.all(Array.from({ length: 8 }, post));
    })();
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await pause(2000); // warm: nginx has opened the connections a round needs
    for (const i of [0, 1]) {
      expect(await instances[i]!.stop()).toBe(0);
      await pause(300); // the other instance alone
      instances[i] = await startReadySvc({ appRoot, port: ports[i] });
      // As an operator's rolling restart does: the next instance only once nginx sends to this one
      // again (it skips a server for fail_timeout, 10 s by default, after a refused connection), and
      // its connections to it are open again.
      await pause(12_000);
    }
    streaming = false;
    await rounds;
    expect(statuses[204], JSON.stringify(statuses)).toBeGreaterThan(100);
    expect(statuses, `answers by status; nginx: ${nginx.errors().split('\n').slice(0, 12).join('\n')}`).toEqual({ 204: statuses[204] });
  });
});
