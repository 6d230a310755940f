import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const MODULE = pathToFileURL(path.resolve('src/tick-object-shape.ts')).href;

/**
 * A process that makes tick objects, goes idle through full collections with none alive, makes more,
 * then prints V8's feedback of `process.nextTick` (`%DebugPrint`, behind `--allow-natives-syntax`; in
 * a Function so that tsx's parser never sees the syntax).
 */
const SCRIPT = `
if (process.argv[2] === 'keep') (await import(${JSON.stringify(MODULE)})).keepTickObjectShape();
const burst = () => new Promise((resolve) => { let n = 0; const step = () => (++n < 20000 ? process.nextTick(step) : resolve()); step(); });
await burst();
await new Promise((resolve) => setTimeout(resolve, 20));
for (let i = 0; i < 6; i++) { globalThis.gc(); await new Promise((resolve) => setTimeout(resolve, 5)); }
await burst();
new Function('f', '%DebugPrint(f)')(process.nextTick);
`;

const dir = mkdtempSync(path.join(tmpdir(), 'svc-tick-shape-'));
const script = path.join(dir, 'ticks.mjs');
writeFileSync(script, SCRIPT);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The states of the feedback of `process.nextTick`'s property definitions in its tick object literal. */
async function tickLiteralFeedback(mode: 'keep' | 'plain'): Promise<string[]> {
  // V8 prints through C's stdio, which a pipe would leave unflushed at exit: into a file instead.
  const out = path.join(dir, `${mode}.txt`);
  const fd = openSync(out, 'w');
  let stderr = '';
  try {
    const child = spawn(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--import', 'tsx', script, mode], { stdio: ['ignore', fd, 'pipe'], timeout: 60_000 });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve, reject) => child.on('error', reject).on('close', resolve));
    expect(code, stderr).toBe(0);
  } finally {
    closeSync(fd);
  }
  const stdout = readFileSync(out, 'utf8');
  const states = [...stdout.matchAll(/DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((m) => m[1]!);
  expect(states.length, `V8's feedback of process.nextTick, as printed:\n${stdout.slice(-3000)}\n${stderr.slice(-2000)}`).toBeGreaterThanOrEqual(4);
  return states;
}

describe('keepTickObjectShape', () => {
  it("without it, idle full collections leave process.nextTick's tick object literal megamorphic (why it exists)", async () => {
    const states = await tickLiteralFeedback('plain');
    expect(states).toContain('MEGAMORPHIC');
  });

  it('with it, the literal stays monomorphic through the same collections', async () => {
    const states = await tickLiteralFeedback('keep');
    expect(states.every((state) => state === 'MONOMORPHIC')).toBe(true);
  });
});
