import { createHash } from 'node:crypto';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';

const WINDOW = 15 * 60;
const PER_EMAIL_AND_IP = 5;
const PER_IP = 50;

/**
 * Failed-login counters in the store (CONTRACT section 3, **beyond**): 5 failures per email+IP or 50
 * per IP within 15 minutes lock further attempts until the window ends. Emails are hashed in keys.
 */
export class LoginRateLimit {
  constructor(
    private readonly store: Store,
    private readonly prefix: string,
  ) {}

  private keys(email: string, ip: string) {
    const who = createHash('sha256').update(email).digest('hex').slice(0, 32);
    return { pair: `${this.prefix}login-fail:${who}:${ip}`, ip: `${this.prefix}login-fail-ip:${ip}` };
  }

  /** Throws 429 `too_many_attempts` with `Retry-After` while a limit is reached. */
  async check(email: string, ip: string): Promise<void> {
    const keys = this.keys(email, ip);
    const [pair, perIp] = await Promise.all([this.store.get(keys.pair), this.store.get(keys.ip)]);
    const blocked = Number(pair) >= PER_EMAIL_AND_IP ? keys.pair : Number(perIp) >= PER_IP ? keys.ip : null;
    if (!blocked) return;
    const retryAfter = Math.max(1, await this.store.ttl(blocked));
    throw new AppError(429, 'too_many_attempts', 'Too many failed logins; try again later', undefined, { 'Retry-After': String(retryAfter) });
  }

  async fail(email: string, ip: string): Promise<void> {
    const keys = this.keys(email, ip);
    await Promise.all([this.store.incr(keys.pair, WINDOW), this.store.incr(keys.ip, WINDOW)]);
  }

  /** A successful login clears its email+IP counter (the per-IP one keeps counting). */
  async succeed(email: string, ip: string): Promise<void> {
    await this.store.del(this.keys(email, ip).pair);
  }
}
