#!/usr/bin/env node
// `npm start`: runs the compiled service (dist/). In development, a dist/ that is missing or older than
// the sources is built first (bin/build.js: under a lock, swapped in whole), so `npm install && npm start`
// works on a fresh clone and two instances started together do not race. In production
// (NODE_ENV=production) it never builds: building is a release step, and a start that rebuilt would add
// the build's time to every restart. It runs in this process (npm's `exec`), so SIGTERM from a container
// or a process manager reaches the service itself.
import { build, buildState } from './build.js';

// On Bun: its allocator (mimalloc) hands memory freed for a few milliseconds back to the kernel
// (madvise) and faults it in again for the next requests: svc on Bun took about 0.1 page faults a
// request and 10% more CPU than with that return switched off (docs/runtimes.md, "Memory on Bun").
// mimalloc reads the setting once, when the process starts, so the entry starts itself again in place
// (`process.execve`: the same pid, nothing left waiting) with it set, unless the operator chose one.
if (globalThis.Bun && process.env.MIMALLOC_PURGE_DELAY === undefined) {
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, MIMALLOC_PURGE_DELAY: '-1' });
}

const state = buildState();
if (state !== 'fresh') {
  const what = state === 'missing' ? 'dist/ is missing' : 'dist/ is older than the sources';
  if (process.env.NODE_ENV === 'production') {
    process.stderr.write(`svc: ${what}, and a production start (NODE_ENV=production) never builds: run \`npm run build\` first (part of installing or releasing)\n`);
    process.exit(1);
  }
  process.stderr.write(`svc: ${what}: building it first\n`);
  let built;
  try {
    built = await build();
  } catch (err) {
    process.stderr.write(`svc: ${err.message}\n`);
    process.exit(1);
  }
  if (!built) {
    if (state === 'missing') {
      process.stderr.write('svc: dist/ is missing and TypeScript is not installed: run `npm run build` (or `npm ci` with devDependencies) first\n');
      process.exit(1);
    }
    process.stderr.write('svc: dist/ is older than the sources and TypeScript is not installed: running the existing build\n');
  }
}
// Secrets out of this process's environment before the service loads (dist/src/secret-env.js: the
// service runs in a worker started without them; this light module, not the server, is all this process loads).
// An older build without that module (no TypeScript to rebuild it) starts as it always did.
const secretEnv = await import('../dist/src/secret-env.js').catch(() => null);
await secretEnv?.keepSecretsOutOfEnviron();
// One door per runtime (docs/runtimes.md): `bun bin/start.js` serves on Bun.serve, `deno run -A bin/start.js` on Deno.serve.
const door = globalThis.Bun ? 'server-bun.js' : globalThis.Deno ? 'server-deno.js' : 'server.js';
const { main } = await import(`../dist/src/${door}`);
await main();
