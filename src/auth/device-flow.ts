/**
 * Device login (RFC 8628, CONTRACT 15) for command-line tools: the tool asks for a device code, the
 * person enters (or confirms) the user code on the device page while signed in and approves, the
 * tool's next poll gets an API key named after the request with the scopes approved.
 *
 * Everything lives in the store with a TTL (`auth.deviceFlow.ttl`), under hashes (a store key never
 * holds a code): the request `device:<sha256(device_code)>`, the user code's pointer to it
 * `device-user:<sha256(user code)>`, the poll gate `device-poll:<hash>` and the slow-down count. Each
 * single-use step is one atomic store command: the decision (`SET NX`: approve or deny, once), the
 * poll gate (`SET NX` with the interval), the claim of an approval (`SET NX` of `device-claim:<hash>`:
 * of two polls, one makes the key), its use (`GETDEL` of the request, once the key is made: of two
 * makers, one hands its key out), and wrong user codes are counted per session before they are looked
 * up (`INCR`). An approval outlives a failure to make its key: the claim goes again (or times out), the
 * request stays, and the tool's next poll gets its key.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { Config } from '../config/load.ts';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';
import { sha256hex } from './hash.ts';

/** The user code alphabet (RFC 8628 section 6.1: no vowels, no look-alikes): 20 letters, 8 of them. */
const ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{8}$/;
const DEVICE_CODE = /^[A-Za-z0-9_-]{43}$/;
/** RFC 8628 section 3.2: seconds between polls, and what each `slow_down` adds (section 3.5). */
export const POLL_INTERVAL = 5;
const SLOW_DOWN_STEP = 5;
/** After its expiry a request is still known for this long, to answer `expired_token` rather than `invalid_grant`. */
const EXPIRED_GRACE = 600;
/** Wrong user codes per session per 15 minutes (CONTRACT 15). */
const WRONG_CODES = 10;
const WRONG_CODE_WINDOW = 900;
/** Device codes one address may ask for per 15 minutes (each is a record in the store). */
const CODES_PER_IP = 30;
/** Seconds a poll may take to make the key of an approval before another poll may try (a claim left by a crash). */
const CLAIM_TTL = 30;

/** A device login request in the store. Times are epoch ms. */
export interface DeviceRequest {
  name: string;
  scopes: string[];
  createdAt: number;
  expiresAt: number;
  /** sha256 of the user code: its pointer goes once decided. */
  userCodeHash: string;
  /** Set once, by the one decision that won. */
  status?: 'approved' | 'denied';
  userId?: string;
  /** The approving user's credentials epoch: a lifecycle event before the key is issued ends the request. */
  epoch?: number;
}

/** An approved request one poll claimed (`DeviceFlow.poll`): it makes the key, then `take`s the request or `release`s it. */
export interface DeviceClaim {
  hash: string;
  token: string;
  request: DeviceRequest & { status: 'approved'; userId: string };
}

/** An RFC 8628 section 3.5 error of `POST /auth/device/token`: 400 `{"error"}`. */
export class DeviceTokenError extends Error {
  constructor(
    readonly error: 'authorization_pending' | 'slow_down' | 'access_denied' | 'expired_token' | 'invalid_grant',
    readonly description?: string,
  ) {
    super(error);
  }
}

/** `BCDF-GHJK` from any case, with or without the hyphen (spaces ignored); null when it cannot be a user code. */
export function normalizeUserCode(input: string): string | null {
  const code = input.toUpperCase().replace(/[\s-]/g, '');
  return USER_CODE.test(code) ? code : null;
}

const shown = (code: string) => `${code.slice(0, 4)}-${code.slice(4)}`;

export class DeviceFlow {
  constructor(
    private readonly store: Store,
    private readonly config: Config,
  ) {}

  private key(kind: string, id: string) {
    return `${this.config.auth.store.keyPrefix}${kind}:${id}`;
  }

  private get ttl() {
    return this.config.auth.deviceFlow.ttl;
  }

