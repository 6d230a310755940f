// The docs are split by topic (README.md links docs/<topic>.md, and the pages link each other's
// sections): a moved or renamed heading would leave links that lead nowhere. Every relative link of
// README.md and docs/*.md must name a file that exists and, for a Markdown file, a heading it has.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeBlocks, docFiles, PROJECT_ROOT, readDoc } from '../support/docs.ts';

/** The text outside fenced code blocks (```...```), line by line. */
const prose = (text: string): string[] => {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    else if (!fenced) out.push(line);
  }
  return out;
};

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2... */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(text)) {
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\p{M}_\- ]/gu, '').replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n ? `${slug}-${n}` : slug);
  }
  return out;
}

/** The targets of the inline links `[text](target)` in prose, inline code left out. */
const links = (text: string): string[] =>
  prose(text)
    .map((line) => line.replace(/``.*?``/g, '').replace(/`[^`]*`/g, ''))
    .flatMap((line) => [...line.matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => m[1]!));

describe('the docs: README.md and docs/*.md', () => {
  it('every relative link names an existing file and, in a Markdown file, an existing heading', () => {
    const files = docFiles();
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/configuration.md', 'docs/api.md', 'docs/operations.md']));
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      for (const target of links(readDoc(file))) {
        if (/^[a-z][a-z+.-]*:/i.test(target) || target.startsWith('//')) continue; // https:, mailto:: not ours
        checked++;
        const [pathPart, anchor] = target.split('#') as [string, string | undefined];
        const resolved = pathPart ? path.join(path.dirname(file), decodeURIComponent(pathPart)) : file;
        if (!existsSync(path.join(PROJECT_ROOT, resolved))) {
          broken.push(`${file}: ${target} (no file ${resolved})`);
          continue;
        }
        if (anchor === undefined) continue;
        if (!resolved.endsWith('.md')) broken.push(`${file}: ${target} (an anchor into a file that is not Markdown)`);
        else if (!anchors(readFileSync(path.join(PROJECT_ROOT, resolved), 'utf8')).has(anchor)) broken.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    expect(checked).toBeGreaterThan(30);
    expect(broken).toEqual([]);
  });

  it('the README links every page of docs/', () => {
    const linked = new Set(links(readDoc('README.md')).map((target) => target.split('#')[0]));
    expect(docFiles().filter((file) => file !== 'README.md' && !linked.has(file))).toEqual([]);
  });

  it("newcomer: the README's quick start shows the two commands and the test command CI runs", () => {
    const readme = readDoc('README.md');
    const quickStart = readme.slice(readme.indexOf('\n## Quick start\n')).split(/\n## /)[1]!;
    const commands = codeBlocks(quickStart, 'sh').map((block) => block.trim());
    expect(commands).toContain('npm install && npm start');
    expect(commands).toContain('npm test');
    expect(readFileSync(path.join(PROJECT_ROOT, '.ci/run'), 'utf8')).toMatch(/^npm test$/m);
  });

  it('the anchor rule is GitHub\'s', () => {
    expect([...anchors("# Operator's guide\n## Realtime (socket.io)\n## Step-up: confirm it is you\n## `npm start`\n## Redis\n## Redis")]).toEqual([
      'operators-guide',
      'realtime-socketio',
      'step-up-confirm-it-is-you',
      'npm-start',
      'redis',
      'redis-1',
    ]);
  });
});
