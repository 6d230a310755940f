// A local stand-in for one built-in provider that serves ONLY the paths the real one serves: its token
// endpoint and its user-info endpoint(s), on 127.0.0.1. Everything else answers 404, so a client that
// calls the wrong path fails as it would against the real provider. There is no authorize page: tests
// take the state from svc's authorize URL and deliver the callback with a code themselves (the code
// exchange and the user-info calls still run over real HTTP). Every request is recorded.
//
// Providers whose URLs are fixed `https://` hosts (no `baseURL` to point elsewhere) are reached through
// `routeHosts()` (test/support/route-hosts.ts), which sends the in-process app's requests for those
// hosts here.

import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeProviderRequest {
  method: string;
  /** Path with the query string. */
  path: string;
  /** The Authorization header, or ''. */
  authorization: string;
  /** Every request header (lowercase names). */
  headers: http.IncomingHttpHeaders;
  /** The form fields of a token request. */
  form?: Record<string, string>;
}

export interface FakeProviderOptions {
  /** Headers every user-info request must carry exactly (e.g. Etsy's `x-api-key`): else 403, as the real API answers. */
  requireHeaders?: Record<string, string>;
  /** The Authorization scheme the user-info paths accept (default `Bearer`; anything else is 401). */
  authScheme?: string;
  /** Access tokens start with this (Etsy's are `<user_id>.<token>`). */
  accessTokenPrefix?: string;
  /** The one method the user-info paths answer (default GET; Slack's Web API methods: POST). */
  userInfoMethod?: 'GET' | 'POST';
}

export interface FakeProvider {
  /** `http://127.0.0.1:<port>`: the provider's `baseURL`. */
  baseURL: string;
  requests: FakeProviderRequest[];
  /** Access tokens the token endpoint handed out. */
  issued: Set<string>;
  /** What a user-info endpoint answers from now on (the first one when `path` is not given). */
  setUserInfo(json: Record<string, unknown>, path?: string): void;
  close(): Promise<void>;
}

async function readForm(req: http.IncomingMessage): Promise<Record<string, string>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

/** Starts the stand-in: `POST <token>` issues a bearer token for any code, `GET <userInfo>` (or POST) answers with that token only. */
export async function startFakeProvider(paths: { token: string; userInfo: string | string[] }, opts: FakeProviderOptions = {}): Promise<FakeProvider> {
  const requests: FakeProviderRequest[] = [];
  const issued = new Set<string>();
  const userInfoPaths = typeof paths.userInfo === 'string' ? [paths.userInfo] : paths.userInfo;
  const userInfo = new Map<string, Record<string, unknown>>(userInfoPaths.map((p) => [p, {}]));

  const server = http.createServer((req, res) => {
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const path = req.url ?? '/';
    const record: FakeProviderRequest = { method: req.method ?? 'GET', path, authorization: req.headers.authorization ?? '', headers: req.headers };
    requests.push(record);
    if (req.method === 'POST' && path === paths.token) {
      void readForm(req).then((form) => {
        record.form = form;
        if (form.grant_type !== 'authorization_code' || !form.code) return json(400, { error: 'invalid_grant' });
        const accessToken = `${opts.accessTokenPrefix ?? ''}${randomBytes(24).toString('base64url')}`;
        issued.add(accessToken);
        json(200, { access_token: accessToken, token_type: 'Bearer', expires_in: 3600 });
      });
      return;
    }
    if (req.method === (opts.userInfoMethod ?? 'GET') && userInfo.has(path)) {
      const token = new RegExp(`^${opts.authScheme ?? 'Bearer'} (\\S+)$`).exec(record.authorization)?.[1];
      if (!token || !issued.has(token)) return json(401, { error: 'invalid_token' });
      for (const [name, value] of Object.entries(opts.requireHeaders ?? {})) {
        if (req.headers[name.toLowerCase()] !== value) return json(403, { error: `the ${name} header is missing or wrong` });
      }
      return json(200, userInfo.get(path));
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
    setUserInfo: (json, path = userInfoPaths[0]!) => {
      if (!userInfo.has(path)) throw new Error(`${path} is not a user-info path of this provider`);
      userInfo.set(path, json);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
