import { createHash } from 'node:crypto';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';

const WINDOW = 15 * 60;
const PER_EMAIL_AND_IP = 5;
const PER_IP = 50;

/**
 * Failed-login counters in the store (CONTRACT section 3, **beyond**): 5 failures per email+IP or 50
 * per IP within 15 minutes lock further attempts until the window ends. Emails are hashed in keys.
 *
 * The email+IP counter is taken BEFORE the password is verified (one atomic INCR per attempt) and
 * cleared on success, so concurrent guesses cannot all pass the check while the first ones are still
 * verifying: of N parallel attempts at most 5 reach the password check.
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

  private async refuse(key: string): Promise<never> {
    const retryAfter = Math.max(1, await this.store.ttl(key));
    throw new AppError(429, 'too_many_attempts', 'Too many failed logins; try again later', undefined, { 'Retry-After': String(retryAfter) });
  }

  /**
   * Throws 429 `too_many_attempts` with `Retry-After` while a limit is reached; otherwise counts this
   * attempt against its email+IP (undone by `succeed`). Call once per attempt, before verifying.
   */
  async check(email: string, ip: string): Promise<void> {
    const keys = this.keys(email, ip);
    if (Number(await this.store.get(keys.ip)) >= PER_IP) await this.refuse(keys.ip);
    if ((await this.store.incr(keys.pair, WINDOW)) > PER_EMAIL_AND_IP) await this.refuse(keys.pair);
  }

  /** A failed attempt: the email+IP counter already holds it (`check`); the per-IP one counts it now. */
  async fail(_email: string, ip: string): Promise<void> {
    await this.store.incr(this.keys('', ip).ip, WINDOW);
  }

  /** An attempt that could not be judged (store or database down) does not count. */
  async release(email: string, ip: string): Promise<void> {
    await this.store.decr(this.keys(email, ip).pair);
  }

  /** A successful login clears its email+IP counter (the per-IP one keeps counting). */
  async succeed(email: string, ip: string): Promise<void> {
    await this.store.del(this.keys(email, ip).pair);
  }
}
