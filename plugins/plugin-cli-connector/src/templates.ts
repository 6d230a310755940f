/**
 * Argument templates (SPEC.md "Script configuration"): compiled once at registration, then every
 * request's runtime values are checked against them and become an argument vector of static strings
 * and validated values. No value is ever parsed, split or quoted: each placeholder yields exactly one
 * piece of one argument, and the program gets the vector as is (no shell).
 */
import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';

/** A runtime placeholder: `{}` (any value), or any of `allow`, `deny`, `path`. */
export interface Placeholder {
  allow?: string | RegExp;
  deny?: string | RegExp;
  path?: string;
}
/** One argument: a static string, a placeholder, or several of both concatenated into one argument. */
export type TemplateElement = string | Placeholder | (string | Placeholder)[];

interface CompiledPlaceholder {
  /** The whole value must match (anchored). */
  allow?: RegExp;
  /** No part of the value may match. */
  deny?: RegExp;
  /** The real path of the base directory the value must resolve inside. */
  base?: string;
}
type Piece = string | CompiledPlaceholder;
/** One argument of the vector: its pieces in order. */
export type CompiledTemplate = Piece[][];

const PLACEHOLDER_KEYS = new Set(['allow', 'deny', 'path']);

/** A problem with a request's values: which runtime argument (0-based), and the rule it broke. */
export class ArgumentError extends Error {
  constructor(
    readonly position: number | null,
    message: string,
  ) {
    super(message);
  }
}

function compilePattern(alias: string, what: string, pattern: unknown, anchored: boolean): RegExp {
  let source: string;
  let flags = '';
  if (pattern instanceof RegExp) {
    source = pattern.source;
    // `g` and `y` make `test` stateful (lastIndex): a value would pass or fail depending on the last call.
    // `m` lets `^` and `$` match at line breaks: an `allow` would pass "5\n; rm -rf /" on its first line
    // (CONTRACT 8: allow matches the whole value).
    flags = pattern.flags.replace(anchored ? /[gym]/g : /[gy]/g, '');
  } else if (typeof pattern === 'string') {
    source = pattern;
  } else {
    throw new Error(`script "${alias}": ${what} must be a regular expression or a string`);
  }
  try {
    return new RegExp(anchored ? `^(?:${source})$` : source, flags);
  } catch (err) {
    throw new Error(`script "${alias}": ${what} is not a valid regular expression: ${(err as Error).message}`, { cause: err });
  }
}

function compilePlaceholder(alias: string, where: string, p: Record<string, unknown>, baseDir: string): CompiledPlaceholder {
  const unknown = Object.keys(p).filter((k) => !PLACEHOLDER_KEYS.has(k));
  if (unknown.length) throw new Error(`script "${alias}": ${where} has unknown placeholder keys ${unknown.join(', ')} (allowed: allow, deny, path)`);
  const out: CompiledPlaceholder = {};
  if (p.allow !== undefined) out.allow = compilePattern(alias, `${where}.allow`, p.allow, true);
  if (p.deny !== undefined) out.deny = compilePattern(alias, `${where}.deny`, p.deny, false);
  if (p.path !== undefined) {
    if (typeof p.path !== 'string' || !p.path) throw new Error(`script "${alias}": ${where}.path must be a directory path`);
    try {
      out.base = realpathSync(path.resolve(baseDir, p.path));
    } catch {
      throw new Error(`script "${alias}": ${where}.path "${p.path}" does not exist`);
    }
  }
  return out;
}

function compilePiece(alias: string, where: string, el: unknown, baseDir: string): Piece {
  if (typeof el === 'string') return el;
  if (el instanceof RegExp || typeof el !== 'object' || el === null || Array.isArray(el)) {
    throw new Error(`script "${alias}": ${where} must be a string or a placeholder object`);
  }
  return compilePlaceholder(alias, where, el as Record<string, unknown>, baseDir);
}

