import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineRoute, type RouteDefinition } from './route.ts';

/**
 * The API reference page (`/docs`, Scalar) without third-party code: its script is the standalone
 * browser bundle of `@scalar/api-reference` (pinned in bin/docs-bundle.js), served from this origin at
 * `/docs/scalar.js`. A CDN script would run on the session cookie's origin and could call every route
 * the visitor may call (security review, issue 24, finding 5); it also needed a network.
 *
 * URLs are relative (`docs/scalar.js`, `openapi.json`), so the page works at `/docs` and at
 * `/api/docs` behind a proxy that keeps the prefix.
 */

interface Bundle {
  file: string;
  version: string;
}

/**
 * Where the bundle is: `vendor/scalar/` beside `src/` (fetched by bin/docs-bundle.js: `npm run dev`,
 * the test suites), which is `dist/vendor/scalar/` for the compiled service (copied there by the
 * build), so a production install needs no package for it. Looked up on the first request, not at
 * start-up: most processes never serve the page, and the CLI never does.
 */
function locateBundle(): Bundle {
  const dir = fileURLToPath(new URL('../../vendor/scalar/', import.meta.url));
  let version: string;
  try {
    ({ version } = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string });
  } catch (err) {
    throw new Error(`the /docs page's script is missing from ${dir} (run \`node bin/docs-bundle.js\`; \`npm run build\` does it): ${(err as Error).message}`, { cause: err });
  }
  return { file: path.join(dir, 'standalone.js'), version };
}
let located: Bundle | undefined;
const bundleInfo = () => (located ??= locateBundle());

// Nothing that would reach another origin: no web fonts, no telemetry, no AI agent, no request proxy.
const scalarConfig = { url: 'openapi.json', withDefaultFonts: false, telemetry: false, agent: { disabled: true }, mcp: { disabled: true }, showDeveloperTools: 'never' };
const initScript = `Scalar.createApiReference('#app', ${JSON.stringify(scalarConfig)})`;
const initHash = `'sha256-${createHash('sha256').update(initScript).digest('base64')}'`;

/**
 * Only this origin. Inline script: just the init line above, allowed by its hash (no 'unsafe-inline',
 * no 'unsafe-eval' for scripts). Styles need 'unsafe-inline': besides its main stylesheet (which would
 * take a nonce), Scalar's libraries inject style elements and attributes of their own. Inline CSS runs
 * no code, and with img-src, font-src and connect-src limited to this origin it cannot send anything out.
 */
const contentSecurityPolicy = [
  "default-src 'none'",
  `script-src 'self' ${initHash}`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// `rel=icon` data: URL: no request for /favicon.ico (which would be a 404).
const page = (version: string) => `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <link rel="icon" href="data:," />
    <title>svc API</title>
  </head>
  <body>
    <div id="app"></div>
    <script src="docs/scalar.js?v=${version}"></script>
    <script>${initScript}</script>
  </body>
</html>
`;

// 4 MB: read on the first request, not at start-up (most processes never serve the page).
let bundle: Promise<Buffer> | undefined;

/** `GET /docs` and `GET /docs/scalar.js`. */
export function docsRoutes(): RouteDefinition[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/docs',
      config: { public: true },
      schema: { summary: 'API reference page', tags: ['docs'] },
      handler: (c) => c.html(page(bundleInfo().version), 200, { 'Content-Security-Policy': contentSecurityPolicy, 'X-Content-Type-Options': 'nosniff' }),
    }),
    defineRoute({
      method: 'GET',
      path: '/docs/scalar.js',
      config: { public: true },
      schema: { summary: "The API reference page's script (@scalar/api-reference's browser bundle, copied into dist/ by the build)", tags: ['docs'] },
      handler: async (c) => {
        bundle ??= readFile(bundleInfo().file).catch((err: unknown) => {
          bundle = undefined; // a failed read is retried by the next request
          throw err;
        });
        return c.body((await bundle) as Uint8Array<ArrayBuffer>, 200, {
          'Content-Type': 'text/javascript; charset=utf-8',
          // The page asks for `?v=<package version>`: an upgrade changes the URL.
          'Cache-Control': 'public, max-age=31536000, immutable',
          'X-Content-Type-Options': 'nosniff',
        });
      },
    }),
  ] as RouteDefinition[];
}
