import { createHash } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';

const WINDOW = 15 * 60;
const PER_EMAIL_AND_IP = 5;
const PER_IP = 50;

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing dotted IPv4 converted). */
function ipv6Groups(address: string): number[] {
  let text = address.split('%')[0]!; // zone id: `fe80::1%eth0`
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4[1]!.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, -v4[1]!.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const middle = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...middle, ...right].map((g) => parseInt(g, 16));
}

/**
 * Who a limit counts: an IPv4 address as is; an IPv6 client by its /64, because one subscriber
 * usually holds a whole /64 and could otherwise rotate through 2^64 addresses; an IPv4-mapped IPv6
 * address (`::ffff:a.b.c.d`, what a dual-stack socket reports) as the IPv4 address it maps.
 */
export function rateLimitSubject(ip: string): string {
  if (isIPv4(ip) || !isIPv6(ip)) return ip;
  const groups = ipv6Groups(ip);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 255, groups[7]! >> 8, groups[7]! & 255].join('.');
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/**
 * Login counters in the store (CONTRACT section 3, **beyond**): 5 failures per email+IP or 50 per IP
 * within 15 minutes lock further attempts until the window ends. Emails are hashed in keys.
 *
 * Both counters are taken BEFORE the password is verified (one atomic INCR each per attempt), so
 * parallel guesses cannot all pass the check while the first ones are still verifying: of N parallel
 * attempts at most 50 per IP and 5 per email+IP reach the password check. A success gives its
 * attempt back to the IP and clears the email+IP counter; an attempt the email+IP limit refuses gives
 * its attempt back to the IP (it checked nothing); an attempt that could not be judged (store or
 * database down, server busy) gives back both.
 */
export class LoginRateLimit {
  constructor(
    private readonly store: Store,
    private readonly prefix: string,
    /**
     * Also count failures alone (captcha on risk, CONTRACT 14): the lockout's counters hold failures AND
     * attempts still being checked, so concurrent good logins would look like failures there.
     */
    private readonly countFailures = false,
  ) {}

  private keys(email: string, ip: string) {
    const who = createHash('sha256').update(email).digest('hex').slice(0, 32);
    const subject = rateLimitSubject(ip);
    return {
      pair: `${this.prefix}login-fail:${who}:${subject}`,
      ip: `${this.prefix}login-fail-ip:${subject}`,
      // Failures only (wrong passwords), counted once each password check has said so; the same window.
      failedPair: `${this.prefix}login-failed:${who}:${subject}`,
      failedIp: `${this.prefix}login-failed-ip:${subject}`,
    };
  }

  private refuse(key: string): Promise<never> {
    return tooMany(this.store, key, 'Too many failed logins; try again later');
  }

  /**
   * Throws 429 `too_many_attempts` with `Retry-After` while a limit is reached; otherwise counts this
   * attempt against its IP and its email+IP. Call once per attempt, before verifying.
   */
  async check(email: string, ip: string): Promise<{ pair: number; ip: number }> {
    const keys = this.keys(email, ip);
    const perIp = await this.store.incr(keys.ip, WINDOW);
    if (perIp > PER_IP) await this.refuse(keys.ip);
    const pair = await this.store.incr(keys.pair, WINDOW);
    if (pair > PER_EMAIL_AND_IP) {
      // Refused unchecked: no failure, so the IP gets its attempt back (else 40 tries at one locked
      // email left the address 10 failures for every other account instead of 45).
      await this.giveBack(keys.ip);
      await this.refuse(keys.pair);
    }
    // What came before this attempt: failures, and attempts still being checked (good ones among them).
    return { pair: pair - 1, ip: perIp - 1 };
  }

  /**
   * The failed logins (wrong passwords; never an attempt still being checked, nor a success) of an
   * email+IP and of the IP, nothing counted: what captcha on risk judges. Zero unless `countFailures`.
   */
  async failures(email: string, ip: string): Promise<{ pair: number; ip: number }> {
    if (!this.countFailures) return { pair: 0, ip: 0 };
    const keys = this.keys(email, ip);
    const [pair, perIp] = await Promise.all([this.store.get(keys.failedPair), this.store.get(keys.failedIp)]);
    return { pair: Number(pair) || 0, ip: Number(perIp) || 0 };
  }

  /**
   * A password check said no: counts the failure (one atomic INCR per counter, on every instance
   * together) and returns the failures that came before it. The attempt stays counted in the lockout too.
   */
  async fail(email: string, ip: string): Promise<{ pair: number; ip: number }> {
    if (!this.countFailures) return { pair: 0, ip: 0 };
    const keys = this.keys(email, ip);
    const [pair, perIp] = await Promise.all([this.store.incr(keys.failedPair, WINDOW), this.store.incr(keys.failedIp, WINDOW)]);
    return { pair: pair - 1, ip: perIp - 1 };
  }

  /** An attempt that could not be judged (store or database down, server busy) does not count. */
  async release(email: string, ip: string): Promise<void> {
    const keys = this.keys(email, ip);
    await this.giveBack(keys.pair);
    await this.giveBack(keys.ip);
  }

  /** A successful login clears its email+IP counters and gives its attempt back to the IP (whose failures stay). */
  async succeed(email: string, ip: string): Promise<void> {
    const keys = this.keys(email, ip);
    await Promise.all([this.store.del(keys.pair), ...(this.countFailures ? [this.store.del(keys.failedPair)] : [])]);
    await this.giveBack(keys.ip);
  }

  private giveBack(key: string): Promise<void> {
    return giveBack(this.store, key);
  }
}

/** Takes one attempt back; a counter back at zero is removed (by `decr`, atomically) rather than left in the store. */
export async function giveBack(store: Store, key: string): Promise<void> {
  await store.decr(key);
}

/** 429 `too_many_attempts` with `Retry-After` = what is left of the counter's window. */
export async function tooMany(store: Store, key: string, message: string): Promise<never> {
  const retryAfter = Math.max(1, await store.ttl(key));
  throw new AppError(429, 'too_many_attempts', message, undefined, { 'Retry-After': String(retryAfter) });
}
