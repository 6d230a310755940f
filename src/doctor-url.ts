/**
 * `svc doctor --url <public base URL>` (CONTRACT 17): asks a running svc for its deployment self-check
 * (`GET <url>/auth/diagnostics`) through the same proxies a browser goes through, and prints what svc
 * sees and each finding. The route is for admins: an API key of an admin with the `auth:admin` scope in
 * SVC_API_KEY (docs/api-keys.md), never an argument (arguments end up in shell history).
 * Exit codes: 0 no finding, 1 findings, 2 the check could not be made.
 */
import type { Diagnostics } from './diagnostics.ts';

const TIMEOUT_MS = 10_000;

export async function doctorUrl(base: string, env: NodeJS.ProcessEnv = process.env, out: (line: string) => void = (l) => void process.stdout.write(`${l}\n`)): Promise<number> {
  let url: URL;
  try {
    url = new URL(`${base.replace(/\/+$/, '')}/auth/diagnostics`);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    out(`--url ${base}: not an http(s) URL (the address browsers use for svc's API, e.g. https://app.example.com/api)`);
    return 2;
  }
  const key = env.SVC_API_KEY;
  if (!key) {
    out('SVC_API_KEY is not set: the self-check is for admins; create an API key with the auth:admin scope (docs/api-keys.md) and pass it in SVC_API_KEY');
    return 2;
  }
  let res: Response;
  try {
    res = await fetch(url, { headers: { authorization: `Bearer ${key}`, accept: 'application/json' }, redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    out(`${url.href}: no answer (${(err as Error).message})`);
    return 2;
  }
  const body = (await res.json().catch(() => null)) as (Diagnostics & { error?: { code: string; message: string } }) | null;
  if (res.status !== 200 || !body?.seen) {
    out(`${url.href} answered ${res.status}${body?.error ? ` ${body.error.code}: ${body.error.message}` : res.status >= 300 && res.status < 400 ? ` (a redirect to ${res.headers.get('location')}: is --url the API's address?)` : ' (not svc\'s self-check: is --url the API\'s address?)'}`);
    return 2;
  }
  const { seen, cookie } = body;
  out(`svc at ${url.origin} sees: ${seen.scheme}://${seen.host}, client ${seen.clientIp}${seen.forwarded ? ' (forwarded headers arrived)' : ''}`);
  out(`session cookie: ${cookie.name}; ${cookie.secure ? 'Secure; ' : ''}SameSite=${cookie.sameSite}${cookie.domain ? `; Domain=${cookie.domain}` : ''}${cookie.partitioned ? '; Partitioned' : ''}`);
  out(`trusted frontends: ${body.frontendOrigins.length ? body.frontendOrigins.join(', ') : '(none)'}`);
  for (const f of body.findings) out(`FAIL ${f.code}: ${f.message}`);
  out(body.findings.length ? `${body.findings.length} finding${body.findings.length === 1 ? '' : 's'}` : 'no findings');
  return body.findings.length ? 1 : 0;
}
