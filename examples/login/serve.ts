// `npm run example`: builds the example and serves it on its own origin, against a running svc.
//   EXAMPLE_PORT   where the example listens (default 5173, on 127.0.0.1 as localhost)
//   SVC_API        the svc origin (default http://localhost:3000); the app calls `${SVC_API}/api`
// svc must list this origin in SVC_FRONTEND_URLS (CORS, CSRF, and the links of its mails):
//   SVC_FRONTEND_URLS=http://localhost:5173 npm start
// Every path that is not a file is the app (index.html), as a single-page frontend behind a proxy.

import { existsSync, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { buildExample, configScript } from './build.ts';

const port = Number(process.env.EXAMPLE_PORT ?? 5173);
const api = (process.env.SVC_API ?? 'http://localhost:3000').replace(/\/$/, '');
const dir = await buildExample();
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.map': 'application/json' };

/** The request's path, decoded; null when it does not decode (`/%E0%A4%A`). */
function pathOf(url = '/'): string | null {
  try {
    return decodeURIComponent(new URL(url, 'http://x').pathname);
  } catch {
    return null;
  }
}

const server = http.createServer((req, res) => {
  const pathname = pathOf(req.url);
  if (pathname === null) {
    res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('Bad request: the path does not decode\n');
    return;
  }
  if (pathname === '/config.js') {
    res.writeHead(200, { 'content-type': 'text/javascript', 'cache-control': 'no-store' }).end(configScript(`${api}/api`));
    return;
  }
  const file = path.join(dir, path.normalize(pathname));
  const isFile = file.startsWith(dir + path.sep) && existsSync(file) && statSync(file).isFile() && TYPES[path.extname(file)];
  const served = isFile ? file : path.join(dir, 'index.html');
  res.writeHead(200, { 'content-type': TYPES[path.extname(served)]!, 'cache-control': 'no-cache' }).end(readFileSync(served));
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`svc example: http://localhost:${port}/login  (API: ${api}/api; svc needs SVC_FRONTEND_URLS=http://localhost:${port})\n`);
});
