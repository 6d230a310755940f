import { createHash } from 'node:crypto';
import type { Logger } from '../logger.ts';
import { AppError } from '../http/errors.ts';
import { AnswerTooLarge, readBounded } from '../http/read-bounded.ts';

/** `auth.passwords.breachCheck` (CONTRACT 14). */
export interface BreachCheckConfig {
  enabled: boolean;
  rangeUrl: string;
  timeoutMs: number;
  failOpen: boolean;
}

/**
 * The most svc reads of a range answer. A real one is ~30-40 KB (800-1,000 lines padded); a mirror
 * that answers more is broken or hostile, and the check counts as unavailable.
 */
export const MAX_RANGE_BYTES = 256 * 1024;

const LINE = /^([0-9A-F]{35}):(\d+)$/;

/** Why a range answer could not be used. */
class Unavailable extends Error {}

/**
 * Breached passwords by k-anonymity (the Pwned Passwords range API): only the first 5 hex characters
 * of the password's SHA-1 leave svc (`GET <rangeUrl><PREFIX>`, `Add-Padding: true` so the answer's
 * size says nothing either); the other 35 are looked up in the answer on this side. A suffix with a
 * count above 0 is 400 `password_compromised` (padding lines carry count 0). A range service that is
 * down, slow (`timeoutMs`), answers a non-2xx, HTML, garbage or more than MAX_RANGE_BYTES counts as
 * unavailable: `failOpen` accepts the password with a warn log `breach_check_unavailable`, otherwise
 * 503 `breach_check_unavailable`.
 */
export class BreachedPasswords {
  constructor(
    private readonly config: BreachCheckConfig,
    private readonly logger: Logger,
  ) {}

  get enabled(): boolean {
    return this.config.enabled;
  }

  /** Throws 400 `password_compromised` (or 503 when unavailable and fail-closed); passes otherwise. */
  async check(password: string): Promise<void> {
    if (!this.config.enabled) return;
    const sha1 = createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase();
    const prefix = sha1.slice(0, 5);
    let found: boolean;
    try {
      found = (await this.range(prefix)).has(sha1.slice(5));
    } catch (err) {
      const reason = err instanceof Unavailable || err instanceof AnswerTooLarge ? err.message : (err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError' ? `no answer within ${this.config.timeoutMs} ms` : 'the request failed';
      if (this.config.failOpen) {
        this.logger.warn({ code: 'breach_check_unavailable', reason }, 'breach_check_unavailable: the breached-password range service could not be used; the password was accepted unchecked (auth.passwords.breachCheck.failOpen)');
        return;
      }
      this.logger.warn({ code: 'breach_check_unavailable', reason }, 'breach_check_unavailable: the breached-password range service could not be used; the password was refused (failOpen false)');
      throw new AppError(503, 'breach_check_unavailable', 'The password could not be checked against known breaches right now; try again in a minute');
    }
    if (found) throw new AppError(400, 'password_compromised', 'This password appears in known data breaches: choose another one');
  }

  /** The suffixes of the range `prefix` with a count above 0. */
  private async range(prefix: string): Promise<Set<string>> {
    const signal = AbortSignal.timeout(this.config.timeoutMs);
    const res = await fetch(`${this.config.rangeUrl}${prefix}`, {
      headers: { 'Add-Padding': 'true', Accept: 'text/plain' },
      redirect: 'error',
      signal,
    });
    if (!res.ok) {
      await res.body?.cancel().catch(() => {});
      throw new Unavailable(`status ${res.status}`);
    }
    const text = await readBounded(res, MAX_RANGE_BYTES);
    const found = new Set<string>();
    let lines = 0;
    for (const raw of text.split('\n')) {
      const line = raw.trim();
      if (line === '') continue;
      const m = LINE.exec(line.toUpperCase());
      if (!m) throw new Unavailable('an answer that is not a range (SUFFIX:COUNT lines)');
      lines++;
      if (Number(m[2]) > 0) found.add(m[1]!);
    }
    // Every real range holds hundreds of suffixes: an empty 200 is a broken mirror, not "nothing breached".
    if (lines === 0) throw new Unavailable('an empty answer');
    return found;
  }
}
