import { randomUUID } from 'node:crypto';
import type { Collection, Database, Update } from '../db/index.ts';
import { AppError, notFound } from '../http/errors.ts';
import { dummyHash, hashPassword, needsRehash, verifyPassword } from './passwords.ts';

export const USER_COLLECTION = 'svc__core-user';
export const TAG_COLLECTION = 'svc__core-tag';
export const ADMIN_TAG = 'ADMIN';

export interface OAuthAccount {
  provider: string;
  providerAccountId: string;
}

/**
 * Who made a user: an admin, the CLI and the bootstrap vouch for the email; an OAuth login may not;
 * a sign-up (CONTRACT 12) never does: anyone can sign up with any address.
 */
export type CreatedVia = 'admin' | 'cli' | 'bootstrap' | 'oauth' | 'signup';

/**
 * A user's second factor, in the user document (`totp`). Secrets are sealed with
 * `SVC_SECRET_ENCRYPTION_KEY` like OAuth client secrets. Recovery codes are kept as HMAC-SHA256
 * keyed with the user's own TOTP secret (`h1:` prefix): a database dump without the encryption key
 * cannot test guesses of their ~50 bits offline, and without the key the secret itself is exposed,
 * which gives away more than the codes. Bare SHA-256 hex values of older versions still work once.
 */
export interface TotpState {
  /** The confirmed secret (sealed): TOTP is on. */
  secret?: string;
  /** An enrolment awaiting its first code (sealed); enrolling again replaces it. */
  pending?: string;
  /** The last time step accepted: a code is good once (replays within its window are refused). */
  lastStep?: number;
  /** Keyed hashes of the unused recovery codes. */
  recoveryCodes?: string[];
}

/** A user document in `svc__core-user`. Tags hold tag ids; a tag's id is its name (`ADMIN`). */
export interface UserDoc {
  _id: string;
  email: string;
  firstname: string;
  lastname: string;
  email_verified: boolean;
  /** Absent on users made before 0.2.1: see `ownsEmail`. */
  createdVia?: CreatedVia;
  /**
   * A sign-up not verified yet: SHA-256 of the `svc_signup` cookie of the browser that made it. A
   * verification from that browser keeps the sign-up's password; from any other it is a claim (CONTRACT 12).
   */
  signupBinding?: string;
  /** `POST /auth/not-me` (CONTRACT 14): the password logs in no more until a reset. */
  passwordResetRequired?: boolean;
  passwordHash?: string;
  /**
   * The credentials epoch (DESIGN "Every way in has one lifecycle"): every lifecycle event (claim,
   * password change or reset, TOTP on/off, a passkey or identity removed, logout-all, demotion,
   * deletion) moves it, and every half-finished record (a second step, a pending link, a link flow,
   * a passkey challenge) carries the value it started with: an old epoch is dead. Absent: 0.
   */
  epoch?: number;
  /** Second factor (never in responses). */
  totp?: TotpState;
  tags: string[];
  oauthAccounts: OAuthAccount[];
  lastLoginAt: string | null;
  /** `settings.<integration>`: written by plugins only, never by core. */
  settings: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

export interface TagDoc {
  _id: string;
  label: string;
}

/** The user as responses show it (CONTRACT section 3, `expand=user`): never the password hash. */
export interface PublicUser {
  id: string;
  email: string;
  firstname: string;
  lastname: string;
  email_verified: boolean;
  isAdmin: boolean;
  oauthAccounts: OAuthAccount[];
  lastLoginAt: string | null;
  settings: Record<string, unknown>;
}

export const isAdmin = (user: UserDoc) => user.tags.includes(ADMIN_TAG);

/** The ways in kept in the user document itself, removed by a claim (`Auth.claim`). */
export const WAYS_IN_IN_DOC = { passwordHash: true, totp: true } as const;

/** The user's credentials epoch (`UserDoc.epoch`). */
export const epochOf = (user: Pick<UserDoc, 'epoch'>) => user.epoch ?? 0;

/**
 * A write that held only while nothing else changed the account's ways in (its epoch moved since the
 * credential was checked: a reset, a logout everywhere, TOTP turned off elsewhere). Doing it anyway
 * would undo that change: a password change racing a reset kept the old password's owner in.
 */
const accountChanged = () => new AppError(409, 'account_changed', 'Your account changed meanwhile (a password reset, a logout everywhere, a second factor turned off); nothing was changed: try again');

/** A filter matching the user only while its epoch is still `epoch` (absent counts as 0). */
export const atEpoch = (id: string, epoch: number) => (epoch === 0 ? { _id: id, epoch: { $exists: false } } : { _id: id, epoch });

/**
 * Whether the account is known to belong to the owner of its email (CONTRACT section 5, linking):
 * a provider or a mailed link verified the email, or an admin, the CLI or the bootstrap made the user
 * (someone vouched). A self-signed-up user owns its email only once it is verified.
 * A user made from an unverified provider email does not own it, so no verified identity is ever
 * linked to it automatically. Users made before `createdVia` existed: only OAuth made users
 * without a password, so a password means an admin, the CLI or the bootstrap made it.
 */
export function ownsEmail(user: UserDoc): boolean {
  if (user.email_verified) return true;
  return user.createdVia ? user.createdVia !== 'oauth' && user.createdVia !== 'signup' : user.passwordHash !== undefined;
}

export function toPublicUser(user: UserDoc): PublicUser {
  return {
    id: user._id,
    email: user.email,
    firstname: user.firstname,
    lastname: user.lastname,
    email_verified: user.email_verified,
    isAdmin: isAdmin(user),
    oauthAccounts: user.oauthAccounts.map(({ provider, providerAccountId }) => ({ provider, providerAccountId })),
    lastLoginAt: user.lastLoginAt,
    settings: user.settings,
  };
}

/** Emails are compared and stored case-insensitively. */
export const normalizeEmail = (email: string) => email.trim().toLowerCase();

export interface NewUser {
  email: string;
  password?: string;
  signupBinding?: string;
  firstname?: string;
  lastname?: string;
  isAdmin?: boolean;
  email_verified?: boolean;
  createdVia: CreatedVia;
}

export interface UserPatch {
  firstname?: string;
  lastname?: string;
  password?: string;
  isAdmin?: boolean;
}

/** Users and tags in the document database. Session side effects live in the auth API. */
export class UserService {
  private constructor(
    readonly users: Collection<UserDoc>,
    readonly tags: Collection<TagDoc>,
  ) {}

