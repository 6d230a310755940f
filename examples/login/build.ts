// Builds the example into a folder of static files: index.html, style.css, app.js (the app and
// @svc/client bundled by esbuild, the one inside tsx) and config.js (where the API is, and the app's name).
// `npx tsx examples/login/build.ts [outDir] [apiBase]` (CAPTCHA_SCRIPT_URL: the captcha widget's script, when not the provider's own); `npm run example` builds and serves it.
// The name is `app.name` of the app root's svc config (SVC_APP_PATH, else the working directory), read
// by svc's own config loader, else `svc`: the pages' titles and header say it.

import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { loadConfig } from '../../src/config/load.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DEFAULT_OUT_DIR = path.join(HERE, 'dist');

/**
 * The script that tells the app where the API is (`/api` behind the proxy, or a full URL) and the app's
 * name (`app.name`), for the title and the header.
 */
export const configScript = (apiBase: string, appName = 'svc', captchaScript?: string) =>
  `window.SVC_API_BASE = ${JSON.stringify(apiBase)};\nwindow.SVC_APP_NAME = ${JSON.stringify(appName)};\n${captchaScript ? `window.SVC_CAPTCHA_SCRIPT = ${JSON.stringify(captchaScript)};\n` : ''}`;

/**
 * `app.name` of the svc app whose root is SVC_APP_PATH (else the working directory), through svc's config
 * loader (so a wrong config fails here as it fails svc's start), else `svc`. Mail settings are not
 * needed to read a name (`sendsMail: false`).
 */
export async function appNameOf(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const { config } = await loadConfig(env, { sendsMail: false });
  return config.app.name ?? 'svc';
}

/**
 * Builds into `outDir`; `apiBase` (default `/api`, same origin behind the proxy), `appName` (default
 * `svc`) and `opts.captchaScript` (the captcha widget's script when not the provider's own URL: a mirror,
 * or a test's fake; default none, the provider's) go into config.js.
 */
export async function buildExample(outDir = DEFAULT_OUT_DIR, apiBase = '/api', appName = 'svc', opts: { captchaScript?: string } = {}): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: [path.join(HERE, 'src/app.ts')],
    outfile: path.join(outDir, 'app.js'),
    bundle: true,
    minify: true,
    sourcemap: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['svc-source'], // @svc/client's TypeScript source, as in the rest of the workspace
    target: ['chrome111', 'firefox111', 'safari16.4'],
    logLevel: 'warning',
  });
  for (const file of ['index.html', 'style.css']) copyFileSync(path.join(HERE, 'public', file), path.join(outDir, file));
  writeFileSync(path.join(outDir, 'config.js'), configScript(apiBase, appName, opts.captchaScript));
  return outDir;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const appName = await appNameOf();
  const out = await buildExample(process.argv[2] ? path.resolve(process.argv[2]) : undefined, process.argv[3], appName, { captchaScript: process.env.CAPTCHA_SCRIPT_URL });
  process.stdout.write(`built the example for ${appName} into ${out}\n`);
}
