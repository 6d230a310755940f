/** A request init whose `json` becomes the body (with its content type). */
export type JsonInit = RequestInit & { json?: unknown };

/**
 * Sends a request the way a browser on one origin would: the cookies held in `jar` (unless the caller
 * sets a Cookie header of its own), a JSON body from `init.json`, and the response's Set-Cookie lines
 * applied back to `jar` (Max-Age=0 or an empty value deletes). One origin, so no Domain/Path rules.
 */
export async function fetchWithCookies(
  send: (path: string, init: RequestInit) => Promise<Response>,
  jar: Map<string, string>,
  path: string,
  init: JsonInit = {},
): Promise<Response> {
  const { json, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (jar.size && !headers.has('cookie')) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
  let body = rest.body;
  if (json !== undefined) {
    headers.set('content-type', 'application/json');
    body = JSON.stringify(json);
  }
  const res = await send(path, { ...rest, headers, body });
  for (const line of res.headers.getSetCookie()) {
    const pair = line.split(';')[0]!;
    const eq = pair.indexOf('=');
    const name = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1);
    if (/max-age=0/i.test(line) || value === '') jar.delete(name);
    else jar.set(name, value);
  }
  return res;
}
