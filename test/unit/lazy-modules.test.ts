// Libraries the service loads on first use, not at start-up (src/auth/oauth/arctic.ts, src/auth/totp.ts,
// src/auth/origin.ts): no static import of them is reachable from the Node door. esbuild reads the import
// graph as Node would load it (type-only imports erased), without running it.
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Loaded with `import()`. */
const IMPORTED_LATER = ['arctic', 'otpauth', 'uqr'];
/** Loaded with `createRequire(...)(name)` where the caller is synchronous (a call esbuild does not follow). */
const REQUIRED_LATER = ['bowser'];

describe('libraries loaded on first use', () => {
  it(`src/server.ts imports none of ${[...IMPORTED_LATER, ...REQUIRED_LATER].join(', ')} at start-up`, async () => {
    const result = await build({ entryPoints: [path.join(ROOT, 'src/server.ts')], bundle: true, write: false, metafile: true, platform: 'node', format: 'esm', packages: 'external', logLevel: 'silent', outdir: '/nowhere' });
    const imports = Object.values(result.metafile.inputs).flatMap((input) => input.imports);
    const packageOf = (p: string) => p.split('/').slice(0, p.startsWith('@') ? 2 : 1).join('/');
    const atStart = new Set(imports.filter((i) => i.kind === 'import-statement' && i.external).map((i) => packageOf(i.path)));
    const later = new Set(imports.filter((i) => i.kind === 'dynamic-import').map((i) => packageOf(i.path)));
    expect(atStart.has('hono'), 'the graph was read (hono is imported at start-up)').toBe(true);
    for (const name of [...IMPORTED_LATER, ...REQUIRED_LATER]) expect(atStart.has(name), `${name} is imported at start-up`).toBe(false);
    for (const name of IMPORTED_LATER) expect(later.has(name), `${name} is not imported at all`).toBe(true);
  });
});
