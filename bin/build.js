#!/usr/bin/env node
// `npm run build`, and `npm start`'s build on a stale tree in development. Two rules make it safe for
// instances started together (two systemd units, a `git pull` followed by two starts):
// - under a lock (a directory: `mkdir` either creates it or fails, atomically), so one process builds
//   and the others wait for it, then find the build fresh and build nothing;
// - into a folder of its own, swapped in by renames once complete, so nobody ever imports a dist/ that
//   tsc is half-way through rewriting (that crashed an instance with "does not provide an export named").
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { buildConsole, writeConsole } from './console-build.js';
import { ensureDocsBundle } from './docs-bundle.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = path.join(root, 'dist');
const stampName = '.built';
/**
 * The workspace package that svc loads by name at run time (an app lists it in `plugins`): Node
 * resolves it to its own compiled dist/, as it will in an app that installed it, so it is built here too.
 * Its types import `@svc/core`, which its build resolves to the dist/ just built.
 */
const cliConnector = path.join(root, 'plugins', 'plugin-cli-connector');
const lock = path.join(root, 'dist.lock');

/**
 * The API reference page's browser script (`/docs/scalar.js`), copied into `<out>/vendor/scalar/` with
 * its package.json (name, version: the page's cache-busting `?v=`, licence): fetched once by
 * bin/docs-bundle.js, so a production install has nothing of it in node_modules.
 */
function vendorScalar(out) {
  const from = ensureDocsBundle();
  const target = path.join(out, 'vendor', 'scalar');
  mkdirSync(target, { recursive: true });
  for (const file of ['standalone.js', 'package.json']) copyFileSync(path.join(from, file), path.join(target, file));
}

/** The newest modification time of the sources that go into dist/. */
function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      // A workspace package's own build (plugins/plugin-cli-connector/dist) is output, not a source.
      if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name.startsWith('.')) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|js|json|html|css)$/.test(entry.name)) newest = Math.max(newest, statSync(full).mtimeMs);
    }
  };
  // The console (console/) is bundled with @svc/client and the example's DOM helpers it shares.
  for (const dir of ['src', 'routes', 'plugins', 'console', path.join('packages', 'client', 'src'), path.join('examples', 'login', 'src')]) walk(path.join(root, dir));
  for (const file of ['package.json', 'tsconfig.json', 'tsconfig.build.json']) newest = Math.max(newest, statSync(path.join(root, file)).mtimeMs);
  return newest;
}

/**
 * 'fresh', 'missing' (never built) or 'stale' (a source changed since the build). The stamp holds the
 * newest source time the build saw (older stamps: a date, so their own modification time counts).
 */
export function buildState() {
  const stamp = path.join(dist, stampName);
  if (!existsSync(stamp)) return 'missing';
  // An installed package (@svc/core from the registry or a tarball) has dist/ and no sources to build from.
  if (!existsSync(path.join(root, 'src'))) return 'fresh';
  if (!existsSync(path.join(cliConnector, 'dist', 'index.js'))) return 'missing';
  const built = Number(readFileSync(stamp, 'utf8'));
  return (Number.isFinite(built) ? built : statSync(stamp).mtimeMs) >= newestSource() ? 'fresh' : 'stale';
}

/** The lock's holder died mid-build (its pid is gone), or never wrote its pid within a minute. */
function abandoned() {
  try {
    const pid = Number(readFileSync(path.join(lock, 'pid'), 'utf8'));
    process.kill(pid, 0);
    return false;
  } catch (err) {
    if (err.code === 'EPERM') return false; // alive, another user's
    if (err.code !== 'ENOENT') return true; // ESRCH: no such process
    try {
      return Date.now() - statSync(lock).mtimeMs > 60_000;
    } catch {
      return false; // released meanwhile
    }
  }
}

/** Runs `fn` holding the build lock; waits (saying so once) while another process holds it. */
async function withLock(fn) {
  let said = false;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    if (abandoned()) {
      // Renamed away first: of several waiters that found it abandoned, only one removes it.
      const away = `${lock}.abandoned-${process.pid}`;
      try {
        renameSync(lock, away);
        rmSync(away, { recursive: true, force: true });
      } catch {
        // another waiter took it over first
      }
      continue;
    }
    if (!said) process.stderr.write('svc: another process is building dist/: waiting for it ...\n');
    said = true;
    await sleep(200);
  }
  writeFileSync(path.join(lock, 'pid'), String(process.pid));
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * Compiles a project into `out` whole: into a folder of its own first (`then` adds to it), swapped in by
 * renames, so a process starting meanwhile never imports a half-written build.
 */
function compileInto(tsc, project, out, then = () => {}) {
  const next = `${out}.next-${process.pid}`;
  const old = `${out}.old-${process.pid}`;
  // Folders of a builder killed mid-build (the lock says no builder is at work now): 60 MB each.
  const parent = path.dirname(out);
  for (const name of readdirSync(parent)) if (new RegExp(`^${path.basename(out)}\\.(next|old)-\\d+$`).test(name)) rmSync(path.join(parent, name), { recursive: true, force: true });
  // tsc prints its errors on stdout: they go to stderr, as this build's other notes do (a start that builds
  // first keeps stdout for the service's JSON log lines).
  const result = spawnSync(process.execPath, [tsc, '-p', project, '--outDir', next], { stdio: ['ignore', 2, 2], cwd: path.dirname(project) });
  try {
    if (result.status !== 0) throw new Error('the build failed (see above)');
    then(next);
  } catch (err) {
    rmSync(next, { recursive: true, force: true });
    throw err;
  }
  // A directory cannot be renamed over a non-empty one: move the old build aside, then the new one in.
  if (existsSync(out)) renameSync(out, old);
  renameSync(next, out);
  rmSync(old, { recursive: true, force: true });
}

/**
 * Builds dist/ unless it is fresh (or becomes fresh while waiting for another builder). Returns false
 * when TypeScript is not installed (a production install without devDependencies), throws when tsc fails.
 */
export async function build({ force = false } = {}) {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    return false;
  }
  return withLock(async () => {
    if (!force && buildState() === 'fresh') return true; // another process built it while we waited
    process.stderr.write('svc: building dist/ (npm run build) ...\n');
    // Read before compiling: a source saved during the build leaves the build stale, not stamped fresh.
    const sourcesAt = newestSource();
    const consoleFiles = await buildConsole();
    const consoleBuilt = (out) => writeConsole(path.join(out, 'console'), consoleFiles);
    compileInto(tsc, path.join(root, 'tsconfig.build.json'), dist, (out) => {
      vendorScalar(out);
      consoleBuilt(out);
    });
    compileInto(tsc, path.join(cliConnector, 'tsconfig.build.json'), path.join(cliConnector, 'dist'));
    // Last: the stamp says both are complete.
    writeFileSync(path.join(dist, stampName), String(sourcesAt));
    return true;
  });
}

// `node bin/build.js` (npm run build): always compiles, under the lock.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    if (!(await build({ force: true }))) {
      process.stderr.write('svc: TypeScript is not installed: run `npm ci` (with devDependencies) first\n');
      process.exitCode = 1;
    }
  } catch (err) {
    process.stderr.write(`svc: ${err.message}\n`);
    process.exitCode = 1;
  }
}