  static async open(db: Database): Promise<UserService> {
    const users = await db.collection<UserDoc>(USER_COLLECTION, [{ fields: ['email'] }]);
    const tags = await db.collection<TagDoc>(TAG_COLLECTION);
    await tags.upsert({ _id: ADMIN_TAG, label: 'Administrator' });
    return new UserService(users, tags);
  }

  async create(input: NewUser): Promise<UserDoc> {
    const now = new Date().toISOString();
    const user: UserDoc = {
      _id: randomUUID(),
      email: normalizeEmail(input.email),
      firstname: input.firstname ?? '',
      lastname: input.lastname ?? '',
      email_verified: input.email_verified ?? false,
      createdVia: input.createdVia,
      ...(input.signupBinding ? { signupBinding: input.signupBinding } : {}),
      ...(input.password ? { passwordHash: await hashPassword(input.password) } : {}),
      tags: input.isAdmin ? [ADMIN_TAG] : [],
      oauthAccounts: [],
      lastLoginAt: null,
      settings: {},
      createdAt: now,
      updatedAt: now,
    };
    try {
      return await this.users.insertOne(user);
    } catch (err) {
      if ((err as AppError).code === 'already_exists') throw new AppError(409, 'user_exists', 'A user with this email already exists');
      throw err;
    }
  }

  findById(id: string) {
    return this.users.findOne({ _id: id });
  }

  findByEmail(email: string) {
    return this.users.findOne({ email: normalizeEmail(email) });
  }

  async get(id: string): Promise<UserDoc> {
    const user = await this.findById(id);
    if (!user) throw notFound('No user with this id');
    return user;
  }

