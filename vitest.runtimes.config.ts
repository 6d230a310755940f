import { spawnSync } from 'node:child_process';
import { defineConfig } from 'vitest/config';
import { workspaceSources } from './vitest.shared.ts';

/**
 * `npm run test:runtimes`: the service-level suites, those that start svc as a process and talk to it
 * over HTTP (and in Chromium behind nginx), with svc on Bun and then on Deno (`SVC_TEST_RUNTIME`,
 * test/support/spawn.ts). The runtime is the `bun` / `deno` on PATH (`.ci/run` installs the npm
 * registry's packages). Left out: the suites about Node's own HTTP parser (client-error,
 * payload-too-large) and Node's loader hooks (stdout-json), which each runtime does its own way
 * (docs/runtimes.md, "Differences").
 */
const runtime = process.env.SVC_TEST_RUNTIME;
if (runtime !== 'bun' && runtime !== 'deno') throw new Error('SVC_TEST_RUNTIME must be bun or deno (npm run test:runtimes sets it)');
const found = spawnSync(runtime, ['--version'], { encoding: 'utf8' });
if (found.status !== 0) throw new Error(`${runtime} is not on PATH: install it (npm install --no-save ${runtime}, then PATH=node_modules/.bin:$PATH) or see docs/runtimes.md`);
process.stdout.write(`runtimes suite: svc on ${runtime} ${found.stdout.trim().split('\n')[0]}\n`);

export default defineConfig({
  ...workspaceSources,
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    include: [
      'test/e2e/assets-stream.test.ts',
      'test/e2e/cache-control.test.ts',
      'test/e2e/cli-connector.test.ts',
      'test/e2e/config.test.ts',
      'test/e2e/csrf-origins.test.ts',
      'test/e2e/data-dir-modes.test.ts',
      'test/e2e/getex-connection-runtimes.test.ts',
      'test/e2e/migrations.test.ts',
      'test/e2e/pipelining.test.ts',
      'test/e2e/plugin-loader.test.ts',
      'test/e2e/resilience.test.ts',
      'test/e2e/seeds.test.ts',
      'test/e2e/start-runtime.test.ts',
      'test/e2e/users-admin.test.ts',
      'test/e2e/webhooks-redis.test.ts',
      'test/e2e/webhooks-restart.test.ts',
      'test/deploy/browser.test.ts',
      'test/deploy/topologies.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 240_000,
    pool: 'forks',
    // The deployment suites each start nginx, svc and Chromium: one file at a time, as `npm run test:e2e`.
    fileParallelism: false,
  },
});
