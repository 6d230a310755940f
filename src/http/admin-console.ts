import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineRoute, type RouteDefinition } from './route.ts';

/**
 * The admin console (CONTRACT 16, docs/console.md): a single page at `/admin` (and `/api/admin` behind a
 * proxy that keeps the prefix), its script and stylesheet beside it. Everything comes from this origin
 * and the page runs no inline script, so its Content-Security-Policy allows nothing else: the console
 * is on the session cookie's origin, and a script from anywhere else could call every admin route.
 *
 * The files: `dist/console/` of a build (`npm run build`, bin/console-build.js), or, run from the sources
 * (tests, `npm run dev`), built in memory from `console/` on the first request. Looked up then, not at
 * start-up: most processes never serve the console, and the CLI never does.
 */

const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

type Files = Record<string, Uint8Array>;

const here = fileURLToPath(new URL('../../console/', import.meta.url));

async function load(): Promise<Files> {
  if (existsSync(path.join(here, 'app.js'))) {
    const names = ['index.html', 'app.js', 'style.css'];
    const contents = await Promise.all(names.map((name) => readFile(path.join(here, name))));
    return Object.fromEntries(names.map((name, i) => [name, contents[i]!]));
  }
  if (!existsSync(path.join(here, 'src', 'main.ts'))) {
    throw new Error(`the admin console is missing from ${here} (run \`npm run build\`)`);
  }
  // From the sources: the same builder `npm run build` uses (bin/ is no TypeScript project: a URL, not a specifier).
  const builder = new URL('../../bin/console-build.js', import.meta.url).href;
  const { buildConsole } = (await import(builder)) as { buildConsole: () => Promise<Files> };
  return buildConsole();
}

let files: Promise<Files> | undefined;
const consoleFiles = () =>
  (files ??= load().catch((err: unknown) => {
    files = undefined; // a failed read or build is retried by the next request
    throw err;
  }));

const TYPES: Record<string, string> = {
  'app.js': 'text/javascript; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
};

/**
 * `GET /admin` (the page; `/admin/` too) and its two assets. Off (404, as any unknown path) when
 * `admin.console.enabled` is false. The page itself is public: it holds no data, and asks the API, which
 * refuses anyone but an admin.
 */
export function adminConsoleRoutes(options: { enabled: boolean; appName: string }): RouteDefinition[] {
  if (!options.enabled) return [];
  // The app's name in the title and the header (`app.name` is one line without < or >: schema.ts).
  const named = (html: string) => html.replaceAll('{{APP_NAME}}', options.appName.replaceAll('&', '&amp;').replaceAll('"', '&quot;'));
  const pageRoute = (routePath: string) =>
    defineRoute({
      method: 'GET',
      path: routePath,
      config: { public: true },
      schema: { summary: 'The admin console (docs/console.md)', tags: ['console'] },
      handler: async (c) => {
        // Relative asset URLs work at /admin and at /api/admin; from `/admin/` they need the folder's own name dropped.
        const html = named(Buffer.from((await consoleFiles())['index.html']!).toString('utf8'));
        const page = c.req.path.endsWith('/') ? html.replaceAll('"admin/', '"') : html;
        return c.html(page, 200, { 'Content-Security-Policy': contentSecurityPolicy, 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-cache' });
      },
    });
  return [
    pageRoute('/admin'),
    pageRoute('/admin/'),
    ...Object.entries(TYPES).map(([name, type]) =>
      defineRoute({
        method: 'GET',
        path: `/admin/${name}`,
        config: { public: true },
        schema: { summary: `The admin console's ${name === 'app.js' ? 'script' : 'stylesheet'}`, tags: ['console'] },
        handler: async (c) =>
          c.body((await consoleFiles())[name]! as Uint8Array<ArrayBuffer>, 200, {
            'Content-Type': type,
            // Revalidated on each load: an upgrade is seen at once (the files are small).
            'Cache-Control': 'no-cache',
            'X-Content-Type-Options': 'nosniff',
          }),
      }),
    ),
  ] as RouteDefinition[];
}
