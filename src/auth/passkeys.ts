/**
 * Passkeys (WebAuthn, CONTRACT section 11) on @simplewebauthn/server: it builds the options and checks
 * every response (challenge, origin, RP id, signature, counter); svc keeps the challenges (single use,
 * 5 min, in the store) and the credentials (a collection with a unique index on the credential id).
 *
 * A challenge is bound to whoever asked for it: registration to the session (`passkey-reg:<session
 * hash>`), login to the browser (`passkey-login:<sha256(cookie)>`, an HttpOnly cookie). The credential
 * id, public key and counter are public data; the counter going back means a cloned authenticator.
 */
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import type { Config } from '../config/load.ts';
import type { Collection, Database } from '../db/index.ts';
import { DuplicateKeyError } from '../db/index.ts';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';
import type { FlowCookies } from './flow-cookies.ts';
import { sha256hex } from './hash.ts';
import { epochOf, type UserDoc } from './users.ts';

/**
 * @simplewebauthn/server with its X.509/ASN.1 stack, loaded on the first passkey request rather than at
 * start-up: about 12 MB of resident memory that a process without passkey traffic never needs.
 */
const webauthn = () => import('@simplewebauthn/server');

export const PASSKEY_COLLECTION = 'svc__core-passkey';
export const PASSKEY_LOGIN_COOKIE = 'svc_passkey';
const CHALLENGE_TTL = 300;

interface PasskeyDoc {
  _id: string;
  userId: string;
  /** base64url credential id (unique). */
  credentialId: string;
  /** base64url COSE public key. */
  publicKey: string;
  counter: number;
  transports: string[];
  deviceType: string;
  backedUp: boolean;
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** What its owner sees of a passkey. */
export interface PasskeyView {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** A registration waiting for the browser's response: its challenge and the user's epoch then. */
interface PendingRegistration {
  challenge: string;
  epoch: number;
}

const view = (d: PasskeyDoc): PasskeyView => ({ id: d._id, name: d.name, createdAt: d.createdAt, lastUsedAt: d.lastUsedAt });
const refused = (why: string) => new AppError(401, 'invalid_passkey', `The passkey was not accepted: ${why}`);

/** Relying party: `auth.passkeys`, else the service's base URL's host and every allowed origin. */
export function relyingParty(config: Config): { rpID: string; rpName: string; origins: string[] } {
  const own = config.env.serverBaseUrl ?? config.env.ownOrigins[0] ?? `http://localhost:${config.env.port}`;
  const origins = config.auth.passkeys.origins ?? [...new Set([...config.env.frontendUrls, ...config.env.ownOrigins, new URL(own).origin])];
  return { rpID: config.auth.passkeys.rpId ?? new URL(own).hostname, rpName: config.auth.passkeys.rpName ?? config.app.name ?? 'svc', origins };
}

export class PasskeyService {
  private constructor(
    private readonly passkeys: Collection<PasskeyDoc>,
    private readonly store: Store,
    private readonly config: Config,
    private readonly cookies: FlowCookies,
  ) {}

  static async open(db: Database, store: Store, config: Config, cookies: FlowCookies): Promise<PasskeyService> {
    return new PasskeyService(await db.collection<PasskeyDoc>(PASSKEY_COLLECTION, [{ fields: ['credentialId'] }]), store, config, cookies);
  }

  private get rp() {
    return relyingParty(this.config);
  }

  private key(kind: 'reg' | 'login', binding: string): string {
    return `${this.config.auth.store.keyPrefix}passkey-${kind}:${kind === 'reg' ? binding : sha256hex(binding)}`;
  }

  async list(userId: string): Promise<PasskeyView[]> {
    return (await this.passkeys.find({ userId }, { sort: { createdAt: 1, _id: 1 } })).map(view);
  }

  async count(userId: string): Promise<number> {
    return this.passkeys.count({ userId });
  }

  /** Whether the passkey is still registered (a login re-checks after reading its user). */
  async exists(id: string): Promise<boolean> {
    return (await this.passkeys.findOne({ _id: id })) !== null;
  }

