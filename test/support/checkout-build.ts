// The checkout's own dist/, for the files that run the compiled service from it (`npm start`, `svc start`,
// `bun bin/start.js`).

import { spawnSync } from 'node:child_process';
import { PROJECT_DIR } from './spawn.ts';

const BUILD_UNLESS_FRESH = "const { build, buildState } = await import('./bin/build.js'); if (buildState() !== 'fresh') await build();";

/**
 * Builds the checkout's dist/ when it is missing or older than the sources (bin/build.js, under its lock),
 * else leaves it alone; throws with the build's output when it fails. Never a forced build (`npm run build`):
 * `npm test` runs files two at a time (vitest.config.ts), and a forced build swaps dist/ away under a
 * service that another file is starting from it. A test that needs a stale or missing build makes one in
 * a `checkoutCopy` of its own, never here.
 */
export function buildCheckout(): void {
  const built = spawnSync(process.execPath, ['--input-type=module', '-e', BUILD_UNLESS_FRESH], { cwd: PROJECT_DIR, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`the build failed:\n${built.stdout}${built.stderr}`);
}
