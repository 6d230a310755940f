// `npm run example`: builds the example and serves it on its own origin, in front of a running svc.
//   EXAMPLE_PORT   where the example listens (default 5173, on 127.0.0.1 as localhost)
//   SVC_API        the svc origin (default http://localhost:3000), where `/api/...` is forwarded
//   SVC_APP_PATH   the svc app root (default the working directory): its config's `app.name` is the
//                  pages' title and header (build.ts `appNameOf`), as svc started there names itself
//   CAPTCHA_SCRIPT_URL the captcha widget's script when not the provider's own (a mirror); default the provider's
// The app and svc share this origin, as behind the reverse proxy (deploy/nginx.conf): the app calls
// `/api`, which this server forwards to svc as it came (WebSocket handshakes too, for socket.io), so an
// OAuth journey ends back here. svc is told its public address (OAuth callbacks, passkeys) and this
// origin (the links of its mails):
//   SVC_SERVER_BASE_URL=http://localhost:5173 SVC_FRONTEND_URLS=http://localhost:5173 npm start
// Every other path that is not a file is the app (index.html), as a single-page frontend.

import { existsSync, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { appNameOf, buildExample, configScript } from './build.ts';

const port = Number(process.env.EXAMPLE_PORT ?? 5173);
const api = (process.env.SVC_API ?? 'http://localhost:3000').replace(/\/$/, '');
const appName = await appNameOf();
const dir = await buildExample(undefined, '/api', appName);
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.map': 'application/json' };

/** The request's path, decoded; null when it does not decode (`/%E0%A4%A`). */
function pathOf(url = '/'): string | null {
  try {
    return decodeURIComponent(new URL(url, 'http://x').pathname);
  } catch {
    return null;
  }
}

/** Headers of one connection, never forwarded (RFC 9110, 7.6.1), as nginx drops them. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);
/** An answer's raw headers (name, value, name, value...) without those of one connection. */
function endToEnd(raw: string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!HOP_BY_HOP.has(raw[i]!.toLowerCase())) kept.push(raw[i]!, raw[i + 1]!);
  return kept;
}

/** The request's end-to-end headers plus the forwarding headers nginx sets (deploy/nginx.conf). */
function forwardedHeaders(req: http.IncomingMessage): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !HOP_BY_HOP.has(name)));
  const from = req.socket.remoteAddress ?? '';
  const chain = req.headers['x-forwarded-for'];
  return { ...headers, 'x-forwarded-for': chain ? `${chain}, ${from}` : from, 'x-forwarded-host': req.headers.host ?? '', 'x-forwarded-proto': 'http' };
}

/**
 * `/api/...` to svc and its answer back, unchanged but for the headers of one connection and the
 * forwarding headers nginx sets (deploy/nginx.conf); svc unreachable: a JSON 502 naming SVC_API, as
 * the app shows errors. A client that leaves ends the request to svc (a long poll, say).
 */
function forward(req: http.IncomingMessage, res: http.ServerResponse): void {
  const target = new URL(req.url!, api);
  const headers = forwardedHeaders(req);
  const upstream = (target.protocol === 'https:' ? https : http).request(target, { method: req.method, headers }, (answer) => {
    res.writeHead(answer.statusCode!, endToEnd(answer.rawHeaders));
    answer.pipe(res);
  });
  upstream.on('error', (err) => {
    if (res.headersSent) return void res.destroy();
    const message = `svc at SVC_API=${api} cannot be reached (${err.message}): is it running?`;
    res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'bad_gateway', message } }));
  });
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
}

/**
 * A WebSocket handshake to `/api/...` (socket.io's `websocket` transport) goes to svc as nginx passes it
 * (deploy/nginx.conf: `Upgrade` and `Connection` forwarded); once svc answers 101 the two connections are
 * joined byte for byte. svc's other answers (a refused handshake) come back as they are; any other path,
 * or svc unreachable, closes the connection.
 */
function forwardUpgrade(req: http.IncomingMessage, client: Duplex, head: Buffer): void {
  client.on('error', () => client.destroy());
  if (!(req.url === '/api' || req.url?.startsWith('/api/'))) return void client.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  const target = new URL(req.url, api);
  const headers = { ...forwardedHeaders(req), connection: 'upgrade', upgrade: req.headers.upgrade ?? 'websocket' };
  const upstream = (target.protocol === 'https:' ? https : http).request(target, { method: req.method, headers });
  const statusLine = (res: http.IncomingMessage) => `HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}\r\n`;
  const headerLines = (raw: string[]) => raw.reduce((out, v, i) => (i % 2 ? `${out}${raw[i - 1]}: ${v}\r\n` : out), '');
  upstream.on('upgrade', (res, svcSocket, svcHead) => {
    client.write(`${statusLine(res)}${headerLines(res.rawHeaders)}\r\n`);
    if (svcHead.length) client.write(svcHead);
    if (head.length) svcSocket.write(head); // what the client sent after its handshake: svc's, once joined
    svcSocket.on('error', () => client.destroy());
    client.on('close', () => svcSocket.destroy());
    svcSocket.on('close', () => client.destroy());
    svcSocket.pipe(client).pipe(svcSocket);
  });
  upstream.on('response', (res) => {
    client.write(`${statusLine(res)}${headerLines(endToEnd(res.rawHeaders))}Connection: close\r\n\r\n`);
    res.pipe(client);
  });
  upstream.on('error', () => client.destroy());
  client.on('close', () => upstream.destroy());
  upstream.end();
}

const server = http.createServer((req, res) => {
  if (req.url === '/api' || req.url?.startsWith('/api/')) return forward(req, res);
  const pathname = pathOf(req.url);
  if (pathname === null) {
    res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('Bad request: the path does not decode\n');
    return;
  }
  if (pathname === '/config.js') {
    res.writeHead(200, { 'content-type': 'text/javascript', 'cache-control': 'no-store' }).end(configScript('/api', appName, process.env.CAPTCHA_SCRIPT_URL));
    return;
  }
  const file = path.join(dir, path.normalize(pathname));
  const isFile = file.startsWith(dir + path.sep) && existsSync(file) && statSync(file).isFile() && TYPES[path.extname(file)];
  const served = isFile ? file : path.join(dir, 'index.html');
  res.writeHead(200, { 'content-type': TYPES[path.extname(served)]!, 'cache-control': 'no-cache' }).end(readFileSync(served));
});
server.on('upgrade', forwardUpgrade);
server.listen(port, '127.0.0.1', () => {
  const origin = `http://localhost:${port}`;
  process.stdout.write(`svc example: ${origin}/login  (/api goes to ${api}; start svc with SVC_SERVER_BASE_URL=${origin} SVC_FRONTEND_URLS=${origin}); the pages name the app "${appName}" (app.name)\n`);
});