  async list(opts: { offset: number; limit: number; email?: string }): Promise<{ items: UserDoc[]; total: number }> {
    const filter = opts.email ? { email: normalizeEmail(opts.email) } : {};
    const [items, total] = await Promise.all([
      this.users.find(filter, { sort: { createdAt: 1, _id: 1 }, skip: opts.offset, limit: opts.limit }),
      this.users.count(filter),
    ]);
    return { items, total };
  }

  /** `epoch`: write only while the account is at this epoch (else 409 `account_changed`). */
  async update(id: string, patch: UserPatch, epoch?: number): Promise<UserDoc> {
    const $set: Record<string, unknown> = { updatedAt: new Date().toISOString() };
    if (patch.firstname !== undefined) $set.firstname = patch.firstname;
    if (patch.lastname !== undefined) $set.lastname = patch.lastname;
    if (patch.password !== undefined) $set.passwordHash = await hashPassword(patch.password);
    const update = {
      $set,
      // A new password set by its owner or an admin is a reset: a not-me lock (CONTRACT 14) ends with it.
      ...(patch.password !== undefined ? { $inc: { epoch: 1 }, $unset: { passwordResetRequired: true as const } } : {}),
      ...(patch.isAdmin === true ? { $addToSet: { tags: ADMIN_TAG } } : {}),
      ...(patch.isAdmin === false ? { $pull: { tags: ADMIN_TAG } } : {}),
    };
    return (await this.users.updateOne(epoch === undefined ? { _id: id } : atEpoch(id, epoch), update)) ?? this.missed(id, epoch);
  }

  /** Why a write by id (at `epoch`, if given) matched nothing: 409 `account_changed` or 404. */
  private async missed(id: string, epoch: number | undefined): Promise<never> {
    throw epoch !== undefined && (await this.users.findOne({ _id: id })) ? accountChanged() : notFound('No user with this id');
  }

  /**
   * A lifecycle event: moves the credentials epoch, together with `update` in the same atomic write,
   * so every pending record started before it dies. Returns the user after it; 404 when gone.
   * `epoch`: only while the account is still at it (a change checked against it), else 409 `account_changed`.
   */
  async advanceEpoch(id: string, update: Omit<Update, '$inc'> = {}, epoch?: number): Promise<UserDoc> {
    const filter = epoch === undefined ? { _id: id } : atEpoch(id, epoch);
    return (await this.users.updateOne(filter, { ...update, $inc: { epoch: 1 }, $set: { ...update.$set, updatedAt: new Date().toISOString() } })) ?? this.missed(id, epoch);
  }

  async delete(id: string): Promise<boolean> {
    return this.users.deleteOne({ _id: id });
  }

  async countAdmins(): Promise<number> {
    return this.users.count({ tags: ADMIN_TAG });
  }

  /**
   * The user whose email and password match, else null. An unknown email or an account without a
   * password verifies against a dummy hash, so every failure costs one argon2 verification.
   */
  async checkPassword(email: string, password: string): Promise<UserDoc | null> {
    const user = await this.findByEmail(email);
    if (!user?.passwordHash) {
      await verifyPassword(await dummyHash(), password);
      return null;
    }
    if (!(await verifyPassword(user.passwordHash, password))) return null;
    if (needsRehash(user.passwordHash)) {
      return (await this.users.updateOne({ _id: user._id, passwordHash: user.passwordHash }, { $set: { passwordHash: await hashPassword(password) } })) ?? user;
    }
    return user;
  }

  /**
   * Removes the `ADMIN` tag unless that would leave no administrator (409 `last_admin`). Lock-free
   * and safe across instances: demote, recount, and restore when none is left. Two simultaneous
   * demotions of the last two admins can both be restored (both refused), never both kept.
   */
  async demote(id: string): Promise<UserDoc> {
    const user = await this.users.updateOne({ _id: id }, { $pull: { tags: ADMIN_TAG }, $inc: { epoch: 1 }, $set: { updatedAt: new Date().toISOString() } });
    if (!user) throw notFound('No user with this id');
    if ((await this.countAdmins()) === 0) {
      await this.users.updateOne({ _id: id }, { $addToSet: { tags: ADMIN_TAG } });
      throw new AppError(409, 'last_admin', 'This is the last administrator; make another user an administrator first');
    }
    return user;
  }
}
