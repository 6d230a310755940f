import type { Config } from '../config/load.ts';

/**
 * Origins that may send state-changing requests with the session cookie (CONTRACT section 3, CSRF):
 * the frontends of `SVC_FRONTEND_URLS` and the service's configured public origins. The origin the
 * request itself reached comes on top (checked by the caller, who knows the request).
 */
export function allowedOrigins(config: Config): Set<string> {
  const configured = [config.env.serverBaseUrl, config.env.callbackBaseUrl].filter(Boolean).map((u) => new URL(u!).origin);
  return new Set([...config.env.frontendUrls, ...configured]);
}

/** The origin a request reached, from its Host (and `X-Forwarded-Proto/Host` behind `trustProxy` proxies). */
export function originFromHeaders(headers: Record<string, string | string[] | undefined>, encrypted: boolean, trustProxy: number): string | undefined {
  const first = (name: string) => {
    const value = headers[name];
    return (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim() || undefined;
  };
  const proto = (trustProxy > 0 ? first('x-forwarded-proto') : undefined) ?? (encrypted ? 'https' : 'http');
  const host = (trustProxy > 0 ? first('x-forwarded-host') : undefined) ?? first('host');
  return host ? `${proto}://${host}` : undefined;
}
