// The docs are what operators copy from (issue 26 §6). The nginx snippet once forwarded `Host: $host`,
// which drops a non-default port: behind nginx on :8080 every login was 403 csrf_failed. And the error
// table lacked codes the service emits. These tests read the docs (README.md and docs/, each check on the
// page that shows what it checks) and the sources, so neither can drift again, and show with the app
// itself what the snippet's headers do.

import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { MongoClient } from 'mongodb';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.ts';
import { PARSER_ERROR_CODES } from '../../src/http/client-error.ts';
import { HTTP_ERROR_CODES } from '../../src/http/errors.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { codeBlocks, docFiles, readDoc } from '../support/docs.ts';
import { startPrivateMongoServer } from '../support/mongo.ts';
import { PROJECT_DIR } from '../support/spawn.ts';
import { npmStartNodeFlags, startScript } from '../support/start-script.ts';

const CONFIGURATION = readDoc('docs/configuration.md');
const API = readDoc('docs/api.md');
const OAUTH = readDoc('docs/oauth.md');
const OPERATIONS = readDoc('docs/operations.md');

/** Every .ts file under the given project folders, tests excluded. */
function sources(...dirs: string[]): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      if (name === 'node_modules') continue;
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) out.push(full);
    }
  };
  for (const d of dirs) walk(path.join(PROJECT_DIR, d));
  return out;
}

/**
 * Every error code the code base can answer with, and its statuses: each `new AppError(<status>,
 * '<code>'` and `super(<status>, '<code>'` (AppError subclasses), plus HTTP_ERROR_CODES (what Hono's
 * own exceptions become). An AppError built with a code that is not a literal would escape this
 * collection, so it fails the test instead.
 */
function emittedCodes(): Map<string, Set<number>> {
  const codes = new Map<string, Set<number>>();
  const add = (code: string, status: number) => codes.set(code, (codes.get(code) ?? new Set()).add(status));
  for (const file of sources('src', 'routes', 'plugins')) {
    const text = readFileSync(file, 'utf8');
    const isAppErrorFile = /class \w+ extends AppError/.test(text);
    for (const m of text.matchAll(/\b(new AppError|super)\(([^)]*)/g)) {
      const [, callee, args] = m as unknown as [string, string, string];
      const literal = /^\s*(\d{3})\s*,\s*'([a-z_]+)'/.exec(args);
      if (literal) add(literal[2]!, Number(literal[1]));
      else if (callee === 'super' && (!isAppErrorFile || !/^\s*\d{3}/.test(args))) continue; // not an AppError's status + code
      else if (!args.includes('HTTP_ERROR_CODES[')) {
        const line = text.slice(0, m.index).split('\n').length;
        throw new Error(`${path.relative(PROJECT_DIR, file)}:${line}: an error code that is not a literal; list it in the error table of docs/api.md and teach this test`);
      }
    }
  }
  for (const [status, code] of Object.entries(HTTP_ERROR_CODES)) add(code, Number(status));
  for (const [status, code] of PARSER_ERROR_CODES) add(code, status);
  return codes;
}

