// `npm start` as a container or a process manager runs it: SIGTERM goes to the process that
// `npm start` started (npm itself), and must reach the service, which then frees its port and the
// embedded database's lock, so that the next `npm start` on the same data folder comes up healthy.
// (Operator item: with `tsx src/server.ts` an extra tsx parent sat in between and the service kept
// running.) Each `npm start` runs in its own process group, which the test kills at the end whatever
// happened, so a failing run leaves nothing behind.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCheckout } from '../support/checkout-build.ts';
import { checkoutCopy } from '../support/checkout-copy.ts';
import { fileBlocks } from '../support/docs.ts';
import { freePort, PROJECT_DIR, sleep, stopAll, tempDir } from '../support/spawn.ts';

const started: ChildProcess[] = [];
afterAll(async () => {
  for (const child of started) {
    try {
      process.kill(-child.pid!, 'SIGKILL'); // the whole group: npm, a shell, the service
    } catch {
      // already gone
    }
  }
  await stopAll();
});

interface NpmStart {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function npmStart(env: Record<string, string>, cwd = PROJECT_DIR): NpmStart {
  const child = spawn('npm', ['start'], {
    cwd,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/root', LOG_LEVEL: 'info', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // own process group, for the cleanup above
  });
  started.push(child);
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

async function healthy(port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) return true;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  return false;
}

/** True once nothing holds the port: we can listen on it ourselves. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function waitPortFree(port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await portFree(port)) return true;
    await sleep(200);
  }
  return false;
}

// `npm start` runs the compiled service: built up front unless fresh. The tests that need a stale or missing
// build make it in a copy of the checkout: files of other suites start svc from this one meanwhile.
beforeAll(buildCheckout, 180_000);

/** Runs `npm start` (in `cwd`: svc's checkout or a copy of it) on `appRoot` until /health answers; returns the process and its output. */
async function startHealthy(appRoot: string, extra: Record<string, string> = {}, cwd = PROJECT_DIR) {
  const port = await freePort();
  const run = npmStart({ PORT: String(port), SVC_APP_PATH: appRoot, SVC_DATA_DIR: tempDir('svc-data-'), ...extra }, cwd);
  expect(await healthy(port, 60_000), run.output()).toBe(true);
  return { ...run, port };
}

async function stop(run: NpmStart & { port: number }) {
  process.kill(run.child.pid!, 'SIGTERM');
  expect(await waitPortFree(run.port, 15_000), run.output()).toBe(true);
}

describe('npm start runs compiled JavaScript', () => {
  it('the service is dist/src/server.js under plain node (no TypeScript loader for an app of JavaScript)', async () => {
    const root = tempDir('svc-js-app-');
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
    mkdirSync(path.join(root, 'plugins', 'hello_js'), { recursive: true });
    writeFileSync(path.join(root, 'plugins', 'hello_js', 'index.js'), "import { Hono } from 'hono';\nexport default () => new Hono().get('/hi', (c) => c.json({ hi: 'js' }));\n");
    // The app resolves hono through svc's node_modules, as the app roots of docs/cli-connector.md do.
    spawnSync('ln', ['-s', path.join(PROJECT_DIR, 'node_modules'), path.join(root, 'node_modules')]);
    writeFileSync(path.join(root, 'svc.config.json'), JSON.stringify({ global: { requireAuthentication: false } }));
    const run = await startHealthy(root);
    expect(await (await fetch(`http://127.0.0.1:${run.port}/hello_js/hi`)).json()).toEqual({ hi: 'js' });
    const ps = spawnSync('ps', ['-o', 'args=', '--ppid', String(run.child.pid)], { encoding: 'utf8' }).stdout;
    expect(ps).toMatch(/node bin\/start\.js|bin\/start\.js/);
    expect(ps).not.toContain('tsx');
    expect(run.output()).not.toContain('load through tsx');
    expect(run.output()).toContain('plugin loaded');
    // The quick start's curl uses localhost, not the address svc listens on: the line says why.
    expect(run.output()).toContain(`svc listening on http://127.0.0.1:${run.port} (browse and curl http://localhost:${run.port}, not the IP address`);
    await stop(run);
  }, 120_000);

  it("run in svc's own checkout without SVC_APP_PATH: its plugins/ are the bundled plugins, not an app's TypeScript (tsx is not loaded)", async () => {
    const port = await freePort();
    // A fresh clone's files with this build (a developer's own svc.config.json or .env in this checkout is not read: issue 53).
    const checkout = checkoutCopy({ dist: true });
    const run = { ...npmStart({ PORT: String(port), SVC_DATA_DIR: tempDir('svc-data-') }, checkout), port }; // app root: the checkout
    expect(await healthy(port, 60_000), run.output()).toBe(true);
    expect(run.output()).not.toContain('load through tsx');
    expect(run.output().match(/"plugin":"svc__todo"[^\n]*"msg":"plugin loaded"/g), run.output()).toHaveLength(1); // once, as the bundled one
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    await stop(run);
  }, 120_000);

  it('an app root with svc.config.ts and a TypeScript plugin still loads (tsx registered for it, and said so)', async () => {
    const root = tempDir('svc-ts-app-');
    writeFileSync(path.join(root, 'svc.config.ts'), "const config: { global: { requireAuthentication: boolean } } = { global: { requireAuthentication: false } };\nexport default config;\n");
    mkdirSync(path.join(root, 'plugins', 'hello_ts'), { recursive: true });
    writeFileSync(path.join(root, 'plugins', 'hello_ts', 'index.ts'), "import { Hono } from 'hono';\nconst greeting: string = 'ts';\nexport default () => new Hono().get('/hi', (c) => c.json({ hi: greeting }));\n");
    spawnSync('ln', ['-s', path.join(PROJECT_DIR, 'node_modules'), path.join(root, 'node_modules')]);
    const run = await startHealthy(root);
    expect(run.output()).toContain('the app has TypeScript files: they load through tsx');
    const res = await fetch(`http://127.0.0.1:${run.port}/hello_ts/hi`);
    expect(res.status, run.output()).toBe(200);
    expect(await res.json()).toEqual({ hi: 'ts' });
    await stop(run);
  }, 120_000);

  // docs/plugins.md's folder plugin in an app outside svc's folder. `@svc/core` must be the running svc:
  // a second copy (the sources, through tsx) made the plugin's 404 a 500 and its public route 401.
  const guideApp = (packageJson: object | undefined) => {
    const root = tempDir('svc-guide-app-');
    const plugin = path.join(root, 'plugins', 'acme__notes');
    mkdirSync(plugin, { recursive: true });
    writeFileSync(path.join(plugin, 'index.ts'), fileBlocks('docs/plugins.md').get('plugins/acme__notes/index.ts')!);
    if (packageJson) writeFileSync(path.join(root, 'package.json'), JSON.stringify(packageJson));
    // The guide's tsconfig.json, as an app that type-checks has it: no path mapping, @svc/core's types are the
    // package's own (node_modules/@svc/core is this checkout, whose `exports` name dist/'s .d.ts).
    const tsconfig = fileBlocks('docs/plugins.md').get('tsconfig.json')!;
    expect(tsconfig).not.toContain('"paths"');
    writeFileSync(path.join(root, 'tsconfig.json'), tsconfig);
    symlinkSync(path.join(PROJECT_DIR, 'node_modules'), path.join(root, 'node_modules')); // hono, valibot
    return root;
  };
  const expectGuidePluginServed = async (port: number) => {
    const base = `http://127.0.0.1:${port}`;
    expect(await (await fetch(`${base}/acme__notes/hello`)).json()).toEqual({ data: 'hello from acme__notes' });
    const login = await fetch(`${base}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ann@example.com', password: 'a long password' }),
    });
    expect(login.status).toBe(200);
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const missing = await fetch(`${base}/acme__notes/notes/nope`, { headers: { cookie } });
    expect(missing.status).toBe(404);
    expect((await missing.json()).error.code).toBe('not_found');
    const bad = await fetch(`${base}/acme__notes/notes`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json', origin: base },
      body: JSON.stringify({ text: 'x', extra: 1 }),
    });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe('validation_failed');
    const paths = Object.keys((await (await fetch(`${base}/openapi.json`)).json()).paths);
    expect(paths).toEqual(expect.arrayContaining(['/acme__notes/hello', '/acme__notes/notes', '/acme__notes/notes/{id}']));
  };
  const annAdmin = { SVC_ADMIN_EMAIL: 'ann@example.com', SVC_ADMIN_PASSWORD: 'a long password' };

  it("an app outside svc's folder: its plugin's `import ... from '@svc/core'` is the running svc (errors, public routes, /openapi.json)", async () => {
    const run = await startHealthy(guideApp({ type: 'module' }), annAdmin);
    await expectGuidePluginServed(run.port);
    await stop(run);
  }, 120_000);

  it("the guide's tsconfig.json type-checks its plugin outside svc's folder against the package's own declarations (no path mapping)", () => {
    const root = guideApp({ type: 'module' }); // with the guide's tsconfig.json
    const tsc = path.join(PROJECT_DIR, 'node_modules/.bin/tsc');
    const checked = spawnSync(tsc, ['-p', root], { encoding: 'utf8', timeout: 180_000 });
    expect(checked.stdout + checked.stderr, 'tsc -p <app root>').toBe('');
    expect(checked.status).toBe(0);
    // And it does check: a type error in the plugin fails it.
    writeFileSync(path.join(root, 'plugins/acme__notes/wrong.ts'), "import type { PluginInstance } from '@svc/core';\nexport const key: number = ({} as PluginInstance).plugin.key;\n");
    const wrong = spawnSync(tsc, ['-p', root], { encoding: 'utf8', timeout: 180_000 });
    expect(wrong.stdout).toMatch(/wrong\.ts.*TS2322: Type 'string' is not assignable to type 'number'/);
  }, 240_000);

  // The app's node_modules here is svc's own, where `@svc/core` is installed (the workspace links it, as
  // an app's `npm install @svc/core` does): `require` finds the package, and it is the running build.
  it('the same plugin run as CommonJS (no "type": "module"): the running svc', async () => {
    const run = await startHealthy(guideApp(undefined), annAdmin);
    await expectGuidePluginServed(run.port);
    await stop(run);
  }, 120_000);

  it('dist/ missing its build stamp (or older than the sources): npm start builds first, clearing what a killed build left', async () => {
    const checkout = checkoutCopy({ dist: true });
    rmSync(path.join(checkout, 'dist', '.built'), { force: true });
    // A builder killed mid-build leaves its folders (the lock is gone with its pid): the next build removes them.
    for (const left of ['dist.next-999999', 'dist.old-999998']) mkdirSync(path.join(checkout, left, 'src'), { recursive: true });
    const run = await startHealthy(tempDir('svc-app-'), {}, checkout);
    expect(run.output()).toContain('building dist/');
    expect(readdirSync(checkout).filter((name) => /^dist\./.test(name))).toEqual([]);
    await stop(run);
  }, 180_000);
});

/**
 * A copy of the compiled service beside a node_modules of the production packages only (symbolic links
 * to this checkout's), as `npm ci --omit=dev && npm run build` leaves a server: devDependencies cannot
 * be found from it.
 */
function productionCopy(): string {
  const root = tempDir('svc-prod-');
  cpSync(path.join(PROJECT_DIR, 'dist'), path.join(root, 'dist'), { recursive: true });
  cpSync(path.join(PROJECT_DIR, 'package.json'), path.join(root, 'package.json'));
  const listed = spawnSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: PROJECT_DIR, encoding: 'utf8' });
  const modules = path.join(PROJECT_DIR, 'node_modules') + path.sep;
  const production = new Set(
    listed.stdout
      .split('\n')
      .filter((line) => line.startsWith(modules))
      .map((line) => line.slice(modules.length))
      .filter((name) => !name.includes(`${path.sep}node_modules${path.sep}`)), // top-level packages only
  );
  expect(production.size, listed.stderr).toBeGreaterThan(50);
  for (const name of production) {
    mkdirSync(path.dirname(path.join(root, 'node_modules', name)), { recursive: true });
    symlinkSync(path.join(modules, name), path.join(root, 'node_modules', name));
  }
  return root;
}

describe('the compiled service on a production install (no devDependencies)', () => {
  it('serves the API reference page and its script from dist/ (copied by the build), with no @scalar package installed', async () => {
    const root = productionCopy();
    const require = createRequire(path.join(root, 'dist', 'src', 'server.js'));
    expect(() => require.resolve('@scalar/api-reference')).toThrow(/Cannot find module/);
    expect(require.resolve('hono')).toBeTruthy(); // the production packages are there

    const port = await freePort();
    const child = spawn(process.execPath, ['dist/src/server.js'], {
      cwd: root,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/root', HOST: '127.0.0.1', PORT: String(port), SVC_APP_PATH: tempDir('svc-app-'), SVC_DATA_DIR: tempDir('svc-data-') },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    started.push(child);
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    expect(await healthy(port, 60_000), out).toBe(true);

    const { version } = JSON.parse(readFileSync(path.join(PROJECT_DIR, 'vendor/scalar/package.json'), 'utf8')) as { version: string };
    const page = await fetch(`http://127.0.0.1:${port}/docs`);
    expect(page.status, out).toBe(200);
    expect(await page.text()).toContain(`<script src="docs/scalar.js?v=${version}"></script>`);
    const script = await fetch(`http://127.0.0.1:${port}/docs/scalar.js?v=${version}`);
    expect(script.status, out).toBe(200);
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const body = Buffer.from(await script.arrayBuffer());
    expect(body.equals(readFileSync(path.join(PROJECT_DIR, 'vendor/scalar/standalone.js')))).toBe(true);
    expect(readFileSync(path.join(root, 'dist/vendor/scalar/standalone.js')).equals(body)).toBe(true);

    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    process.kill(child.pid!, 'SIGTERM');
    expect(await exited, out).toBe(0);
  }, 120_000);
});

describe('npm start on a stale tree (a source newer than the build)', () => {
  let checkout = '';
  beforeAll(() => void (checkout = checkoutCopy({ dist: true })));
  const stamp = () => path.join(checkout, 'dist', '.built');
  /** Makes a source newer than the build, as a `git pull` or an edit does. */
  const touchSource = () => {
    const now = new Date(Date.now() + 2000);
    utimesSync(path.join(checkout, 'src', 'server.ts'), now, now);
  };

  it('operator: NODE_ENV=production never builds at start: exits non-zero, telling to run `npm run build`, dist/ untouched', async () => {
    touchSource();
    const before = readFileSync(stamp(), 'utf8');
    const run = npmStart({ NODE_ENV: 'production', PORT: String(await freePort()), SVC_APP_PATH: tempDir('svc-app-'), SVC_DATA_DIR: tempDir('svc-data-') }, checkout);
    expect(await Promise.race([run.exited, sleep(30_000).then(() => 'still running')]), run.output()).toBe(1);
    expect(run.output()).toContain('dist/ is older than the sources');
    expect(run.output()).toContain('run `npm run build` first');
    expect(run.output()).not.toContain('building dist/');
    expect(readFileSync(stamp(), 'utf8')).toBe(before);
  }, 60_000);

  it('two instances started at the same moment both come up healthy: one builds, the other waits for it', async () => {
    touchSource();
    const [one, two] = await Promise.all([0, 1].map(async () => ({ port: await freePort(), data: tempDir('svc-data-') })));
    const runs = [one!, two!].map(({ port, data }) => ({ ...npmStart({ PORT: String(port), SVC_APP_PATH: tempDir('svc-app-'), SVC_DATA_DIR: data }, checkout), port }));
    const healthyBoth = await Promise.all(runs.map((run) => healthy(run.port, 150_000)));
    const outputs = runs.map((run) => run.output()).join('\n----\n');
    expect(healthyBoth, outputs).toEqual([true, true]);
    expect(outputs.match(/svc: building dist\//g), outputs).toHaveLength(1);
    expect(outputs).toContain('another process is building dist/: waiting for it');
    // Nothing left behind: the lock and the build's own folders are gone.
    expect(readdirSync(checkout).filter((name) => /^dist\./.test(name))).toEqual([]);
    for (const run of runs) await stop(run);
  }, 240_000);
});

describe('npm start', () => {
  it('operator: SIGTERM to `npm start` stops the service: the port is free within 15 s and a second `npm start` on the same data folder is healthy', async () => {
    const port = await freePort();
    const env = { PORT: String(port), SVC_APP_PATH: tempDir('svc-app-'), SVC_DATA_DIR: tempDir('svc-data-') };

    const first = npmStart(env);
    expect(await healthy(port, 30_000), first.output()).toBe(true);
    process.kill(first.child.pid!, 'SIGTERM'); // npm itself, as `docker stop` would
    expect(await waitPortFree(port, 15_000), `port ${port} still held 15 s after SIGTERM\n${first.output()}`).toBe(true);
    expect(await Promise.race([first.exited, sleep(5000).then(() => 'still running')]), first.output()).not.toBe('still running');
    expect(first.output()).toContain('"msg":"stopped"'); // the service shut down gracefully

    const second = npmStart(env);
    expect(await healthy(port, 30_000), `second npm start on the same data folder:\n${second.output()}`).toBe(true);
    process.kill(second.child.pid!, 'SIGTERM');
    expect(await waitPortFree(port, 15_000), second.output()).toBe(true);
  }, 90_000);
});
