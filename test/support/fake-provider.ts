// A local stand-in for one built-in provider that serves ONLY the paths the real one serves: its token
// endpoint and its user-info endpoint, on 127.0.0.1. Everything else answers 404, so a client that
// calls the wrong path fails as it would against the real provider. There is no authorize page: tests
// take the state from svc's authorize URL and deliver the callback with a code themselves (the code
// exchange and the user-info call still run over real HTTP). Every request is recorded.

import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeProviderRequest {
  method: string;
  /** Path with the query string. */
  path: string;
  /** The Authorization header, or ''. */
  authorization: string;
  /** The form fields of a token request. */
  form?: Record<string, string>;
}

export interface FakeProvider {
  /** `http://127.0.0.1:<port>`: the provider's `baseURL`. */
  baseURL: string;
  requests: FakeProviderRequest[];
  /** Access tokens the token endpoint handed out. */
  issued: Set<string>;
  /** What the user-info endpoint answers from now on. */
  setUserInfo(json: Record<string, unknown>): void;
  close(): Promise<void>;
}

async function readForm(req: http.IncomingMessage): Promise<Record<string, string>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

/** Starts the stand-in: `POST <token>` issues a bearer token for any code, `GET <userInfo>` answers with that token only. */
export async function startFakeProvider(paths: { token: string; userInfo: string }): Promise<FakeProvider> {
  const requests: FakeProviderRequest[] = [];
  const issued = new Set<string>();
  let userInfo: Record<string, unknown> = {};

  const server = http.createServer((req, res) => {
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const path = req.url ?? '/';
    const record: FakeProviderRequest = { method: req.method ?? 'GET', path, authorization: req.headers.authorization ?? '' };
    requests.push(record);
    if (req.method === 'POST' && path === paths.token) {
      void readForm(req).then((form) => {
        record.form = form;
        if (form.grant_type !== 'authorization_code' || !form.code) return json(400, { error: 'invalid_grant' });
        const accessToken = randomBytes(24).toString('base64url');
        issued.add(accessToken);
        json(200, { access_token: accessToken, token_type: 'Bearer', expires_in: 3600 });
      });
      return;
    }
    if (req.method === 'GET' && path === paths.userInfo) {
      const token = /^Bearer (\S+)$/.exec(record.authorization)?.[1];
      return token && issued.has(token) ? json(200, userInfo) : json(401, { error: 'invalid_token' });
    }
    json(404, { error: 'not_found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });

  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    issued,
    setUserInfo: (json) => void (userInfo = json),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