/** The error table of docs/api.md: `| 403 | `csrf_failed` | ... |` rows under "## Error codes". */
function errorTable(): Map<string, number> {
  const start = API.indexOf('\n## Error codes\n');
  expect(start, 'docs/api.md has a "## Error codes" section').toBeGreaterThan(-1);
  const section = API.slice(start + 1).split(/\n#{1,3} /)[0]!;
  const rows = new Map<string, number>();
  for (const m of section.matchAll(/^\| (\d{3}) \| `([a-z_]+)` \|/gm)) rows.set(m[2]!, Number(m[1]));
  return rows;
}

/** Every leaf key of the app config file (`auth.session.ttl`, ...), read from the valibot schema itself. */
function configKeys(): string[] {
  type Schema = { type: string; entries?: Record<string, Schema>; wrapped?: Schema };
  const unwrap = (s: Schema): Schema => (s.type === 'optional' ? unwrap(s.wrapped!) : s);
  const leaves = (s: Schema, prefix: string[]): string[] => {
    const u = unwrap(s);
    return u.type === 'strict_object' && u.entries ? Object.entries(u.entries).flatMap(([key, entry]) => leaves(entry, [...prefix, key])) : [prefix.join('.')];
  };
  return leaves(configSchema as unknown as Schema, []);
}

describe('the docs', () => {
  it("a MongoDB for a two-instance trial: the documented command starts the suite's test server, which svc's driver uses", async () => {
    const m = /`\(cd (test\/support\/mongo-java-server) && mvn -q -B package -DskipTests\) && java -jar (\S+) 27017 --ignore-stdin`/.exec(OPERATIONS);
    expect(m, 'the command in docs/operations.md').not.toBeNull();
    expect(OPERATIONS).toContain('`MONGODB_URL=mongodb://127.0.0.1:27017/svc`');
    // The suite's launcher builds that very jar (the same `mvn package`), which the command then runs.
    const built = await startPrivateMongoServer();
    expect(built, 'mongo-java-server (Java and Maven) is needed by the suites anyway').not.toBeNull();
    await built!.stop();
    const jar = path.join(PROJECT_DIR, m![2]!);
    expect(jar.startsWith(path.join(PROJECT_DIR, m![1]!))).toBe(true);
    expect(existsSync(jar)).toBe(true);
    // As documented, on a free port instead of 27017 (which may be taken here).
    const server = spawn('java', ['-jar', jar, '0', '--ignore-stdin'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        server.stdout!.on('data', (b: Buffer) => {
          out += b.toString();
          const listening = /LISTENING (\d+)/.exec(out);
          if (listening) resolve(Number(listening[1]));
        });
        server.once('exit', (code) => reject(new Error(`the server exited (${code}) before listening`)));
      });
      const client = new MongoClient(`mongodb://127.0.0.1:${port}/svc`, { serverSelectionTimeoutMS: 10_000 });
      try {
        await client.db().collection('trial').insertOne({ _id: 'one' } as never);
        expect(await client.db().collection('trial').countDocuments()).toBe(1);
      } finally {
        await client.close();
      }
    } finally {
      server.kill('SIGTERM');
    }
  }, 120_000);

  it('operator: every key of the config file is in the configuration table (docs/configuration.md)', () => {
    const section = CONFIGURATION;
    const keys = configKeys();
    expect(keys).toContain('auth.session.localCache');
    expect(keys.filter((key) => !section.includes(`| \`${key}\``) && !section.includes(`, \`${key}\``))).toEqual([]);
  });

  it("operator: the nginx configuration of the operator's guide (docs/operations.md) is deploy/nginx.conf, the one the deployment suite runs, with trustProxy", () => {
    const conf = readFileSync(path.join(PROJECT_DIR, 'deploy/nginx.conf'), 'utf8');
    expect(codeBlocks(OPERATIONS, 'nginx')).toEqual([conf]);
    const guide = OPERATIONS.slice(OPERATIONS.indexOf('## Reverse proxy'));
    const config = codeBlocks(OPERATIONS, 'json').find((block) => guide.includes(block) && block.includes('trustProxy'));
    expect(config, 'the operator guide shows svc.config.json with server.trustProxy').toBeDefined();
    expect(JSON.parse(config!)).toMatchObject({ server: { trustProxy: 1 } });
  });

  it("operator: every nginx snippet of the docs forwards $http_host (keeps the port) and X-Forwarded-Proto, never $host", () => {
    const blocks = docFiles().flatMap((file) => codeBlocks(readDoc(file), 'nginx'));
    expect(blocks.length).toBeGreaterThan(0);
    for (const block of blocks) {
      expect(block, 'nginx $host drops a non-default port: use $http_host').not.toMatch(/\$host\b/);
      expect(block).toMatch(/proxy_set_header\s+Host\s+\$http_host;/);
      expect(block).toMatch(/proxy_set_header\s+X-Forwarded-Proto\s+\$scheme;/);
      expect(block).toMatch(/proxy_set_header\s+X-Forwarded-Host\s+\$http_host;/);
    }
  });

  it("operator: npm start gives node a young generation of 2 x 2 MB on Node 20 and 22, 2 x 4 MB from Node 24 on; the Dockerfile (Node 24), the systemd unit, the operator guide and Deno take its flags", () => {
    // The start script run by sh as npm runs it, node a stand-in that prints its arguments.
    const rest = '--heap-growing-percent=20 --no-memory-reducer --no-maglev --v8-pool-size=1';
    expect(npmStartNodeFlags('20.20.2').join(' ')).toBe(`--max-semi-space-size=2 ${rest}`);
    expect(npmStartNodeFlags('22.23.3').join(' ')).toBe(`--max-semi-space-size=2 ${rest}`);
    expect(npmStartNodeFlags('24.21.0').join(' ')).toBe(`--max-semi-space-size=4 ${rest}`);
    expect(npmStartNodeFlags('26.0.0').join(' ')).toBe(`--max-semi-space-size=4 ${rest}`);
    expect(npmStartNodeFlags('30.1.0').join(' ')).toBe(`--max-semi-space-size=4 ${rest}`);
    const flags = npmStartNodeFlags('22.23.3').join(' ');
    const image = npmStartNodeFlags('24.21.0');
    const dockerfile = readFileSync(path.join(PROJECT_DIR, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain('FROM node:24-slim\n');
    expect(dockerfile).toContain(`CMD ["node", ${image.map((f) => JSON.stringify(f)).join(', ')}, "bin/start.js"]`);
    expect(OPERATIONS).toContain(`ExecStart=/usr/bin/node ${flags} bin/start.js`);
    expect(OPERATIONS).toContain(`\`npm start\` is \`${startScript()}\``);
    // Deno gets the same V8 flags (not Node's own --v8-pool-size), in npm run start:deno and in the command docs/runtimes.md gives an installed app.
    const deno = `deno run --allow-all --v8-flags=${flags.split(' ').filter((f) => !f.startsWith('--v8-pool-size')).join(',')}`;
    const scripts = (JSON.parse(readFileSync(path.join(PROJECT_DIR, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts['start:deno']).toBe(`exec ${deno} bin/start.js`);
    expect(readFileSync(path.join(PROJECT_DIR, 'docs/runtimes.md'), 'utf8')).toContain(`\`${deno} node_modules/@svc/core/bin/start.js\``);
  });

  it('operator: the Dockerfile copies every workspace\'s package.json before npm ci (else npm ci installs without it)', () => {
    const { workspaces } = JSON.parse(readFileSync(path.join(PROJECT_DIR, 'package.json'), 'utf8')) as { workspaces: string[] };
    const dockerfile = readFileSync(path.join(PROJECT_DIR, 'Dockerfile'), 'utf8');
    const beforeCi = dockerfile.slice(0, dockerfile.indexOf('RUN npm ci'));
    expect(workspaces.length).toBeGreaterThan(0);
    expect(workspaces.filter((ws) => !beforeCi.includes(`COPY ${ws}/package.json ${ws}/package.json`))).toEqual([]);
  });

  it('newcomer: .env.example, which docs/configuration.md says lists the variables, has each one of its table', () => {
    const table = readDoc('docs/configuration.md').split('\n').filter((line) => line.startsWith('| `'));
    const names = table.flatMap((line) => [...line.split(' | ')[0]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!));
    expect(names.length).toBeGreaterThan(15);
    const example = readDoc('.env.example');
    expect(names.filter((name) => !new RegExp(`^#? ?${name}=`, 'm').test(example))).toEqual([]);
  });

  it('newcomer: the README, docs/ and .env.example cite no document the repository does not have (SPEC.md, CONTRACT)', () => {
    for (const name of [...docFiles(), '.env.example']) {
      const text = readDoc(name);
      expect(text.match(/.{0,40}\b(SPEC(\.md)?|CONTRACT(\.md)?)\b.{0,40}/g), name).toBeNull();
    }
  });

  it("operator: the operator guide's systemd unit runs in production and does not build on every start (a restart is not a build)", () => {
    const unit = codeBlocks(OPERATIONS, 'ini').find((block) => block.includes('[Service]'))!;
    expect(unit).toMatch(/Environment=NODE_ENV=production\b/);
    expect(unit).not.toMatch(/^ExecStartPre=.*build/m);
    expect(unit).toMatch(/^ExecStart=.*bin\/start\.js$/m);
  });

  it('operator: every error code the code base can emit is in the error table of docs/api.md, with its status', () => {
    const emitted = emittedCodes();
    expect(emitted.size).toBeGreaterThan(20);
    const table = errorTable();
    const missing = [...emitted.keys()].filter((code) => !table.has(code));
    expect(missing, 'codes missing from the error table of docs/api.md').toEqual([]);
    for (const [code, status] of table) {
      expect(emitted.get(code), `docs/api.md lists ${code}, which nothing emits`).toBeDefined();
      expect([...emitted.get(code)!], `docs/api.md status of ${code}`).toContain(status);
    }
  });

  it('operator: every OAuth auth_error code is listed in docs/oauth.md', () => {
    const codes = new Set(['server_error']);
    for (const file of sources('src', 'routes')) {
      for (const m of readFileSync(file, 'utf8').matchAll(/new OAuthFlowError\(\s*'([a-z_]+)'/g)) codes.add(m[1]!);
    }
    expect(codes.size).toBeGreaterThan(5);
    for (const code of codes) expect(OAUTH, `auth_error ${code}`).toContain(`\`${code}\``);
  });
});

describe("the operator guide's proxy headers, applied to the app (server.trustProxy: 1)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ config: { server: { trustProxy: 1 } } });
  });
  afterAll(() => t?.close());

  /** A login through nginx on http://svc.example.test:8080 with the given forwarded host. */
  const login = (forwardedHost: string) =>
    t.fetch('/auth/login', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        origin: 'http://svc.example.test:8080',
        'x-forwarded-for': '203.0.113.7',
        'x-forwarded-proto': 'http',
        'x-forwarded-host': forwardedHost,
      },
      body: JSON.stringify({ email: 'nobody@example.com', password: 'whatever password' }),
    });

  it('operator: $http_host (host:port) lets a login from the proxied page through; $host (port dropped) is csrf_failed', async () => {
    expect((await login('svc.example.test:8080')).status).toBe(401); // reached the password check
    const dropped = await login('svc.example.test');
    expect(dropped.status).toBe(403);
    expect((await dropped.json()).error.code).toBe('csrf_failed');
  });
});
