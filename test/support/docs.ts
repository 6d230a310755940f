// The project's documentation as the tests read it: README.md (quick start and the table of contents)
// and docs/<topic>.md. Tests that check what a page shows (its commands, snippets, tables) read that page.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A documentation file by its path in the repository: `README.md`, `docs/configuration.md`. */
export const readDoc = (file: string): string => readFileSync(path.join(PROJECT_ROOT, file), 'utf8');

/** README.md and every docs/*.md, as repository paths. */
export const docFiles = (): string[] => [
  'README.md',
  ...readdirSync(path.join(PROJECT_ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];

/** The fenced code blocks whose info string is exactly `info` (```js, not ```js passkeys). */
export const codeBlocks = (text: string, info: string): string[] =>
  [...text.matchAll(new RegExp('```' + info + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);

/** A page's code blocks that start with `// file: <path>` (the plugin guide's files), by path. */
export function fileBlocks(file: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const m of readDoc(file).matchAll(/```\w*\n\/\/ file: (\S+)\n([\s\S]*?)```/g)) files.set(m[1]!, m[2]!);
  return files;
}
