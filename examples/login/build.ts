// Builds the example into a folder of static files: index.html, style.css, app.js (the app and
// @svc/client bundled by esbuild, the one inside tsx) and config.js (where the API is).
// `npx tsx examples/login/build.ts [outDir] [apiBase]`; `npm run example` builds and serves it.

import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DEFAULT_OUT_DIR = path.join(HERE, 'dist');

/** The script that tells the app where the API is: `/api` behind the proxy, or a full URL. */
export const configScript = (apiBase: string) => `window.SVC_API_BASE = ${JSON.stringify(apiBase)};\n`;

/** Builds into `outDir`; `apiBase` goes into config.js (default `/api`, same origin behind the proxy). */
export async function buildExample(outDir = DEFAULT_OUT_DIR, apiBase = '/api'): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: [path.join(HERE, 'src/app.ts')],
    outfile: path.join(outDir, 'app.js'),
    bundle: true,
    minify: true,
    sourcemap: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['svc-source'], // @svc/client's TypeScript source, as in the rest of the workspace
    target: ['chrome111', 'firefox111', 'safari16.4'],
    logLevel: 'warning',
  });
  for (const file of ['index.html', 'style.css']) copyFileSync(path.join(HERE, 'public', file), path.join(outDir, file));
  writeFileSync(path.join(outDir, 'config.js'), configScript(apiBase));
  return outDir;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = await buildExample(process.argv[2] ? path.resolve(process.argv[2]) : undefined, process.argv[3]);
  process.stdout.write(`built the example into ${out}\n`);
}
