import type { Context } from 'hono';
import { clientIp } from './auth/client-ip.ts';
import type { Config } from './config/load.ts';
import { requestOrigin } from './http/origins.ts';

/**
 * The deployment self-check (CONTRACT 17, docs/deployment-topologies.md): what svc sees of the request
 * that asked (scheme, host and client IP through `server.trustProxy`), the session cookie it sets, the
 * frontends it trusts, and named findings for the settings that make a login "work" and the next call
 * 401 (a cookie the browser drops or never sends). One function, so `GET /auth/diagnostics`, `svc doctor
 * --url` and the pages that show findings say the same.
 */

export type FindingCode =
  | 'cookie_secure_over_http'
  | 'cookie_domain_mismatch'
  | 'samesite_none_without_secure'
  | 'cross_site_without_none'
  | 'proxy_not_trusted'
  | 'redirect_uri_origin_mismatch';

export interface Finding {
  code: FindingCode;
  message: string;
}

export interface Diagnostics {
  seen: { scheme: string; host: string; clientIp: string; forwarded: boolean };
  cookie: { name: string; secure: boolean; sameSite: 'strict' | 'lax' | 'none'; domain: string | null; partitioned: boolean };
  frontendOrigins: string[];
  findings: Finding[];
}

const FORWARDED_HEADERS = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded'];

/** A host the cookie's `Domain` covers: the domain itself or a name under it (a leading dot is ignored). */
export function domainCovers(domain: string, host: string): boolean {
  const d = domain.replace(/^\./, '').toLowerCase();
  const h = host.toLowerCase();
  return h === d || h.endsWith(`.${d}`);
}

/**
 * The site of an origin (scheme + registrable domain), as browsers decide SameSite. Without the public
 * suffix list, the last two labels stand for the registrable domain: right for `example.com` and
 * `example.test`, lenient for `example.co.uk` (two of its hosts count as one site: no false finding).
 * An IP address or a one-label name (`localhost`) is a site by itself.
 */
export function siteOf(origin: string): string {
  const url = new URL(origin);
  const host = url.hostname;
  const labels = host.split('.');
  const registrable = /^[\d.]+$|^\[/.test(host) || labels.length < 2 ? host : labels.slice(-2).join('.');
  return `${url.protocol}//${registrable}`;
}

/** The self-check for the request `c` asks with; `redirectUris`: the OAuth providers' (id and URI). */
export function diagnose(c: Context, config: Config, cookieName: string, redirectUris: { providerId: string; redirectUri: string }[]): Diagnostics {
  const trustProxy = config.server.trustProxy;
  const origin = requestOrigin(c, trustProxy);
  const url = new URL(origin);
  const { secure, sameSite, domain, partitioned } = config.auth.cookie;
  const forwarded = FORWARDED_HEADERS.some((name) => c.req.header(name) !== undefined);
  const frontendOrigins = [...config.env.frontendUrls];
  const findings: Finding[] = [];

  if (secure && url.protocol === 'http:') {
    findings.push({
      code: 'cookie_secure_over_http',
      message: `the session cookie is Secure, but this request arrived as http${trustProxy > 0 ? ' and no X-Forwarded-Proto said https' : ''}: a browser drops a Secure cookie set over http (except on localhost). Serve svc over https, make the proxy send X-Forwarded-Proto with server.trustProxy set, or set auth.cookie.secure false for plain-http development only`,
    });
  }
  if (domain) {
    for (const frontend of frontendOrigins) {
      const host = new URL(frontend).hostname;
      if (!domainCovers(domain, host)) {
        findings.push({ code: 'cookie_domain_mismatch', message: `the frontend ${frontend} is not under the cookie's Domain ${domain}: its pages never send the session cookie. Set auth.cookie.domain to a parent of both hosts, or remove it` });
      }
    }
  }
  if (sameSite === 'none' && !secure) {
    findings.push({ code: 'samesite_none_without_secure', message: 'auth.cookie.sameSite is "none" without secure: browsers refuse such a cookie. Set auth.cookie.secure true (and serve https)' });
  }
  if (sameSite !== 'none') {
    const own = siteOf(origin);
    for (const frontend of frontendOrigins) {
      if (siteOf(frontend) !== own) {
        findings.push({
          code: 'cross_site_without_none',
          message: `the frontend ${frontend} is on another site than ${origin}, and the cookie is SameSite=${sameSite}: its pages' requests to svc carry no session cookie. Put both on one site (sibling subdomains), or set auth.cookie.sameSite "none" with secure (and partitioned)`,
        });
      }
    }
  }
  if (trustProxy === 0 && c.req.header('x-forwarded-for') !== undefined) {
    findings.push({
      code: 'proxy_not_trusted',
      message: 'X-Forwarded-For arrived while server.trustProxy is 0: svc sees the proxy as every client (one rate limit for all, the proxy in audit records) and the proxy\'s scheme and host. Set server.trustProxy to the number of proxies in front of svc',
    });
  }
  const ownOrigins = new Set([origin, ...(config.env.serverBaseUrl ? [new URL(config.env.serverBaseUrl).origin] : [])]);
  for (const { providerId, redirectUri } of redirectUris) {
    let redirectOrigin: string;
    try {
      redirectOrigin = new URL(redirectUri).origin;
    } catch {
      redirectOrigin = redirectUri;
    }
    if (!ownOrigins.has(redirectOrigin)) {
      findings.push({
        code: 'redirect_uri_origin_mismatch',
        message: `the provider ${providerId} sends users back to ${redirectUri}, whose origin is neither this request's (${origin}) nor SVC_SERVER_BASE_URL's: the login's state cookie is not there when they arrive. Set SVC_SERVER_BASE_URL to the public address, or fix the provider's redirectUri`,
      });
    }
  }

  return {
    seen: { scheme: url.protocol.slice(0, -1), host: url.host, clientIp: clientIp(c, trustProxy), forwarded },
    cookie: { name: cookieName, secure, sameSite, domain: domain ?? null, partitioned },
    frontendOrigins,
    findings,
  };
}
