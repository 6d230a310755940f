import { defineConfig } from 'vitest/config';
import { workspaceSources } from './vitest.shared.ts';

/**
 * `npm run test:e2e`: the deployment suite (test/deploy/): nginx in front of two svc processes, a real
 * OpenID provider and headless Chromium. One file at a time: each starts a whole deployment.
 */
export default defineConfig({
  ...workspaceSources,
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    include: ['test/deploy/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 240_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
