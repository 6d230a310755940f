import { defineConfig } from 'vitest/config';
import { workspaceSources } from './vitest.shared.ts';

/** `npm run test:resilience`: long-running suites (soak, outages under load, hostile input), one file at a time. */
export default defineConfig({
  ...workspaceSources,
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    include: ['test/resilience/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Load tests measure latency: never two at once on a 2-core machine.
    fileParallelism: false,
  },
});
