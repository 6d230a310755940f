// The floor of Node itself: node:http with no framework, a static JSON answer of the same shape as the
// session answers of the other stacks. No cookie, no store. What no stack on Node's http can beat.
import { createServer } from 'node:http';
import { benchUser, HOST, PORT } from './common.ts';

const body = JSON.stringify({ ...benchUser(), createdAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 86_400_000).toISOString() });

createServer((req, res) => {
  const answer = req.url === '/health' ? '{"status":"ok"}' : body;
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
  res.end(answer);
}).listen(PORT, HOST);
