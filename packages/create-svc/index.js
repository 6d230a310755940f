#!/usr/bin/env node
// `npm create svc@latest <folder>` (this package's bin): writes an app root on @svc/core, the one
// folder an operator edits. It installs nothing: the README it writes says the two commands.
//   --name <name>    the app's name (package.json), default: the folder's name
//   --core <spec>    the @svc/core dependency, default ^<this version> (a path to a tarball works too)
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const own = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));
const USAGE = 'Usage: npm create svc@latest <folder> [-- --name <name>] [--core <@svc/core version or tarball>]';

let parsed;
try {
  parsed = parseArgs({ allowPositionals: true, options: { name: { type: 'string' }, core: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
} catch (err) {
  process.stderr.write(`create-svc: ${err.message}\n${USAGE}\n`);
  process.exit(2);
}
const { values, positionals } = parsed;
if (values.help || positionals.length !== 1) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(values.help ? 0 : 2);
}
const root = path.resolve(positionals[0]);
if (existsSync(root) && readdirSync(root).length > 0) {
  process.stderr.write(`create-svc: ${root} exists and is not empty: choose a new folder\n`);
  process.exit(1);
}
const name = values.name ?? (path.basename(root).toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '') || 'svc-app');
// Plugin keys are `author__name` of lowercase letters, digits and underscores.
const key = `${name.replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '') || 'app'}__hello`;

const files = {
  'package.json': `${JSON.stringify(
    {
      name,
      private: true,
      type: 'module',
      scripts: { start: 'svc start', doctor: 'svc doctor', test: 'tsc -p . && node --test' },
      dependencies: { '@svc/core': values.core ?? `^${own.version}`, hono: '^4.13.19', valibot: '^1.5.0' },
      devDependencies: { typescript: '^5.9.0', '@types/node': '^22.0.0' },
      // esbuild's install script checks its binary (esbuild comes with @svc/core, for the app's TypeScript
      // files); npm 11.16+ asks for install scripts to be allowed here, and npm 12 skips the others.
      allowScripts: { esbuild: true },
    },
    null,
    2,
  )}\n`,
  'svc.config.ts': `import { defineConfig } from '@svc/core';

// svc's settings for this app (docs: configuration.md in @svc/core). Start-up stops on an unknown key.
export default defineConfig({
  // The name your users see: the TOTP issuer, the passkey's relying party, every mail's subject.
  app: { name: ${JSON.stringify(name)} },
  // Plugins installed as npm packages, by name (e.g. '@svc/plugin-cli-connector' after npm install):
  // this app's own are its plugins/ folders, found without a list.
  plugins: [],
});
`,
  [`plugins/${key}/index.ts`]: `import { Hono } from 'hono';
import * as v from 'valibot';
import { defineRoute, mountRoutes, type AppEnv, type PluginInstance, type RouteDefinition } from '@svc/core';

// This app's first plugin, mounted at /${key}: one public route and one for signed-in users.
export default function hello(instance: PluginInstance) {
  const routes = [
    defineRoute({
      method: 'GET',
      path: '/hello',
      config: { public: true },
      schema: { summary: 'Say hello', tags: ['${key}'] },
      handler: (c) => c.json({ data: \`hello from \${instance.plugin.key}\` }),
    }),
    defineRoute({
      method: 'GET',
      path: '/me',
      onRequest: instance.auth.authenticate(),
      schema: { summary: 'Who is signed in', tags: ['${key}'], query: v.object({ greeting: v.optional(v.pipe(v.string(), v.maxLength(40)), 'hello') }) },
      handler: (c, { query }) => c.json({ data: { greeting: query.greeting, userId: c.get('authUser')!.userId } }),
    }),
  ];
  const app = new Hono<AppEnv>();
  mountRoutes(app, routes as RouteDefinition[]);
  return app;
}
`,
  'tsconfig.json': `${JSON.stringify(
    {
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, allowImportingTsExtensions: true, skipLibCheck: true, types: ['node'] },
      include: ['svc.config.ts', 'plugins'],
    },
    null,
    2,
  )}\n`,
  '.env.example': `# Copy to .env (svc reads it at start; keep it mode 600, out of version control).
# Unset, svc runs on an embedded store and database and prints a bootstrap admin's password once.
# PORT=3000
# CACHE_URL=redis://127.0.0.1:6379
# MONGODB_URL=mongodb://127.0.0.1:27017/${name.replace(/-/g, '_')}
# SVC_ADMIN_EMAIL=admin@example.com
# SVC_ADMIN_PASSWORD=
# SVC_SECRET_ENCRYPTION_KEY=
# SVC_FRONTEND_URLS=http://localhost:5173
`,
  '.gitignore': 'node_modules/\n.env\n.svc-data/\n',
  'test/app.test.js': `// \`npm test\`: the app starts, answers /health, and its plugin is mounted.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const port = await new Promise((resolve) => {
  const server = net.createServer().listen(0, '127.0.0.1', () => {
    const { port } = server.address();
    server.close(() => resolve(port));
  });
});

test('svc starts with this app and serves its plugin', async (t) => {
  const env = { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', SVC_DATA_DIR: mkdtempSync(path.join(tmpdir(), '${name}-test-')) };
  const svc = spawn(path.resolve('node_modules/.bin/svc'), ['start'], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  t.after(() => svc.kill('SIGTERM'));
  const base = \`http://127.0.0.1:\${port}\`;
  let healthy = false;
  for (let i = 0; i < 300 && !healthy; i++) {
    healthy = (await fetch(\`\${base}/health\`).catch(() => null))?.ok ?? false;
    if (!healthy) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(healthy, 'svc answered /health');
  assert.deepEqual(await (await fetch(\`\${base}/${key}/hello\`)).json(), { data: 'hello from ${key}' });
  assert.equal((await fetch(\`\${base}/${key}/me\`)).status, 401);
});
`,
  'README.md': `# ${name}

An app on [svc](https://www.npmjs.com/package/@svc/core): session login, OAuth and plugins.

\`\`\`sh
npm install && npm start
\`\`\`

svc listens on <http://localhost:3000> with an embedded store and database (\`.svc-data/\`) and prints a
bootstrap admin's password once. \`curl http://localhost:3000/${key}/hello\` answers from this app's plugin.

\`\`\`sh
npm test
\`\`\`

type-checks \`svc.config.ts\` and \`plugins/\` against the installed \`@svc/core\`, then starts the app and calls
its plugin. \`npm run doctor\` checks the settings for production; copy \`.env.example\` to \`.env\` for Redis,
MongoDB and the rest.

- \`svc.config.ts\`: svc's settings (\`defineConfig\` types them).
- \`plugins/${key}/\`: this app's plugin, mounted at \`/${key}\`; add more folders beside it.
`,
};

for (const [file, text] of Object.entries(files)) {
  mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
  writeFileSync(path.join(root, file), text);
}
process.stdout.write(`created ${name} in ${root}\n\n  cd ${path.relative(process.cwd(), root) || '.'}\n  npm install && npm start\n\n`);
