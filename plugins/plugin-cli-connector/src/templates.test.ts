// Property tests of the argument validator (fast-check): for generated templates and values, no value
// that breaks its allow/deny/path rule ever becomes part of an argument vector, and every accepted value
// reaches a real program (spawned, no shell) as exactly one argv entry, byte for byte.

import fc from 'fast-check';
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Script } from './registry.ts';
import { CHUNK_COST, Runner } from './runner.ts';
import { ArgumentError, buildArgv, compileTemplate, placeholderCount } from './templates.ts';

const PRINT_ARGV = fileURLToPath(new URL('../../../test/fixtures/cli/print-argv.mjs', import.meta.url));

const patterns = fc.constantFrom('[a-z]+', '\\d{1,4}', '[A-Za-z0-9_.-]+', 'yes|no', '[^/]*', '.*');
/** Values with the characters attacks are made of. */
const values = fc.string({ unit: fc.constantFrom('a', 'b', '1', '2', '-', '.', '/', ' ', ';', '$', '(', ')', '`', '|', '&', '\n', '*', '\0', 'é', '"', "'"), maxLength: 12 });

describe('buildArgv (properties)', () => {
  it('allow: accepted exactly when the WHOLE value matches; deny: refused when any part matches', () => {
    fc.assert(
      fc.property(patterns, patterns, values, (allow, deny, value) => {
        const t = compileTemplate('p', [{ allow, deny }], '/');
        const whole = new RegExp(`^(?:${allow})$`).test(value);
        const anywhere = new RegExp(deny).test(value);
        const ok = whole && !anywhere && !value.includes('\0');
        try {
          expect(buildArgv(t, [value])).toEqual([value]);
          expect(ok).toBe(true);
        } catch (err) {
          expect(err).toBeInstanceOf(ArgumentError);
          expect(ok).toBe(false);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('allow given as a RegExp with flags: the whole value still (m would let ^ and $ match at a line break); i and u are kept', () => {
    const t = compileTemplate('p', [{ allow: /[0-9]{1,3}/gmy }], '/');
    for (const value of ['5\n; rm -rf /', '; rm -rf /\n5', '5\n', '\n5']) expect(() => buildArgv(t, [value]), JSON.stringify(value)).toThrow(ArgumentError);
    expect(buildArgv(t, ['42'])).toEqual(['42']);
    expect(buildArgv(t, ['42'])).toEqual(['42']); // no lastIndex carried from the call before
    expect(buildArgv(compileTemplate('p', [{ allow: /report-[a-z]+/i }], '/'), ['REPORT-Q'])).toEqual(['REPORT-Q']);
    // deny keeps m: it refuses more, never less.
    expect(() => buildArgv(compileTemplate('p', [{ deny: /^rm$/m }], '/'), ['ok\nrm'])).toThrow(ArgumentError);
  });

  it('path: whatever the value, an accepted one resolves inside the base (symlinks followed); NUL never passes', () => {
    const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'svc-cli-prop-')));
    const base = path.join(root, 'base');
    mkdirSync(path.join(base, 'a'), { recursive: true });
    symlinkSync(root, path.join(base, 'up'));
    const t = compileTemplate('p', [{ path: base }], '/');
    fc.assert(
      fc.property(fc.array(fc.constantFrom('..', '.', 'a', 'up', 'b', '', '/', '\0x', 'c.txt'), { maxLength: 6 }), (parts) => {
        const value = parts.join('/');
        try {
          const [resolved] = buildArgv(t, [value]);
          expect(resolved === base || resolved!.startsWith(`${base}/`)).toBe(true);
          expect(value.includes('\0')).toBe(false);
          expect(resolved!.includes(`${base}/up`)).toBe(false);
        } catch (err) {
          expect(err).toBeInstanceOf(ArgumentError);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('the count: exactly one value per placeholder, whatever the template shape', () => {
    const element = fc.oneof(fc.constant('static'), fc.constant({}), fc.array(fc.oneof(fc.constant('-x='), fc.constant({})), { minLength: 1, maxLength: 3 }));
    fc.assert(
      fc.property(fc.array(element, { maxLength: 5 }), fc.array(fc.constant('v'), { maxLength: 8 }), (template, given) => {
        const t = compileTemplate('p', template, '/');
        const n = placeholderCount(t);
        if (given.length === n) expect(buildArgv(t, given)).toHaveLength(template.length);
        else expect(() => buildArgv(t, given)).toThrow(ArgumentError);
      }),
    );
  });
});

describe('accepted values reach a real program byte for byte (spawn, no shell)', () => {
  const script = (args: unknown[]): Script => {
    const template = compileTemplate('argv', args, '/');
    return { alias: 'argv', exe: process.execPath, template, argCount: placeholderCount(template), encoding: 'utf8', hooks: {}, lines: false, admin: false };
  };

  it('any value without NUL, through `{}` and inside a concatenated argument', async () => {
    const s = script([PRINT_ARGV, {}, ['--opt=', {}, '!']]);
    const runner = new Runner({ outputCap: 1024 * 1024 }, () => undefined);
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 40 }).filter((x) => !x.includes('\0')), fc.string({ maxLength: 10 }).filter((x) => !x.includes('\0')), async (a, b) => {
        const argv = buildArgv(s.template, [a, b]);
        const { stdout, status } = await runner.script(s, argv, undefined, 5000);
        expect(status).toBe(0);
        expect(JSON.parse(stdout)).toEqual([a, `--opt=${b}!`]);
      }),
      { numRuns: 25 },
    );
  });
});

describe('registration errors name the alias', () => {
  it.each([
    [[{ allow: '(' }], /script "bad": args\[0\]\.allow is not a valid regular expression/],
    [[{ colour: 'x' }], /script "bad": args\[0\] has unknown placeholder keys colour/],
    [[['a', ['b']]], /script "bad": args\[0\]\[1\] cannot be an array/],
    [[{ path: '/does/not/exist' }], /script "bad": args\[0\]\.path "\/does\/not\/exist" does not exist/],
    ['x', /script "bad": args must be an array/],
  ])('%j', (args, message) => {
    expect(() => compileTemplate('bad', args, '/')).toThrow(message);
  });
});

describe('the output cap', () => {
  // One-line chunks (hooks.lines) past the cap: dropped one at a time, each drop copied the whole
  // array, and `seq 300000` took a minute with the event loop stalled for 14 s at a stretch (so its
  // 2 s timeout could not even fire). Now it finishes well within the default timeout.
  // Each kept line is a chunk, which costs CHUNK_COST bytes against the cap beside its text (a million
  // empty lines were a million array entries): what is kept costs between cap - 64 KiB and the cap.
  it('300,000 lines through a line hook within the default 2 s timeout: the newest output kept, costing between cap - 64 KiB and the cap', async () => {
    const template = compileTemplate('seq', ['300000'], '/');
    const script: Script = { alias: 'seq', exe: 'seq', template, argCount: 0, encoding: 'utf8', hooks: { stdout: (line) => line }, lines: true, admin: false };
    const cap = 1024 * 1024;
    const { stdout, status } = await new Runner({ outputCap: cap }, () => undefined).script(script, ['300000'], undefined, 2000);
    expect(status).toBe(0);
    expect(stdout.endsWith('\n299999\n300000\n')).toBe(true);
    const lines = stdout.split('\n').slice(0, -1).length;
    const cost = stdout.length + lines * CHUNK_COST;
    expect(cost).toBeLessThanOrEqual(cap);
    expect(cost).toBeGreaterThan(cap - 64 * 1024);
    expect(stdout.split('\n')[0]).toMatch(/^\d+$/); // whole lines were dropped, not parts of one
  });
});
