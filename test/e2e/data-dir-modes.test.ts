// The embedded database's folder holds password hashes, TOTP secrets and provider secrets (issue 52
// item 11): after a start it is 0700 and every file in it 0600, whatever the umask, also when the
// folder and its files already existed with an older svc's 0755 / 0644.

import { chmodSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startReadySvc, stopAll, tempDir } from '../support/spawn.ts';

const mode = (file: string) => (statSync(file).mode & 0o777).toString(8);

/** Every entry of the folder with its mode, e.g. `{ 'LOCK': '600', ... }`. */
function modes(dir: string): Record<string, string> {
  return Object.fromEntries(readdirSync(dir).map((name) => [name, mode(path.join(dir, name))]));
}

/** Starts svc on `dataDir` with a permissive umask (the child inherits it), signs an admin in, stops it. */
async function runOnce(dataDir: string) {
  const previous = process.umask(0);
  let svc;
  try {
    svc = await startReadySvc({ dataDir, env: { SVC_ADMIN_EMAIL: 'admin@example.com', SVC_ADMIN_PASSWORD: 'a long admin password' } });
  } finally {
    process.umask(previous);
  }
  // A write after start-up: a session's login touches the users collection.
  const res = await fetch(`${svc.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'admin@example.com', password: 'a long admin password' }) });
  expect(res.status).toBe(200);
  return svc;
}

describe('the embedded database folder is readable by the service user only', () => {
  afterAll(stopAll);

  it('a folder svc creates: 0700, its files 0600 (umask 000)', async () => {
    const dataDir = path.join(tempDir('svc-modes-'), 'data');
    const svc = await runOnce(dataDir);
    const files = modes(dataDir);
    expect(Object.keys(files)).toEqual(expect.arrayContaining(['LOCK', 'svc__core-user.db']));
    expect(mode(dataDir)).toBe('700');
    expect(Object.entries(files).filter(([, m]) => m !== '600')).toEqual([]);
    await svc.stop();
    // A stop compacts every collection (a rewrite through a temp file and a rename): still 0600.
    const after = modes(dataDir);
    expect(Object.keys(after)).toContain('svc__core-user.db');
    expect(Object.entries(after).filter(([, m]) => m !== '600')).toEqual([]);
  });

  it('a folder of an older svc (0755, files 0644) is tightened at start', async () => {
    const dataDir = path.join(tempDir('svc-modes-'), 'data');
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    writeFileSync(path.join(dataDir, 'svc__core-user.db'), '', { mode: 0o644 });
    writeFileSync(path.join(dataDir, 'notes.txt'), 'left by someone', { mode: 0o644 });
    chmodSync(path.join(dataDir, 'svc__core-user.db'), 0o644);
    chmodSync(path.join(dataDir, 'notes.txt'), 0o644);
    const svc = await runOnce(dataDir);
    expect(mode(dataDir)).toBe('700');
    const files = modes(dataDir);
    expect(files['notes.txt']).toBe('600');
    expect(Object.entries(files).filter(([, m]) => m !== '600')).toEqual([]);
    await svc.stop();
  });
});