  /** `POST /auth/device/code`: a new request (scopes checked by the caller). At most 30 per address per 15 minutes. */
  async start(input: { name: string; scopes: string[] }, ip: string) {
    if ((await this.store.incr(this.key('device-codes-ip', sha256hex(ip)), WRONG_CODE_WINDOW)) > CODES_PER_IP) {
      throw new AppError(429, 'too_many_attempts', 'Too many device codes from this address: try again later', undefined, { 'Retry-After': String(WRONG_CODE_WINDOW) });
    }
    const deviceCode = randomBytes(32).toString('base64url');
    const hash = sha256hex(deviceCode);
    const now = Date.now();
    const userCode = await this.newUserCode(hash);
    const request: DeviceRequest = { name: input.name, scopes: input.scopes, createdAt: now, expiresAt: now + this.ttl * 1000, userCodeHash: sha256hex(userCode) };
    await this.store.set(this.key('device', hash), JSON.stringify(request), { ttl: this.ttl + EXPIRED_GRACE });
    const { linkBaseUrl, paths } = this.config.auth.email;
    const uri = `${linkBaseUrl}${paths.device}`;
    return {
      device_code: deviceCode,
      user_code: shown(userCode),
      verification_uri: uri,
      verification_uri_complete: `${uri}?user_code=${shown(userCode)}`,
      expires_in: this.ttl,
      interval: POLL_INTERVAL,
    };
  }

