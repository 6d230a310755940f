import type { Context } from 'hono';
import * as v from 'valibot';
import type { Config } from '../config/load.ts';
import { AppError, type ErrorDetail } from '../http/errors.ts';
import type { Logger } from '../logger.ts';
import { clientIp } from '../auth/client-ip.ts';
import { readBounded } from '../http/read-bounded.ts';

export type CaptchaProvider = 'turnstile' | 'hcaptcha' | 'recaptcha';

/** Each provider's siteverify endpoint: the three share one shape (form POST secret, response, remoteip -> `{"success":bool}`). */
export const DEFAULT_VERIFY_URLS: Record<CaptchaProvider, string> = {
  turnstile: 'https://challenges.cloudflare.com/turnstile/v0/siteverify',
  hcaptcha: 'https://api.hcaptcha.com/siteverify',
  recaptcha: 'https://www.google.com/recaptcha/api/siteverify',
};

/** Failed logins (uncleared attempts) from an email+IP, or from an IP in the 15-minute window, past which a captcha is asked. */
export const CAPTCHA_AFTER = { pair: 3, ip: 20 } as const;
/** What `captchaToken` may be (the providers' tokens are ~2 KB at most). */
export const MAX_CAPTCHA_TOKEN = 4096;
/** `captchaToken` in the bodies of the routes that may ask for one. */
export const captchaTokenSchema = v.optional(v.pipe(v.string(), v.maxLength(MAX_CAPTCHA_TOKEN)));
const VERIFY_TIMEOUT_MS = 5000;
const MAX_VERIFY_BYTES = 64 * 1024;

/** The failed logins counted for a caller (`LoginRateLimit.failures`): for an email+IP and for the IP; good logins never count. */
export interface RiskCounts {
  pair: number;
  ip: number;
}

/**
 * Captcha on risk (CONTRACT 14, `auth.captcha`): a caller with failed logins behind it (3 per email+IP,
 * or 20 per IP in 15 minutes, counters of wrong passwords only in the store, shared by every instance;
 * `Auth.checkPassword` keeps parallel guesses from slipping past them) must
 * send `captchaToken` on login, sign-up, forgot-password and magic-link requests; it is checked at the
 * provider's siteverify endpoint. Only `success: true` passes: an endpoint that is down, slow or
 * answers anything else is 400 `captcha_failed`, never a pass. A caller without failures is never asked.
 */
export class CaptchaOnRisk {
  readonly provider: CaptchaProvider | null;
  readonly siteKey: string | null;
  private readonly verifyUrl: string;
  private readonly secret: string;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    /** The failed logins of an email+IP and of the IP, nothing counted (`LoginRateLimit.failures`). */
    private readonly peek: (email: string, ip: string) => Promise<RiskCounts>,
  ) {
    const captcha = config.auth.captcha;
    this.provider = captcha?.provider ?? null;
    this.siteKey = captcha?.siteKey ?? null;
    this.verifyUrl = captcha ? (captcha.verifyUrl ?? DEFAULT_VERIFY_URLS[captcha.provider]) : '';
    this.secret = config.env.captchaSecret ?? '';
  }

  get enabled(): boolean {
    return this.provider !== null;
  }

  /** What `GET /auth/config` shows a frontend. */
  publicConfig(): { provider: CaptchaProvider; siteKey: string } | null {
    return this.provider && this.siteKey ? { provider: this.provider, siteKey: this.siteKey } : null;
  }

  /** Whether these failures ask for a captcha. */
  risky(counts: RiskCounts): boolean {
    return counts.pair >= CAPTCHA_AFTER.pair || counts.ip >= CAPTCHA_AFTER.ip;
  }

  /**
   * Passes a caller without risk, or with a token the provider accepts; otherwise 400
   * `captcha_required` (no token) or `captcha_failed`.
   */
  async require(c: Context, counts: RiskCounts, token: string | undefined): Promise<void> {
    if (!this.enabled || !this.risky(counts)) return;
    if (token === undefined || token === '') {
      throw new AppError(400, 'captcha_required', 'Solve the captcha and send its token as captchaToken', [{ siteKey: this.siteKey } as unknown as ErrorDetail] /* CONTRACT 14's detail shape */);
    }
    if (!(await this.verify(token, clientIp(c, this.config.server.trustProxy)))) {
      throw new AppError(400, 'captcha_failed', 'The captcha could not be verified; solve it again');
    }
  }

  /**
   * For sign-up, forgot-password and magic-link requests: the failed logins of this email from this IP
   * (and of the IP) decide; they check no password, so nothing is counted here.
   */
  async requireFor(c: Context, email: string, token: string | undefined): Promise<void> {
    if (!this.enabled) return;
    await this.require(c, await this.peek(email, clientIp(c, this.config.server.trustProxy)), token);
  }

  /** True only for an answer of the provider saying `success: true`. */
  private async verify(token: string, ip: string): Promise<boolean> {
    try {
      const res = await fetch(this.verifyUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({ secret: this.secret, response: token, ...(ip ? { remoteip: ip } : {}) }).toString(),
        redirect: 'error',
        signal: AbortSignal.timeout(VERIFY_TIMEOUT_MS),
      });
      const text = await readBounded(res, MAX_VERIFY_BYTES);
      if (!res.ok) throw new Error(`status ${res.status}`);
      const body = JSON.parse(text) as { success?: unknown };
      return body !== null && typeof body === 'object' && body.success === true;
    } catch (err) {
      this.logger.warn({ code: 'captcha_verify_failed', reason: (err as Error).message }, 'captcha_verify_failed: the captcha verify endpoint could not be used; the request was refused');
      return false;
    }
  }
}
