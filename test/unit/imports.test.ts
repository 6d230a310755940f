// The code's import graph stays a tree of layers (issue 37, "Structure"): no module imports itself
// through others (type-only imports count: a cycle of types is a cycle of ideas, and the next value
// import along it is a start-up order bug), and plugins reach the stores through the instance
// (`Store.inspect` and the like), never through a store adapter of src/store/.
// The imports are read by TypeScript's own scanner (`preProcessFile`: static, type-only, re-exports,
// side-effect and dynamic `import()`), which ignores comments and strings.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { PROJECT_DIR } from '../support/spawn.ts';

type Graph = Map<string, string[]>;

/** The TypeScript sources under `dirs` (tests, declarations and node_modules left out). */
function sources(root: string, dirs: string[]): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|mts|cts)$/.test(entry.name) && !/\.d\.[cm]?ts$/.test(entry.name) && !/\.test\.[cm]?ts$/.test(entry.name)) found.push(full);
    }
  };
  for (const dir of dirs) walk(path.join(root, dir));
  return found;
}

/** Each file's relative imports that are files of the set, as absolute paths. */
function importGraph(files: Map<string, string>): Graph {
  const graph: Graph = new Map();
  for (const [file, text] of files) {
    const { importedFiles } = ts.preProcessFile(text, true, true);
    const targets = importedFiles
      .map((i) => i.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => path.resolve(path.dirname(file), spec))
      .filter((target) => files.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** One import cycle (its files in import order, the first repeated at the end), or null. */
function findCycle(graph: Graph): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const trail: string[] = [];
  const visit = (file: string): string[] | null => {
    state.set(file, 'open');
    trail.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') return [...trail.slice(trail.indexOf(next)), next];
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    trail.pop();
    state.set(file, 'done');
    return null;
  };
  for (const file of graph.keys()) {
    if (state.has(file)) continue;
    const found = visit(file);
    if (found) return found;
  }
  return null;
}

const read = (files: string[]) => new Map(files.map((f) => [f, readFileSync(f, 'utf8')]));
const relative = (files: string[]) => files.map((f) => path.relative(PROJECT_DIR, f));

describe('the import graph', () => {
  it('the checker itself: finds a cycle made of type-only, re-export and dynamic imports, and none in a tree', () => {
    const at = (name: string) => path.join('/x', name);
    const cyclic = importGraph(
      new Map([
        [at('a.ts'), "import type { B } from './b.ts';\n// import { C } from './c.ts'; (a comment is no import)\nexport const a = 1;"],
        [at('b.ts'), "export { c } from './c.ts';\nexport type B = 1;"],
        [at('c.ts'), "export const c = () => import('./a.ts');\nconst s = \"import './b.ts'\";"],
      ]),
    );
    expect(cyclic.get(at('a.ts'))).toEqual([at('b.ts')]);
    expect(findCycle(cyclic)).toEqual([at('a.ts'), at('b.ts'), at('c.ts'), at('a.ts')]);
    const tree = importGraph(
      new Map([
        [at('a.ts'), "import { b } from './b.ts';\nimport { c } from './c.ts';"],
        [at('b.ts'), "import { c } from './c.ts';\nimport 'hono';"],
        [at('c.ts'), 'export const c = 1;'],
      ]),
    );
    expect(findCycle(tree)).toBeNull();
  });

  it('no import cycle under src/, routes/ and plugins/', () => {
    const files = sources(PROJECT_DIR, ['src', 'routes', 'plugins']);
    const graph = importGraph(read(files));
    // The walk sees the code: the app's composition root imports the route builder.
    expect(graph.get(path.join(PROJECT_DIR, 'src/app.ts'))).toContain(path.join(PROJECT_DIR, 'src/http/route.ts'));
    expect([...graph.values()].flat().length).toBeGreaterThan(200);
    const cycle = findCycle(graph);
    expect(cycle && relative(cycle).join(' -> ')).toBeNull();
  });

  it('no plugin imports a store adapter (src/store/): plugins reach stores through the instance', () => {
    const files = sources(PROJECT_DIR, ['plugins']);
    expect(files.length).toBeGreaterThan(5);
    const store = path.join(PROJECT_DIR, 'src', 'store') + path.sep;
    const offenders = [...importGraph(read([...files, ...sources(PROJECT_DIR, ['src'])]))]
      .filter(([file]) => file.startsWith(path.join(PROJECT_DIR, 'plugins') + path.sep))
      .flatMap(([file, targets]) => targets.filter((t) => t.startsWith(store)).map((t) => `${path.relative(PROJECT_DIR, file)} -> ${path.relative(PROJECT_DIR, t)}`));
    expect(offenders).toEqual([]);
  });

  it('the HTTP layer (src/http/) imports nothing of auth (src/auth/): the app passes in what it needs', () => {
    const files = sources(PROJECT_DIR, ['src']);
    const http = path.join(PROJECT_DIR, 'src', 'http') + path.sep;
    const auth = path.join(PROJECT_DIR, 'src', 'auth') + path.sep;
    const offenders = [...importGraph(read(files))]
      .filter(([file]) => file.startsWith(http))
      .flatMap(([file, targets]) => targets.filter((t) => t.startsWith(auth)).map((t) => `${path.relative(PROJECT_DIR, file)} -> ${path.relative(PROJECT_DIR, t)}`));
    expect(offenders).toEqual([]);
  });
});
