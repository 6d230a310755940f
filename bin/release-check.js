#!/usr/bin/env node
// `npm run release:check`: what a user of the published packages gets, tried before a release. Packs
// @svc/core, @svc/client, @svc/plugin-cli-connector and create-svc (`npm pack`, each built by its prepack), installs
// the tarballs into a new app in a temporary folder outside this checkout (dependencies from the
// registry, as `npm install @svc/core` would), then:
//   1. type-checks the plugin guide's plugin (docs/plugins.md) and a page using @svc/client against the
//      installed types, with no path mapping, and checks that a type error there does fail;
//   2. starts the app with `svc start` (its bin) and an admin from the environment, logs in, calls that plugin,
//      the bundled todo plugin and the CLI connector, loads /docs and its vendored script;
//   3. runs `npx svc doctor` and `npx svc user create`, stops the service with SIGTERM (exit 0); then, with
//      Bun and Deno on PATH, starts and calls it again on each with docs/runtimes.md's command;
//   4. scaffolds an app with create-svc on the packed @svc/core, installs it and runs its own `npm test`.
// Each step prints one line; the first failure stops the check with exit code 1 and what it saw.
// RELEASE_CHECK_KEEP=1 keeps the temporary folder for a look.

import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const PACKAGES = ['.', 'packages/client', 'plugins/plugin-cli-connector', 'packages/create-svc'];
const ADMIN = { email: 'release@example.com', password: 'a long release password' };
const started = Date.now();