  /** A user code no live request holds (`SET NX` of its pointer to the request `hash`). */
  private async newUserCode(hash: string): Promise<string> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const code = Array.from({ length: 8 }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');
      if (await this.store.set(this.key('device-user', sha256hex(code)), hash, { nx: true, ttl: this.ttl })) return code;
    }
    throw new AppError(503, 'unavailable', 'No free user code: try again');
  }

  /**
   * The pending request a user code names, for the signed-in person (`session`: the session's hash, or
   * an id of the caller): a wrong code counts first (10 per 15 minutes, then 429 `too_many_attempts`,
   * checked before the lookup), a right one is taken back. Unknown, decided or expired: 404 `not_found`.
   */
  async pending(userCode: string, session: string): Promise<{ hash: string; request: DeviceRequest }> {
    const guesses = this.key('device-guess', session);
    if ((await this.store.incr(guesses, WRONG_CODE_WINDOW)) > WRONG_CODES) {
      const ttl = await this.store.ttl(guesses).catch(() => WRONG_CODE_WINDOW);
      throw new AppError(429, 'too_many_attempts', 'Too many wrong codes: try again later', undefined, { 'Retry-After': String(ttl > 0 ? ttl : WRONG_CODE_WINDOW) });
    }
    const found = await this.lookup(userCode);
    if (!found) throw new AppError(404, 'not_found', 'No device is waiting for this code: check it, or start again on the device');
    await this.store.decr(guesses);
    return found;
  }

  private async lookup(userCode: string): Promise<{ hash: string; request: DeviceRequest } | null> {
    const code = normalizeUserCode(userCode);
    if (!code) return null;
    const hash = await this.store.get(this.key('device-user', sha256hex(code)));
    if (!hash) return null;
    const raw = await this.store.get(this.key('device', hash));
    if (!raw) return null;
    const request = JSON.parse(raw) as DeviceRequest;
    if (request.status || request.expiresAt <= Date.now()) return null;
    return { hash, request };
  }

  /**
   * Decides a pending request, once (`SET NX` of its decision: of two approvals, or an approval and a
   * denial, one wins; the other gets 404 as for a used code). The user code stops working.
   */
  async decide(found: { hash: string; request: DeviceRequest }, decision: { status: 'approved' | 'denied'; userId: string; epoch?: number }): Promise<void> {
    const left = Math.max(1, Math.ceil((found.request.expiresAt - Date.now()) / 1000) + EXPIRED_GRACE);
    if (!(await this.store.set(this.key('device-decision', found.hash), decision.status, { nx: true, ttl: left }))) {
      throw new AppError(404, 'not_found', 'No device is waiting for this code: it was approved or denied already');
    }
    await this.store.set(this.key('device', found.hash), JSON.stringify({ ...found.request, ...decision }), { xx: true, keepTtl: true });
    await this.store.del(this.key('device-user', found.request.userCodeHash));
  }

  /**
   * `POST /auth/device/token`: the approved request, claimed by one poll at a time (`SET NX` of its
   * claim, `CLAIM_TTL`), or the RFC error to answer. The request stays in the store until the claimer
   * `take`s it (its key made) or `release`s it (making failed: the next poll tries again). A poll while
   * another holds the claim is `slow_down`. A denial is reported once (`GETDEL`). A poll of a pending
   * request sooner than its interval after the one before is `slow_down`, and the interval grows by 5 s
   * (kept per request, on every instance).
   */
  async poll(deviceCode: string): Promise<DeviceClaim> {
    if (!DEVICE_CODE.test(deviceCode)) throw new DeviceTokenError('invalid_grant', 'Unknown device code');
    const hash = sha256hex(deviceCode);
    const raw = await this.store.get(this.key('device', hash));
    if (!raw) throw new DeviceTokenError('invalid_grant', 'Unknown or used device code');
    const request = JSON.parse(raw) as DeviceRequest;
    // Past `expires_in` the code is dead, approved or not (RFC 8628 section 3.5): the record is kept a
    // little longer only so that late polls hear expired_token rather than invalid_grant.
    if (request.expiresAt <= Date.now()) throw new DeviceTokenError('expired_token', 'The device code expired: start again');
    if (request.status === 'denied') {
      // Reported once: the one poll that takes the record answers; any other finds it gone.
      if (!(await this.store.getDel(this.key('device', hash)))) throw new DeviceTokenError('invalid_grant', 'This device code was used already');
      throw new DeviceTokenError('access_denied', 'The request was denied');
    }
    if (request.status === 'approved') {
      const token = randomBytes(16).toString('base64url');
      if (!(await this.store.set(this.key('device-claim', hash), token, { nx: true, ttl: CLAIM_TTL }))) {
        throw new DeviceTokenError('slow_down', 'Another poll of this code is being answered');
      }
      return { hash, token, request: request as DeviceClaim['request'] };
    }
    const slowKey = this.key('device-slow', hash);
    const interval = POLL_INTERVAL + SLOW_DOWN_STEP * Number((await this.store.get(slowKey)) ?? 0);
    const gate = this.key('device-poll', hash);
    if (!(await this.store.set(gate, '1', { nx: true, ttl: interval }))) {
      const slowed = await this.store.incr(slowKey, this.ttl + EXPIRED_GRACE);
      await this.store.set(gate, '1', { ttl: POLL_INTERVAL + SLOW_DOWN_STEP * slowed });
      throw new DeviceTokenError('slow_down', `Poll at most every ${POLL_INTERVAL + SLOW_DOWN_STEP * slowed} seconds`);
    }
    throw new DeviceTokenError('authorization_pending', 'Waiting for the user to approve');
  }

  /**
   * Uses the claimed request up (`GETDEL`), once its key is made or it ended (`access_denied`): true
   * for the one caller that took it; false when another poll took it first (a claim that outlived
   * `CLAIM_TTL`): that caller's key must not be handed out.
   */
  async take(claim: DeviceClaim): Promise<boolean> {
    const taken = (await this.store.getDel(this.key('device', claim.hash))) !== null;
    await this.store.delIfValue(this.key('device-claim', claim.hash), claim.token).catch(() => {});
    return taken;
  }

  /** Lets the claim go when the key could not be made: the approval stays for the next poll (or the claim times out). */
  async release(claim: DeviceClaim): Promise<void> {
    await this.store.delIfValue(this.key('device-claim', claim.hash), claim.token).catch(() => {});
  }
}
