// Prints the minified + gzipped size of @svc/client as a browser bundle (its dependency included):
// `npx tsx packages/client/scripts/size.ts`. esbuild is the one inside tsx.
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const entry = new URL('../src/index.ts', import.meta.url).pathname;
for (const [label, external] of [['with @simplewebauthn/browser', []], ['@svc/client alone', ['@simplewebauthn/browser']]] as const) {
  const out = await build({ entryPoints: [entry], bundle: true, minify: true, format: 'esm', platform: 'browser', target: 'es2022', write: false, external: [...external] });
  const code = out.outputFiles[0]!.contents;
  process.stdout.write(`${label}: ${(code.length / 1024).toFixed(1)} KiB minified, ${(gzipSync(code, { level: 9 }).length / 1024).toFixed(1)} KiB gzipped\n`);
}
