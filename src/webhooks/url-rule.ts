/**
 * Where svc may send webhooks (CONTRACT 13): the provider URL rule of section 5 (`https:`, no user
 * or password in the URL), and never a private, loopback or link-local address, unless the operator
 * sets `SVC_ALLOW_INSECURE_WEBHOOK_URLS=1` (then plain `http:` and any address, for development and
 * tests). An admin-entered URL must not turn svc into a client of the network it runs in (SSRF): the
 * host is checked when the URL is saved (an IP literal, `localhost`) and again at each delivery, on
 * the addresses its name resolves to then (`guardedLookup`), so a name that points inside later
 * (DNS rebinding) is refused too.
 */
import { lookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** Address ranges that are not the public internet (IANA special-purpose registries). */
const NOT_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  NOT_PUBLIC.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard-only
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // old site-local
  ['ff00::', 8], // multicast
] as const) {
  NOT_PUBLIC.addSubnet(net, prefix, 'ipv6');
}

/** Whether `address` (an IPv4 or IPv6 literal, IPv4-mapped IPv6 included) is private, loopback or otherwise not public. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return NOT_PUBLIC.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** `URL.hostname` without IPv6 brackets. */
const bare = (hostname: string) => hostname.replace(/^\[|\]$/g, '');

/** Names that mean this machine whatever DNS says (RFC 6761). */
const isLocalName = (hostname: string) => /(^|\.)localhost\.?$/i.test(hostname);

/** Why `value` may not be a webhook URL, or undefined when it may. */
export function webhookUrlProblem(value: string, allowInsecure: boolean): string | undefined {
  if (!URL.canParse(value)) return 'must be a URL';
  const url = new URL(value);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must use https:';
  // `https://trusted.example@evil.example/` reads like the wrong host to a person.
  if (url.username || url.password) return 'must not contain a user name or password';
  if (allowInsecure) return undefined;
  if (url.protocol !== 'https:') return 'must use https: (plain http: only with SVC_ALLOW_INSECURE_WEBHOOK_URLS=1)';
  const host = bare(url.hostname);
  if (isLocalName(host) || isPrivateAddress(host)) {
    return 'must not point to a private, loopback or link-local address (only with SVC_ALLOW_INSECURE_WEBHOOK_URLS=1)';
  }
  return undefined;
}

/** A delivery refused because the host's name resolved to an address the rule forbids. */
export class PrivateAddressError extends Error {
  override readonly name = 'PrivateAddressError';
  readonly code = 'EPRIVATEADDRESS';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * `lookup` for `http.request`: resolves as Node does, and fails when any address of the name is not
 * public (one private address among public ones could be the one connected to).
 */
export function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const blocked = addresses.find((a) => isPrivateAddress(a.address));
    if (blocked) return callback(new PrivateAddressError(`${hostname} resolves to ${blocked.address}, a private or loopback address (allowed only with SVC_ALLOW_INSECURE_WEBHOOK_URLS=1)`), []);
    if (options.all) return callback(null, addresses);
    const first = addresses[0];
    if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
    callback(null, first.address, first.family);
  });
}
