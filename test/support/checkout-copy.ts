// svc's checkout as a fresh clone has it, for the tests of "svc's own checkout as the app root" (`npm start`
// or `svc doctor` there without SVC_APP_PATH). `npm test` never reads the real checkout's app files (issue 53):
// a developer's own svc.config.json (or .ts, .js), .env, config/ seeds, emails/ or .svc-data/ there would
// change what those tests see, so they run on this copy instead, which has none of them.

import { cpSync, existsSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_DIR, tempDir } from './spawn.ts';

/** What svc itself is made of: its sources, its bin, its bundled plugins and workspace packages, the vendored docs script, the admin console (with the example's DOM helpers it shares). */
const SVC_FILES = ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'bin', 'src', 'routes', 'plugins', 'packages', 'vendor', 'console', path.join('examples', 'login', 'src')];

/**
 * A temp folder (removed by `stopAll()`) holding svc's own files as they are in the working tree, modification
 * times kept (so a copied `dist/` is as fresh as the checkout's), with `node_modules` linked to the checkout's.
 * `dist: true` copies the build too (run `npm run build` first), for a start that runs compiled JavaScript.
 */
export function checkoutCopy({ dist = false }: { dist?: boolean } = {}): string {
  const root = tempDir('svc-checkout-');
  const names = dist ? [...SVC_FILES, 'dist'] : SVC_FILES;
  for (const name of names) {
    const from = path.join(PROJECT_DIR, name);
    if (!existsSync(from)) continue;
    cpSync(from, path.join(root, name), { recursive: true, preserveTimestamps: true, filter: (source) => path.basename(source) !== 'node_modules' });
  }
  symlinkSync(path.join(PROJECT_DIR, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  return root;
}
