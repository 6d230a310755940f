// What `npm start` hands node, for a given Node version: package.json's start script run by `sh` as npm
// runs it (npm tells it its Node version in `npm_config_user_agent`), with a stand-in `node` that prints
// its arguments. Read, not parsed: the bench starts svc with these flags and the readme test checks the
// Dockerfile, the systemd unit and Deno's flags against them.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PROJECT_DIR = fileURLToPath(new URL('../../', import.meta.url));

export const startScript = (): string =>
  (JSON.parse(readFileSync(path.join(PROJECT_DIR, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;

/** node's flags under `npm start` on Node `version` (e.g. '24.21.0'); throws unless it runs `node [flags] bin/start.js`. */
export function npmStartNodeFlags(version: string = process.versions.node): string[] {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-start-script-'));
  try {
    writeFileSync(path.join(dir, 'node'), '#!/bin/sh\nprintf "%s\\n" "$@"\n', { mode: 0o755 });
    const out = execFileSync('sh', ['-c', startScript()], {
      cwd: PROJECT_DIR,
      env: { PATH: `${dir}:${process.env.PATH ?? ''}`, npm_config_user_agent: `npm/11.0.0 node/v${version} linux x64 workspaces/false` },
      encoding: 'utf8',
    });
    const args = out.trimEnd().split('\n');
    if (args.pop() !== 'bin/start.js' || !args.every((a) => /^--[\w-]+(?:=\S+)?$/.test(a))) {
      throw new Error(`package.json's start script does not run "node [flags] bin/start.js": ${startScript()}`);
    }
    return args;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
