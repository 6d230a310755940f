// The admin console (CONTRACT 16, docs/console.md): console/src/ (plain TypeScript on @svc/client) bundled
// by esbuild (the one inside tsx) with console/public/'s page and stylesheet. `npm run build` writes it to
// dist/console/ for the compiled service; run from the sources (tests, `npm run dev`) svc builds it in
// memory on the first request (src/http/admin-console.ts), so it never serves a stale copy.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const sources = path.join(root, 'console');

/** The console's files by name (`index.html`, `app.js`, `style.css`). */
export async function buildConsole() {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [path.join(sources, 'src', 'main.ts')],
    bundle: true,
    minify: true,
    write: false,
    outfile: 'app.js',
    format: 'esm',
    platform: 'browser',
    conditions: ['svc-source'], // @svc/client's TypeScript source, as in the rest of the workspace
    target: ['chrome111', 'firefox111', 'safari16.4'],
    legalComments: 'none',
    logLevel: 'warning',
  });
  const files = { 'app.js': Buffer.from(result.outputFiles[0].contents) };
  for (const name of ['index.html', 'style.css']) files[name] = readFileSync(path.join(sources, 'public', name));
  return files;
}

/** Writes the console's `files` (of `buildConsole`) into `out` (dist/console/ of a build). */
export function writeConsole(out, files) {
  mkdirSync(out, { recursive: true });
  for (const [name, contents] of Object.entries(files)) writeFileSync(path.join(out, name), contents);
}
