// The `/docs` page's script is fetched as one pinned tarball (bin/docs-bundle.js) instead of installing
// @scalar/api-reference, whose 263 packages made `npm install` on Node 20 print 120 EBADENGINE lines
// (issue 37). These tests hold both halves: the fetch is pinned and safe to run in parallel, and no
// package left in the lockfile wants a Node line that package.json says svc supports.

import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { PROJECT_DIR, tempDir } from '../support/spawn.ts';

const script = path.join(PROJECT_DIR, 'bin/docs-bundle.js');

/** Runs ensureDocsBundle(pin, dir) in a process of its own. */
async function fetchInto(dir: string, pin?: Record<string, string>) {
  const code = `const m = await import(${JSON.stringify(script)}); m.ensureDocsBundle(${pin ? JSON.stringify(pin) : 'm.pinned'}, ${JSON.stringify(dir)});`;
  return promisify(execFile)(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' }).then(
    ({ stderr }) => ({ ok: true, stderr }),
    (err: { stderr: string }) => ({ ok: false, stderr: err.stderr }),
  );
}

describe('bin/docs-bundle.js', () => {
  it('refuses a tarball whose sha512 is not the pinned one, and leaves nothing behind', async () => {
    const pinned = JSON.parse(readFileSync(path.join(PROJECT_DIR, 'vendor/scalar/package.json'), 'utf8')) as { name: string; version: string };
    const parent = tempDir('svc-bundle-');
    const dir = path.join(parent, 'scalar');
    const wrong = { name: pinned.name, version: pinned.version, integrity: `sha512-${Buffer.alloc(64).toString('base64')}` };
    const run = await fetchInto(dir, wrong);
    expect(run.ok).toBe(false);
    expect(run.stderr).toContain(`the /docs page's script could not be fetched: ${pinned.name}@${pinned.version}: the tarball's integrity is sha512-`);
    expect(run.stderr).toContain(`not the pinned ${wrong.integrity}`);
    expect(existsSync(dir)).toBe(false);
    expect(readdirSync(parent)).toEqual([]); // its work folder is gone too
  }, 60_000);

  it('three processes fetching into one folder at once all succeed, with the pinned file', async () => {
    const parent = tempDir('svc-bundle-');
    const dir = path.join(parent, 'scalar');
    const runs = await Promise.all([fetchInto(dir), fetchInto(dir), fetchInto(dir)]);
    for (const run of runs) expect(run).toEqual({ ok: true, stderr: expect.stringMatching(/^svc: fetching the \/docs page's script \(@scalar\/api-reference@[\d.]+, one tarball\) \.\.\.\n$/) });
    expect(readdirSync(parent)).toEqual(['scalar']);
    expect(readdirSync(dir).sort()).toEqual(['package.json', 'standalone.js']);
    expect(readFileSync(path.join(dir, 'standalone.js')).equals(readFileSync(path.join(PROJECT_DIR, 'vendor/scalar/standalone.js')))).toBe(true);
    expect(JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'))).toEqual({ name: '@scalar/api-reference', version: expect.stringMatching(/^\d+\.\d+\.\d+$/), license: 'MIT' });
  }, 60_000);
});

describe('the lockfile and the supported Node lines', () => {
  it("every installed package accepts the oldest release of each Node line in package.json's engines (no EBADENGINE)", () => {
    const root = JSON.parse(readFileSync(path.join(PROJECT_DIR, 'package.json'), 'utf8')) as { engines: { node: string } };
    // "^20.19.0 || ^22.13.0 || >=24" -> 20.19.0, 22.13.0, 24.0.0
    const oldest = root.engines.node.split('||').map((range) => semver.minVersion(range)!.version);
    expect(oldest).toContain('20.19.0');
    const lock = JSON.parse(readFileSync(path.join(PROJECT_DIR, 'package-lock.json'), 'utf8')) as { packages: Record<string, { engines?: { node?: string } | string[] }> };
    const refusing: string[] = [];
    let checked = 0;
    for (const [where, entry] of Object.entries(lock.packages)) {
      const wanted = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (!where || !wanted) continue;
      checked++;
      for (const version of oldest) if (!semver.satisfies(version, wanted)) refusing.push(`${where} wants node ${wanted}, not ${version}`);
    }
    expect(checked).toBeGreaterThan(100);
    expect(refusing).toEqual([]);
  });
});
