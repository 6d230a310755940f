import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { workspaceSources } from './vitest.shared.ts';

export default defineConfig({
  ...workspaceSources,
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    include: ['test/**/*.test.ts', 'plugins/**/*.test.ts', 'src/**/*.test.ts'],
    // Soak, outages under load and hostile input: `npm run test:resilience`; nginx + Chromium
    // deployment: `npm run test:e2e` (CI runs all three).
    exclude: ['test/resilience/**', 'test/deploy/**', 'test/cluster/**', '**/node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Suites share one Redis (each under its own key prefix) and one MongoDB test server.
    pool: 'forks',
    // At least two files at once: vitest's default (CPUs - 1) is one on a 2-core machine, where most files
    // wait on the servers and browsers they start, not on the CPU. Two: 410-470 s against 640-690 s. Files run
    // side by side, so none changes what others share: Redis counts go to a private Redis, a stale or missing
    // build is made in a checkoutCopy (test/support/checkout-copy.ts), never in the checkout's dist/.
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
