#!/usr/bin/env node
// `npm start`: runs the compiled service (dist/), building it first when dist/ is missing or older than
// any source, so `npm install && npm start` works on a fresh clone. It runs in this process (npm's
// `exec`), so SIGTERM from a container or a process manager reaches the service itself.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stamp = path.join(root, 'dist', '.built');

/** The newest modification time of the sources that go into dist/. */
function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|js|json)$/.test(entry.name)) newest = Math.max(newest, statSync(full).mtimeMs);
    }
  };
  for (const dir of ['src', 'routes', 'plugins']) walk(path.join(root, dir));
  for (const file of ['package.json', 'tsconfig.json', 'tsconfig.build.json']) newest = Math.max(newest, statSync(path.join(root, file)).mtimeMs);
  return newest;
}

function build() {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    return false; // a production install without devDependencies: dist/ must come from the image build
  }
  process.stderr.write('svc: building dist/ (npm run build) ...\n');
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
  if (result.status !== 0) {
    process.stderr.write('svc: the build failed (see above)\n');
    process.exit(1);
  }
  writeFileSync(stamp, new Date().toISOString());
  return true;
}

if (!existsSync(stamp) || statSync(stamp).mtimeMs < newestSource()) {
  if (!build()) {
    if (!existsSync(stamp)) {
      process.stderr.write('svc: dist/ is missing and TypeScript is not installed: run `npm run build` (or `npm ci` with devDependencies) first\n');
      process.exit(1);
    }
    process.stderr.write('svc: dist/ is older than the sources and TypeScript is not installed: running the existing build\n');
  }
}
const { main } = await import('../dist/src/server.js');
await main();