/** Compiles a script's `args`; throws naming the alias and the element on any mistake. */
export function compileTemplate(alias: string, args: unknown, baseDir: string): CompiledTemplate {
  if (args === undefined) return [];
  if (!Array.isArray(args)) throw new Error(`script "${alias}": args must be an array`);
  return args.map((el, i) => {
    if (!Array.isArray(el)) return [compilePiece(alias, `args[${i}]`, el, baseDir)];
    if (el.length === 0) throw new Error(`script "${alias}": args[${i}] is an empty array`);
    return el.map((piece, j) => {
      if (Array.isArray(piece)) throw new Error(`script "${alias}": args[${i}][${j}] cannot be an array`);
      return compilePiece(alias, `args[${i}][${j}]`, piece, baseDir);
    });
  });
}

/** How many runtime values the template takes. */
export const placeholderCount = (t: CompiledTemplate): number => t.flat().filter((p) => typeof p !== 'string').length;

const isInside = (base: string, p: string): boolean => p === base || p.startsWith(base.endsWith(path.sep) ? base : `${base}${path.sep}`);

/** Where a symlink points, as written (resolved against its folder); '' when it cannot be read. */
function linkTarget(link: string): string {
  try {
    return path.resolve(path.dirname(link), readlinkSync(link));
  } catch {
    return '';
  }
}

/**
 * A value inside `base`, resolved component by component (CONTRACT section 8): each existing
 * component is looked at with `lstat`, a symlink is followed to its real target, which must exist
 * and lie inside the base (a dangling symlink is refused: writing through it would create a file
 * wherever it points); the first component that does not exist and everything after it are a path
 * to be created, appended as written. Resolved right before the spawn (same tick), and the program
 * gets the resolved real path.
 */
function insideBase(base: string, value: string, position: number): string {
  const outside = () => new ArgumentError(position, `argument ${position} is outside the allowed directory (path rule)`);
  const candidate = path.resolve(base, value);
  if (!isInside(base, candidate)) throw outside();
  const parts = path.relative(base, candidate).split(path.sep).filter(Boolean);
  let real = base;
  for (const [i, part] of parts.entries()) {
    const next = path.join(real, part);
    let stat;
    try {
      stat = lstatSync(next);
    } catch {
      // Nothing there: a path to be created (no symlink can hide in what does not exist).
      return path.join(next, ...parts.slice(i + 1));
    }
    if (stat.isSymbolicLink()) {
      let target: string;
      try {
        target = realpathSync(next);
      } catch {
        // Dangling (or a loop): outside when it points outside, else it leads nowhere.
        if (!isInside(base, linkTarget(next))) throw outside();
        throw new ArgumentError(position, `argument ${position} is a symlink that leads nowhere (path rule)`);
      }
      if (!isInside(base, target)) throw outside();
      real = target;
    } else real = next;
  }
  return real;
}

/**
 * The argument vector for these runtime values: throws ArgumentError naming the position and the
 * rule for a wrong count or a value that breaks its placeholder's rules.
 */
export function buildArgv(template: CompiledTemplate, values: readonly string[]): string[] {
  const expected = placeholderCount(template);
  if (values.length !== expected) {
    throw new ArgumentError(null, `this script takes ${expected} argument${expected === 1 ? '' : 's'}, ${values.length} given`);
  }
  let next = 0;
  return template.map((pieces) =>
    pieces
      .map((piece) => {
        if (typeof piece === 'string') return piece;
        const position = next++;
        const value = values[position]!;
        if (value.includes('\0')) throw new ArgumentError(position, `argument ${position} contains a NUL byte`);
        if (piece.allow && !piece.allow.test(value)) throw new ArgumentError(position, `argument ${position} does not match its allow pattern`);
        if (piece.deny?.test(value)) throw new ArgumentError(position, `argument ${position} matches its deny pattern`);
        return piece.base ? insideBase(piece.base, value, position) : value;
      })
      .join(''),
  );
}