  /**
   * `POST /auth/passkeys/options`: creation options; the challenge waits 5 min for this session,
   * with the user's credentials epoch (a lifecycle event meanwhile kills it).
   */
  async registrationOptions(user: UserDoc, sessionHash: string) {
    const existing = await this.passkeys.find({ userId: user._id });
    const options = await (await webauthn()).generateRegistrationOptions({
      rpName: this.rp.rpName,
      rpID: this.rp.rpID,
      userName: user.email,
      userID: new TextEncoder().encode(user._id),
      userDisplayName: [user.firstname, user.lastname].filter(Boolean).join(' ') || user.email,
      attestationType: 'none',
      excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports })),
      // Discoverable: the login needs no email.
      authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
    });
    const pending: PendingRegistration = { challenge: options.challenge, epoch: epochOf(user) };
    await this.store.set(this.key('reg', sessionHash), JSON.stringify(pending), { ttl: CHALLENGE_TTL });
    return options;
  }

  /**
   * `POST /auth/passkeys`: checks the browser's response against this session's challenge (used up).
   * `user` is read after the options: an epoch that moved since refuses it (`Auth.addPasskey` re-checks after the write).
   */
  async register(user: UserDoc, sessionHash: string, response: RegistrationResponseJSON, name: string | undefined): Promise<PasskeyView> {
    const userId = user._id;
    const raw = await this.store.getDel(this.key('reg', sessionHash));
    const pending = raw?.startsWith('{') ? (JSON.parse(raw) as PendingRegistration) : null;
    if (!pending) throw new AppError(400, 'invalid_passkey', 'No registration is pending for this session (ask for options first; they last 5 minutes and work once)');
    if (pending.epoch !== epochOf(user)) throw new AppError(400, 'invalid_passkey', 'The account changed since the options were given (a password, factor or identity changed): ask for options again');
    const challenge = pending.challenge;
    let verified;
    try {
      verified = await (await webauthn()).verifyRegistrationResponse({ response, expectedChallenge: challenge, expectedOrigin: this.rp.origins, expectedRPID: this.rp.rpID, requireUserVerification: false });
    } catch (err) {
      throw new AppError(400, 'invalid_passkey', `The passkey was not accepted: ${(err as Error).message}`);
    }
    if (!verified.verified) throw new AppError(400, 'invalid_passkey', 'The passkey was not accepted: the response did not verify');
    const { credential, credentialDeviceType, credentialBackedUp } = verified.registrationInfo;
    const now = new Date().toISOString();
    const doc: PasskeyDoc = {
      _id: randomUUID(),
      userId,
      credentialId: credential.id,
      publicKey: Buffer.from(credential.publicKey).toString('base64url'),
      counter: credential.counter,
      transports: credential.transports ?? [],
      deviceType: credentialDeviceType,
      backedUp: credentialBackedUp,
      name: name ?? `Passkey ${now.slice(0, 10)}`,
      createdAt: now,
      lastUsedAt: null,
    };
    try {
      await this.passkeys.insertOne(doc);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw new AppError(409, 'passkey_exists', 'This passkey is registered already');
      throw err;
    }
    return view(doc);
  }

  async rename(userId: string, id: string, name: string): Promise<PasskeyView> {
    const doc = await this.passkeys.findOne({ _id: id, userId });
    if (!doc) throw new AppError(404, 'not_found', 'No passkey of yours has this id');
    await this.passkeys.updateOne({ _id: id, userId }, { $set: { name } });
    return view({ ...doc, name });
  }

  async remove(userId: string, id: string): Promise<void> {
    if (!(await this.passkeys.deleteOne({ _id: id, userId }))) throw new AppError(404, 'not_found', 'No passkey of yours has this id');
  }

  async removeAll(userId: string): Promise<void> {
    await this.passkeys.deleteMany({ userId });
  }

  /** `POST /auth/login/passkey/options`: request options for any discoverable passkey; the challenge is bound to this browser. */
  async loginOptions(c: Context) {
    const options = await (await webauthn()).generateAuthenticationOptions({ rpID: this.rp.rpID, userVerification: 'preferred', allowCredentials: [] });
    const binding = randomBytes(32).toString('base64url');
    await this.store.set(this.key('login', binding), options.challenge, { ttl: CHALLENGE_TTL });
    this.cookies.set(c, PASSKEY_LOGIN_COOKIE, binding, CHALLENGE_TTL, 'Strict');
    return options;
  }

  /**
   * `POST /auth/login/passkey` (and a passkey reauthentication): whose passkey signed this browser's
   * challenge (used up, also on failure), and whether the authenticator verified the user (UV: a PIN
   * or biometrics; only then is the passkey a second factor, CONTRACT 11). Refused (401
   * `invalid_passkey`): no or used challenge, unknown credential, wrong origin or RP id, a bad
   * signature, a counter that went back (a cloned authenticator).
   */
  async authenticate(c: Context, response: AuthenticationResponseJSON): Promise<{ userId: string; passkeyId: string; userVerified: boolean }> {
    const binding = this.cookies.read(c, PASSKEY_LOGIN_COOKIE);
    this.cookies.clear(c, PASSKEY_LOGIN_COOKIE);
    const challenge = binding ? await this.store.getDel(this.key('login', binding)) : null;
    if (!challenge) throw refused('no login is pending in this browser (ask for options first; they last 5 minutes and work once)');
    const doc = await this.passkeys.findOne({ credentialId: response.id });
    if (!doc) throw refused('this passkey is not registered');
    let result;
    try {
      result = await (await webauthn()).verifyAuthenticationResponse({
        response,
        expectedChallenge: challenge,
        expectedOrigin: this.rp.origins,
        expectedRPID: this.rp.rpID,
        credential: { id: doc.credentialId, publicKey: new Uint8Array(Buffer.from(doc.publicKey, 'base64url')), counter: doc.counter, transports: doc.transports as never },
        // Not required here: a passkey without user verification is still one factor; the caller
        // reads `userVerified` to decide whether it is also the second (CONTRACT 11).
        requireUserVerification: false,
      });
    } catch (err) {
      throw refused((err as Error).message);
    }
    if (!result.verified) throw refused('the signature did not verify');
    const { newCounter, credentialBackedUp, userVerified } = result.authenticationInfo;
    const used = await this.passkeys.updateOne({ _id: doc._id }, { $set: { counter: newCounter, backedUp: credentialBackedUp, lastUsedAt: new Date().toISOString() } });
    if (!used) throw refused('this passkey was removed');
    return { userId: doc.userId, passkeyId: doc._id, userVerified };
  }
}
