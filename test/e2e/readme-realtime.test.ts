// The socket.io snippet of docs/realtime.md works as shown: the block is taken from the page as it is
// and run by Node as a page would run it (a `location` of the frontend's page, with a guest link),
// against svc started as `npm start` starts it, with the landing seeds of docs/landing-seeds.md.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { codeBlocks, readDoc } from '../support/docs.ts';
import { startInstance } from '../support/realtime.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The first ```js block of the page `file` that contains `marker`. */
function block(file: string, marker: string): string {
  const found = codeBlocks(readDoc(file), 'js').find((b) => b.includes(marker));
  if (!found) throw new Error(`${file} has no js block with ${marker}`);
  return found;
}

/** Runs the snippet with `location` = pageUrl; lines of its console.log output arrive in `lines`. */
function runSnippet(dir: string, pageUrl: string): { child: ChildProcess; lines: string[]; until: (re: RegExp) => Promise<string> } {
  const file = path.join(dir, `snippet-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(file, `globalThis.location = new URL(${JSON.stringify(pageUrl)});\n${block('docs/realtime.md', "import { io } from 'socket.io-client'")}`);
  const child = spawn(process.execPath, [file], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop()!;
    lines.push(...parts);
    for (const w of waiters) w();
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const until = (re: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no line matching ${re} in 15 s; got ${JSON.stringify(lines)} ${stderr}`)), 15_000);
      const check = () => {
        const line = lines.find((l) => re.test(l));
        if (!line) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve(line);
      };
      waiters.add(check);
      check();
    });
  return { child, lines, until };
}

describe('docs: the socket.io client snippet (realtime.md) and the landing seeds (landing-seeds.md), as shown', () => {
  let svc: RunningServer;
  let dir: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
    dir = mkdtempSync(path.join(ROOT, 'test/.tmp/readme-rt-')); // inside the repo: socket.io-client resolves
    const seeds = (marker: string) => block('docs/landing-seeds.md', marker).replace(/'3f0c…'/, "'3f0c0000-0000-4000-8000-000000000000'");
    mkdirSync(path.join(dir, 'config'));
    writeFileSync(path.join(dir, 'config/compositions.js'), seeds('// config/compositions.js'));
    writeFileSync(path.join(dir, 'config/interactionLinks.js'), seeds('// config/interactionLinks.js'));
    writeFileSync(path.join(dir, 'svc.config.json'), '{}');
    svc = await startInstance({ appRoot: dir });
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await svc?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a guest link: connects, gets joinConfirmation with the seeded composition, and is told when access ends', async () => {
    const ws = await svc.instance.auth.workSessions.create({ pluginData: { svc__todo: {} }, composition: 'home', label: 'for the review' });
    const run = runSnippet(dir, `${svc.url}/?workSession=${ws._id}`);
    children.push(run.child);
    await run.until(/^connected /);
    expect(await run.until(/^guest of /)).toContain(ws._id);
    await run.until(/_id: 'home'/); // the composition document, printed by console.log over a few lines
    await svc.instance.auth.workSessions.update(ws._id, { isActive: false });
    expect(await run.until(/^access ended:/)).toBe('access ended: invalid_work_session');
    expect(await run.until(/^disconnected:/)).toBe('disconnected: io server disconnect');
    expect(await new Promise((r) => run.child.once('exit', r))).toBe(0); // nothing left running: no reconnect
  });

  it('a dead guest link and a page without one are refused with the codes the snippet prints', async () => {
    const dead = runSnippet(dir, `${svc.url}/?workSession=00000000-0000-4000-8000-000000000000`);
    const anonymous = runSnippet(dir, `${svc.url}/`);
    children.push(dead.child, anonymous.child);
    expect(await dead.until(/^refused:/)).toBe('refused: invalid_work_session');
    expect(await anonymous.until(/^refused:/)).toBe('refused: unauthenticated');
  });
});
