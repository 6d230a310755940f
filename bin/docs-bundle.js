#!/usr/bin/env node
// The `/docs` page's script: the standalone browser bundle of `@scalar/api-reference` (one 4 MB file
// that needs nothing else), kept in `vendor/scalar/` (not committed). It is fetched as the package's
// tarball alone (`npm pack`), not installed: as a devDependency it brought 263 packages and 154 MB for
// that one file, and 24 of them want Node 22, so `npm install` on Node 20 printed 120 EBADENGINE lines
// about code svc never runs on Node. Pinned here by version and sha512, as package-lock pins the rest;
// npm's cache answers later fetches without the network.
//
// Update: set `version`, and `integrity` from `npm view @scalar/api-reference@<version> dist.integrity`.
//
// `node bin/docs-bundle.js` fetches it (`npm run dev` and the test suites do); `npm run build` copies
// it into dist/.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

export const pinned = {
  name: '@scalar/api-reference',
  version: '1.72.1',
  integrity: 'sha512-XpEJ0rfc/cXbCrR+iC4kK0o/WwX2dTtGQbT049OlPKAHD6IMIFdTeGz2r+M27P2EDWKyUITRm/NzlP8z2pw/Ow==',
};

/** Where the source tree keeps it; the compiled service reads its copy in `dist/vendor/scalar/`. */
export const bundleDir = path.join(root, 'vendor', 'scalar');

/** The version recorded beside a fetched bundle, or undefined when there is none (or half of one). */
function fetchedVersion(dir) {
  try {
    if (!existsSync(path.join(dir, 'standalone.js'))) return undefined;
    return JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  } catch {
    return undefined;
  }
}

function run(command, args, cwd) {
  // npm is a .cmd file on Windows, which only a shell runs.
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', shell: process.platform === 'win32' });
  if (result.status !== 0) {
    const why = result.error?.message ?? (result.stderr.trim() || `exit code ${result.status}`);
    throw new Error(`${command} ${args.join(' ')} failed: ${why}`);
  }
  return result.stdout;
}

/**
 * Makes sure `dir` holds the pinned bundle (`standalone.js`, and a package.json with the package's
 * name, version and licence) and returns `dir`. Safe to run in several processes at once: each
 * fetches into a folder of its own and renames it into place.
 */
export function ensureDocsBundle(pin = pinned, dir = bundleDir) {
  if (fetchedVersion(dir) === pin.version) return dir;
  process.stderr.write(`svc: fetching the /docs page's script (${pin.name}@${pin.version}, one tarball) ...\n`);
  const work = `${dir}.fetch-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const spec = `${pin.name}@${pin.version}`;
    const packed = run('npm', ['pack', spec, '--pack-destination', work, '--json', '--prefer-offline', '--ignore-scripts', '--loglevel=error'], root);
    const tarball = path.join(work, JSON.parse(packed)[0].filename);
    const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
    if (integrity !== pin.integrity) throw new Error(`${spec}: the tarball's integrity is ${integrity}, not the pinned ${pin.integrity}`);
    run('tar', ['-xzf', tarball, '-C', work, 'package/dist/browser/standalone.js', 'package/package.json'], root);

    const next = path.join(work, 'scalar');
    mkdirSync(next);
    renameSync(path.join(work, 'package/dist/browser/standalone.js'), path.join(next, 'standalone.js'));
    const { name, version, license } = JSON.parse(readFileSync(path.join(work, 'package/package.json'), 'utf8'));
    writeFileSync(path.join(next, 'package.json'), `${JSON.stringify({ name, version, license }, null, 2)}\n`);
    // A directory cannot be renamed over a non-empty one: an older version goes aside first.
    try {
      renameSync(dir, path.join(work, 'old'));
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
    try {
      renameSync(next, dir);
    } catch (err) {
      if (fetchedVersion(dir) !== pin.version) throw err; // else another process put it there first
    }
    return dir;
  } catch (err) {
    throw new Error(`the /docs page's script could not be fetched: ${err.message}`, { cause: err });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    ensureDocsBundle();
  } catch (err) {
    process.stderr.write(`svc: ${err.message}\n`);
    process.exitCode = 1;
  }
}
