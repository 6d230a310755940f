// `npx tsx bench/prof-top.ts <file.cpuprofile> [N]`: where a V8 CPU profile (`node --cpu-prof`,
// e.g. from `npm run bench -- --only svc,lean --cpu-prof svc,lean`) spends its time: self time by
// function and by package, and inclusive time of the functions whose name contains FILTER
// (env PROF_FILTER, comma-separated).
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: prof-top <file.cpuprofile> [N]\n');
  process.exit(2);
}
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Self time per node from samples and time deltas (µs). Bun's profiles (`bun --cpu-prof`) have no
// `(idle)` node: a sample's delta there also holds the idle time before it, so each sample counts as
// one sampling interval (the median delta) instead.
const hasIdle = profile.nodes.some((n) => n.callFrame.functionName === '(idle)');
const interval = [...profile.timeDeltas].sort((a, b) => a - b)[Math.floor(profile.timeDeltas.length / 2)] ?? 0;
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (hasIdle ? (profile.timeDeltas[i] ?? 0) : interval)));
const sampled = [...self.values()].reduce((a, b) => a + b, 0);
const idle = [...self.entries()].filter(([id]) => byId.get(id)!.callFrame.functionName === '(idle)').reduce((a, [, us]) => a + us, 0);
/** Percentages are of the busy (non-idle) time. */
const total = sampled - idle;

const where = (n: Node) => {
  const url = n.callFrame.url.replace(/^file:\/\//, '');
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return 'node:internal';
  if (!url) return n.callFrame.functionName.startsWith('(') ? n.callFrame.functionName : '(native)';
  const i = url.indexOf('/main/');
  return i >= 0 ? url.slice(i + 6) : url;
};
const label = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${where(n)}:${n.callFrame.lineNumber + 1}`;

const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
const print = (title: string, m: Map<string, number>) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, v] of [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(v)}  ${(v / 1000).toFixed(0).padStart(7)} ms  ${k}\n`);
};

const byFunction = new Map<string, number>();
const byPackage = new Map<string, number>();
for (const [id, us] of self) {
  const n = byId.get(id)!;
  byFunction.set(label(n), (byFunction.get(label(n)) ?? 0) + us);
  byPackage.set(where(n), (byPackage.get(where(n)) ?? 0) + us);
}
process.stdout.write(`${file}: ${(sampled / 1e6).toFixed(1)} s sampled, ${(total / 1e6).toFixed(1)} s busy; percentages of busy time\n`);
print('self time by package / file', byPackage);
print('self time by function', byFunction);

// Inclusive time of functions matching PROF_FILTER (each sample counted once per matching name).
const filters = (process.env.PROF_FILTER ?? '').split(',').filter(Boolean);
if (filters.length) {
  const inclusive = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const n = byId.get(cur)!;
      if (filters.some((f) => n.callFrame.functionName.includes(f))) seen.add(label(n));
    }
    for (const k of seen) inclusive.set(k, (inclusive.get(k) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  print(`inclusive time of functions matching ${filters.join(', ')}`, inclusive);
}
