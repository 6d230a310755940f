import { createHash, createHmac, randomInt } from 'node:crypto';
import type { TOTP } from 'otpauth';
import { AppError } from '../http/errors.ts';
import { sealedRecord, type SecretBox } from './oauth/secrets.ts';
import { atEpoch, epochOf, type UserDoc, type UserService } from './users.ts';

// A user's second factor lives in the user document (`totp`: `TotpState` in users.ts, which says how it is kept).

const PERIOD = 30;
const RECOVERY_CODES = 10;
/** Crockford-like alphabet: no 0/O, 1/I/L confusion when a person types a code from paper. */
const ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

/** Loaded on first use: an instance whose users never turn TOTP on does not carry them (0.8 MB of heap). */
const otpauth = () => import('otpauth');
const uqr = () => import('uqr');

export const totpEnabled = (user: UserDoc) => Boolean(user.totp?.secret);

const normalized = (code: string) => code.toLowerCase().replace(/[^a-z0-9]/g, '');
/** A recovery code's stored form: keyed with the (opened) TOTP secret. */
const hashCode = (secret: string, code: string) => `h1:${createHmac('sha256', secret).update(normalized(code)).digest('hex')}`;
/** The stored form of versions before 0.3: a bare SHA-256. */
const legacyHash = (code: string) => createHash('sha256').update(normalized(code)).digest('hex');