const step = (what) => process.stdout.write(`release:check ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s  ${what}\n`);
function fail(what, detail = '') {
  process.stderr.write(`release:check FAILED: ${what}\n${detail}\n`);
  process.exit(1);
}
/** Runs a command to its end; returns its stdout, fails the check (with its output) on a non-zero exit. */
function run(cmd, args, cwd, { env = process.env, input } = {}) {
  try {
    return execFileSync(cmd, args, { cwd, env, input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    return fail(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${err.status}`, `${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}
/**
 * `npm install` in an app folder, as its user runs it. npm 11.16+ lists the install scripts that the app's
 * `allowScripts` does not cover (and npm 12 skips them): an app made as docs/packages.md says must have none.
 */
function npmInstall(cwd) {
  const out = spawnSync('npm', ['install', '--no-audit', '--no-fund'], { cwd, encoding: 'utf8' });
  if (out.status !== 0) fail(`npm install (in ${cwd}) exited ${out.status}`, `${out.stdout}${out.stderr}`);
  if (/allowScripts/.test(out.stderr)) fail(`npm install (in ${cwd}) ran install scripts that the app's allowScripts does not cover`, out.stderr);
}
const devVersion = (name) => JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).devDependencies[name];

const work = mkdtempSync(path.join(tmpdir(), 'svc-release-'));
const packs = path.join(work, 'packs');
const app = path.join(work, 'app');
mkdirSync(packs);
mkdirSync(path.join(app, 'plugins', 'acme__notes'), { recursive: true });
mkdirSync(path.join(app, 'web'));
let service;
process.on('exit', () => {
  service?.kill('SIGKILL');
  if (!process.env.RELEASE_CHECK_KEEP) rmSync(work, { recursive: true, force: true });
  else process.stdout.write(`release:check kept ${work}\n`);
});

// 1. The tarballs.
const tarballs = {};
for (const dir of PACKAGES) {
  const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', packs], path.join(root, dir)));
  tarballs[packed.name] = path.join(packs, packed.filename);
  const sources = packed.files.filter((f) => /(^|\/)src\/.*\.ts$/.test(f.path) && !f.path.endsWith('.d.ts'));
  if (sources.length) fail(`${packed.name}'s tarball carries TypeScript sources, not only its build`, sources.map((f) => f.path).join('\n'));
  step(`packed ${packed.name}@${packed.version}: ${packed.entryCount} files, ${(packed.size / 1024).toFixed(0)} KiB`);
}

// 2. An app that installs them.
writeFileSync(
  path.join(app, 'package.json'),
  JSON.stringify(
    {
      name: 'release-check-app',
      private: true,
      type: 'module',
      dependencies: { '@svc/core': tarballs['@svc/core'], '@svc/client': tarballs['@svc/client'], '@svc/plugin-cli-connector': tarballs['@svc/plugin-cli-connector'] },
      devDependencies: { typescript: devVersion('typescript'), '@types/node': devVersion('@types/node') },
      // As docs/packages.md's app by hand.
      allowScripts: { esbuild: true },
    },
    null,
    2,
  ),
);
npmInstall(app);
step('installed the tarballs into a new app (dependencies from the registry)');

// The plugin guide's plugin, as the page shows it; a page of the app's frontend using @svc/client.
const guide = readFileSync(path.join(root, 'docs/plugins.md'), 'utf8');
const plugin = /```ts\n\/\/ file: plugins\/acme__notes\/index\.ts\n([\s\S]*?)```/.exec(guide)?.[1];
if (!plugin) fail('docs/plugins.md has no `// file: plugins/acme__notes/index.ts` block any more');
writeFileSync(path.join(app, 'plugins/acme__notes/index.ts'), plugin);
writeFileSync(
  path.join(app, 'web/page.ts'),
  "import { createClient } from '@svc/client';\nconst svc = createClient({ baseUrl: '/api' });\nexport async function who(): Promise<string> {\n  const s = await svc.currentSession();\n  return s ? s.userId : 'nobody';\n}\n",
);
writeFileSync(
  path.join(app, 'svc.config.json'),
  JSON.stringify({ plugins: ['@svc/plugin-cli-connector'] }, null, 2),
);
const tsconfig = (include, lib) => ({
  compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, allowImportingTsExtensions: true, skipLibCheck: false, lib, types: lib.includes('DOM') ? [] : ['node'] },
  include,
});
writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify(tsconfig(['plugins'], ['ES2022']), null, 2));
writeFileSync(path.join(app, 'tsconfig.web.json'), JSON.stringify(tsconfig(['web'], ['ES2022', 'DOM']), null, 2));
const tsc = path.join(app, 'node_modules/.bin/tsc');
run(tsc, ['-p', 'tsconfig.json'], app);
run(tsc, ['-p', 'tsconfig.web.json'], app);
// And they do check: a wrong type against each package's declarations fails.
writeFileSync(path.join(app, 'plugins/acme__notes/wrong.ts'), "import type { PluginInstance } from '@svc/core';\nexport const key: number = ({} as PluginInstance).plugin.key;\n");
writeFileSync(path.join(app, 'web/wrong.ts'), "import { createClient } from '@svc/client';\nexport const n: number = createClient({ baseUrl: '/api' }).login;\n");
for (const [project, file] of [['tsconfig.json', 'plugins/acme__notes/wrong.ts'], ['tsconfig.web.json', 'web/wrong.ts']]) {
  try {
    execFileSync(tsc, ['-p', project], { cwd: app, encoding: 'utf8', stdio: 'pipe' });
    fail(`tsc -p ${project} passed with a type error in ${file}: the installed declarations do not type what they should`);
  } catch (err) {
    if (!`${err.stdout}`.includes(`${file}(`)) fail(`tsc -p ${project} failed, but not on ${file}`, `${err.stdout}${err.stderr}`);
  }
  rmSync(path.join(app, file));
}
step('the guide plugin and a @svc/client page type-check against the installed declarations (and a type error fails)');

// 3. The service, from the app's folder.
const freePort = () =>
  new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
const port = await freePort();
const base = `http://localhost:${port}`;
const env = { PATH: process.env.PATH, HOME: process.env.HOME ?? work, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password };
let output = '';
let exited;

/**
 * Starts the installed app with `argv` in its folder, waits for /health, logs in as the admin and calls
 * the guide plugin, svc__todo, the CLI connector and /docs (its vendored script): what a user of that
 * command tries first. Leaves it running (`service`, `exited`, `output`).
 */
async function startAndCall(argv, what) {
  output = '';
  service = spawn(argv[0], argv.slice(1), { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
  service.stdout.on('data', (d) => (output += d));
  service.stderr.on('data', (d) => (output += d));
  exited = new Promise((resolve) => service.once('exit', (code, signal) => resolve({ code, signal })));
  for (let i = 0; ; i++) {
    if (i === 600) fail(`${what}: the service did not answer /health within 60 s`, output);
    const health = await fetch(`${base}/health`).catch(() => null);
    if (health?.ok) break;
    if (service.exitCode !== null) fail(`${what}: the service exited before it was healthy`, output);
    await new Promise((r) => setTimeout(r, 100));
  }
  if (/building dist/.test(output)) fail(`${what}: the installed package built something at start`, output);
  step(`${what}: healthy at ${base} (nothing built at start)`);

  const login = await fetch(`${base}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
  if (login.status !== 200) fail(`${what}: login answered ${login.status}`, await login.text());
  const cookie = login.headers.getSetCookie()[0].split(';')[0];
  const call = async (method, url, body) => {
    const res = await fetch(`${base}${url}`, { method, headers: { cookie, ...(body ? { 'content-type': 'application/json', origin: base } : {}) }, body: body && JSON.stringify(body) });
    return { status: res.status, body: await res.text() };
  };
  const expectCall = async (method, url, status, body) => {
    const res = await call(method, url, body);
    if (res.status !== status) fail(`${what}: ${method} ${url} answered ${res.status}, not ${status}`, res.body);
    return res.body;
  };
  await expectCall('GET', '/acme__notes/hello', 200);
  const note = JSON.parse(await expectCall('POST', '/acme__notes/notes', 201, { text: 'from the release check' }));
  await expectCall('GET', `/acme__notes/notes/${note.data._id}`, 200);
  await expectCall('GET', '/svc__todo/all', 200);
  await expectCall('GET', '/plugin/svc/plugin-cli-connector/scripts', 200);
  const docs = await expectCall('GET', '/docs', 200);
  const script = /src="([^"]*scalar[^"]*)"/.exec(docs)?.[1];
  if (!script) fail(`${what}: /docs names no vendored script`, docs);
  const scriptUrl = new URL(script, `${base}/docs`); // relative to the page, as a browser reads it
  await expectCall('GET', `${scriptUrl.pathname}${scriptUrl.search}`, 200);
  step(`${what}: logged in; the guide plugin, svc__todo, the CLI connector and /docs (its vendored script) answer`);
}

/** SIGTERM to the running service: it must end with exit code 0. */
async function stopService(what) {
  service.kill('SIGTERM');
  const end = await exited;
  if (end.code !== 0) fail(`${what}: the service ended with ${end.code ?? end.signal} on SIGTERM`, output);
  service = undefined;
}

// The bin itself, as an app's `"start": "svc start"` script runs it (npx would stand between it and the signal).
await startAndCall([path.join(app, 'node_modules/.bin/svc'), 'start'], 'svc start');

const doctor = spawn('npx', ['svc', 'doctor'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
let doctorOut = '';
doctor.stdout.on('data', (d) => (doctorOut += d));
doctor.stderr.on('data', (d) => (doctorOut += d));
const doctorCode = await new Promise((resolve) => doctor.once('exit', resolve));
if (![0, 1].includes(doctorCode) || !/^(all checks passed|\d+ checks? failed)$/m.test(doctorOut)) fail(`npx svc doctor exited ${doctorCode}`, doctorOut);
step(`npx svc doctor ran (exit ${doctorCode})`);

await stopService('svc start');
const created = run('npx', ['svc', 'user', 'create', '--email', 'cli@example.com'], app, { env, input: 'a long cli password\n' });
if (!created.includes('created user cli@example.com')) fail('npx svc user create said something else', created);
step('SIGTERM: exit 0; npx svc user create made a user');

// 3b. On Bun and Deno (docs/runtimes.md), with the command that page gives an installed app, when the
//     runtime is on PATH (.ci/run puts both there); said loudly when it is not.
//     The command is this checkout's `npm run start:<runtime>` pointed at the installed package, so the flags
//     are written once (the readme test ties that script to docs/runtimes.md and to `npm start`'s V8 flags).
const scripts = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts;
function installedCommand(runtime) {
  const script = scripts[`start:${runtime}`] ?? '';
  const argv = script.replace(/^exec /, '').split(' ');
  if (argv.at(-1) !== 'bin/start.js') fail(`package.json's start:${runtime} does not end in bin/start.js`, script);
  return [...argv.slice(0, -1), 'node_modules/@svc/core/bin/start.js'];
}
for (const runtime of ['bun', 'deno']) {
  const argv = installedCommand(runtime);
  let version;
  try {
    version = execFileSync(runtime, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n')[0].replace(/ \(.*/, '').trim();
  } catch {
    step(`SKIPPED on ${runtime}: not on PATH (npm install --no-save ${runtime}; .ci/run does)`);
    continue;
  }
  await startAndCall(argv, `${argv.join(' ')} (${version})`);
  if (process.platform === 'linux') {
    // Bun's allocator keeps what it frees for reuse (bin/start.js): the entry set it and started itself again
    // in place, so the process started here serves with it (and SIGTERM below still reaches it). Deno: untouched.
    const purge = readFileSync(`/proc/${service.pid}/environ`, 'utf8').split('\0').find((kv) => kv.startsWith('MIMALLOC_PURGE_DELAY='));
    const expected = runtime === 'bun' ? 'MIMALLOC_PURGE_DELAY=-1' : undefined;
    if (purge !== expected) fail(`${runtime}: the service's environment has ${purge ?? 'no MIMALLOC_PURGE_DELAY'}, not ${expected ?? 'none'}`);
    step(`${runtime}: ${expected ? `serves in the process started, with ${expected}` : 'no allocator setting added'}`);
  }
  await stopService(runtime);
  step(`${runtime}: SIGTERM: exit 0`);
}

// 4. The scaffold, as `npm create svc@latest my-app` runs it, on the packed @svc/core: its own npm test
//    type-checks svc.config.ts and its plugin against the installed types (no path mapping) and starts it.
const scaffold = path.join(work, 'my-app');
run('npm', ['exec', '--yes', '--package', tarballs['create-svc'], '--', 'create-svc', scaffold, '--core', tarballs['@svc/core']], work);
if (/"paths"/.test(readFileSync(path.join(scaffold, 'tsconfig.json'), 'utf8'))) fail("the scaffold's tsconfig.json maps paths: its types must come from the installed package");
npmInstall(scaffold);
run('npm', ['test'], scaffold);
step('npm create svc: the scaffolded app installs and passes its own npm test (tsc with no path mapping, start, its plugin)');
step(`passed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
