import { defineConfig } from 'vitest/config';
import { workspaceSources } from './vitest.shared.ts';

/**
 * `npm run test:cluster`: svc on a real Redis Cluster and on Redis with Sentinel (test/cluster/), each
 * started by the suite on fixed loopback ports. One file at a time: they own those ports.
 */
export default defineConfig({
  ...workspaceSources,
  test: {
    include: ['test/cluster/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