function recoveryCode(): string {
  const chars = Array.from({ length: 10 }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');
  return `${chars.slice(0, 5)}-${chars.slice(5)}`;
}

/**
 * The QR code of `text` as a `data:image/svg+xml` URL: 4 px per module and a 2-module margin, with a
 * width and height of its own (uqr's SVG has only a viewBox), so an `<img>` shows it at the size the
 * earlier PNG had instead of stretching it to its container.
 */
async function qrCodeDataUrl(text: string): Promise<string> {
  const { renderSVG } = await uqr();
  const svg = renderSVG(text, { ecc: 'M', border: 2, pixelSize: 4 });
  const side = /viewBox="0 0 (\d+) \d+"/.exec(svg)![1];
  const sized = svg.replace('<svg ', `<svg width="${side}" height="${side}" `);
  return `data:image/svg+xml;base64,${Buffer.from(sized).toString('base64')}`;
}

/**
 * TOTP (RFC 6238: SHA-1, 6 digits, 30 s) with the `otpauth` library; QR codes with `uqr` (no
 * dependencies; `qrcode` brought 29 packages for its PNG), as an SVG data URL.
 */
export class TotpService {
  constructor(
    private readonly users: UserService,
    private readonly secrets: SecretBox,
    private readonly issuer = 'svc',
  ) {}

  private async totp(user: UserDoc, sealed: string): Promise<TOTP> {
    const { Secret, TOTP } = await otpauth();
    return new TOTP({ issuer: this.issuer, label: user.email, secret: Secret.fromBase32(this.secrets.open(sealed, sealedRecord.totp(user._id))), period: PERIOD, digits: 6, algorithm: 'SHA1' });
  }

  /** Starts (or restarts) an enrolment: the secret stays pending until a first code confirms it. */
  async enroll(user: UserDoc): Promise<{ otpauthUri: string; qrCode: string }> {
    if (totpEnabled(user)) throw new AppError(409, 'totp_enabled', 'Two-factor authentication is already on; turn it off first');
    const { Secret, TOTP } = await otpauth();
    const secret = new Secret({ size: 20 });
    // Only while no lifecycle event (a claim, a reset) came between reading the user and this write.
    if (!(await this.users.users.updateOne(atEpoch(user._id, epochOf(user)), { $set: { 'totp.pending': this.secrets.seal(secret.base32, sealedRecord.totp(user._id)) } }))) {
      throw new AppError(409, 'account_changed', 'The account changed meanwhile: start again');
    }
    const otpauthUri = new TOTP({ issuer: this.issuer, label: user.email, secret, period: PERIOD, digits: 6, algorithm: 'SHA1' }).toString();
    return { otpauthUri, qrCode: await qrCodeDataUrl(otpauthUri) };
  }

  /** Confirms the pending enrolment with a first code; returns the recovery codes, shown this once. */
  async confirm(user: UserDoc, code: string): Promise<string[]> {
    if (totpEnabled(user)) throw new AppError(409, 'totp_enabled', 'Two-factor authentication is already on');
    const pending = user.totp?.pending;
    if (!pending) throw new AppError(409, 'totp_not_enrolled', 'Nothing to confirm: start with POST /auth/totp/enroll');
    const step = this.matchingStep(await this.totp(user, pending), code);
    if (step === null) throw new AppError(400, 'invalid_code', 'The code is wrong or expired');
    const codes = Array.from({ length: RECOVERY_CODES }, recoveryCode);
    const opened = this.secrets.open(pending, sealedRecord.totp(user._id));
    // TOTP on is a lifecycle event: the epoch moves with it (second steps and challenges started before die).
    const done = await this.users.users.updateOne(
      { ...atEpoch(user._id, epochOf(user)), 'totp.pending': pending },
      { $set: { totp: { secret: pending, lastStep: step, recoveryCodes: codes.map((c) => hashCode(opened, c)) }, updatedAt: new Date().toISOString() }, $inc: { epoch: 1 } },
    );
    if (!done) throw new AppError(409, 'totp_not_enrolled', 'The enrolment changed meanwhile: start again');
    return codes;
  }

  /** The time step a code belongs to (now, or one step either side for clock drift), or null. */
  private matchingStep(totp: TOTP, code: string): number | null {
    if (!/^\d{6}$/.test(code)) return null;
    // One reading of the clock for both the check and the step it names (a step boundary between
    // two readings would record the wrong step).
    const timestamp = Date.now();
    const delta = totp.validate({ token: code, window: 1, timestamp });
    return delta === null ? null : Math.floor(timestamp / 1000 / PERIOD) + delta;
  }

  /**
   * A current code, good once: the step is recorded with a conditional update, so the same code
   * (or an older one) replayed, even concurrently, is refused.
   */
  async verifyCode(user: UserDoc, code: string): Promise<boolean> {
    if (!user.totp?.secret) return false;
    const step = this.matchingStep(await this.totp(user, user.totp.secret), code);
    if (step === null) return false;
    const filter = user.totp.lastStep === undefined ? { _id: user._id, 'totp.lastStep': { $exists: false } } : { _id: user._id, 'totp.lastStep': { $lt: step } };
    return (await this.users.users.updateOne(filter, { $set: { 'totp.lastStep': step } })) !== null;
  }

  /**
   * A recovery code, good once (removed atomically), or null. `giveBack` returns it when no session came
   * of it (an account change overtook the login), unless TOTP was turned off or set up anew meanwhile.
   */
  async useRecoveryCode(user: UserDoc, code: string): Promise<{ giveBack(): Promise<void> } | null> {
    const secret = user.totp?.secret;
    if (!secret) return null;
    const stored = user.totp!.recoveryCodes ?? [];
    const hash = [hashCode(this.secrets.open(secret, sealedRecord.totp(user._id)), code), legacyHash(code)].find((h) => stored.includes(h));
    if (!hash || (await this.users.users.updateOne({ _id: user._id, 'totp.recoveryCodes': hash }, { $pull: { 'totp.recoveryCodes': hash } })) === null) return null;
    return {
      giveBack: async () => {
        await this.users.users.updateOne({ _id: user._id, 'totp.secret': secret }, { $addToSet: { 'totp.recoveryCodes': hash } });
      },
    };
  }

  /**
   * TOTP off: a lifecycle event (the epoch moves with it), only while the account is as it was when
   * the code or password was checked (a reset racing this keeps TOTP on): else 409 `account_changed`.
   */
  async disable(user: UserDoc): Promise<void> {
    await this.users.advanceEpoch(user._id, { $unset: { totp: true } }, epochOf(user));
  }
}
