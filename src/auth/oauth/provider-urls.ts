/**
 * What an admin may save as a provider URL or host (CONTRACT 5, "Provider URLs"). svc's server
 * calls these (code exchange, user info), so an admin-entered value must not turn it into a client
 * for plain-text or non-HTTP services: `https:` only; `http:` to a loopback host, where a local
 * identity provider runs in development and tests, or to any host when the operator sets
 * `SVC_ALLOW_INSECURE_PROVIDER_URLS=1`; never another scheme.
 */

/** `URL.hostname` of the loopback hosts (IPv6 keeps its brackets there). */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Provider `config` keys that hold a URL: `realmURL`, `baseURL`, the custom `...Endpoint`s, an OIDC `issuer`. */
export const isProviderUrlKey = (key: string): boolean => /(?:URL|Endpoint)$/.test(key) || key === 'issuer';

/** Why `value` may not be a provider URL, or undefined when it may. */
export function providerUrlProblem(value: string, allowInsecure: boolean): string | undefined {
  if (!URL.canParse(value)) return 'must be a URL';
  const url = new URL(value);
  // `https://trusted.example@evil.example/` reads like the wrong host to a person; fetch refuses credentials anyway.
  if (url.username || url.password) return 'must not contain a user name or password';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && (allowInsecure || LOOPBACK_HOSTS.has(url.hostname))) return undefined;
  if (url.protocol === 'http:') return 'must use https: (http: only to localhost, 127.0.0.1 or [::1], unless SVC_ALLOW_INSECURE_PROVIDER_URLS=1)';
  return 'must use https:';
}

const LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

/**
 * A bare DNS host name (`dev-123.okta.com`, `common`, a tenant GUID): letters, digits and dashes in
 * dot-separated labels, and not an IP address. Provider classes build `https://<domain>/...` from
 * it, so anything more (scheme, path, port, user, spaces) would let the value choose the URL.
 */
export function isHostName(value: string): boolean {
  const labels = value.split('.');
  return value.length <= 253 && labels.every((label) => LABEL.test(label)) && !/^\d+$/.test(labels.at(-1)!);
}
