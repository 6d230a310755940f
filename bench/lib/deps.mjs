// `node bench/lib/deps.mjs`: installs bench/'s own dependencies (bench/package.json: the rival session
// stacks and the load generator, none of which svc needs) when any is missing, then exits. Plain
// JavaScript run before tsx: the bench's TypeScript imports them statically, so they must exist first.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const BENCH_DIR = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(path.join(BENCH_DIR, 'package.json'), 'utf8'));
const missing = Object.keys(pkg.dependencies ?? {}).filter((name) => !existsSync(path.join(BENCH_DIR, 'node_modules', name, 'package.json')));
if (missing.length > 0) {
  process.stderr.write(
    `bench: ${missing.length} of bench/'s own dependencies missing (${missing.slice(0, 4).join(', ')}${missing.length > 4 ? ', ...' : ''}): ` +
      'installing them into bench/node_modules (npm ci in bench/, once)\n',
  );
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: BENCH_DIR, stdio: 'inherit' });
  if (result.status !== 0) {
    process.stderr.write(`bench: installing bench/'s dependencies failed (npm ci exit ${result.status ?? result.signal}); try \`npm ci --prefix bench\`\n`);
    process.exit(1);
  }
}
