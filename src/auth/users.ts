import { randomUUID } from 'node:crypto';
import type { Collection, Database } from '../db/index.ts';
import { AppError, notFound } from '../http/errors.ts';
import { dummyHash, hashPassword, needsRehash, verifyPassword } from './passwords.ts';

export const USER_COLLECTION = 'svc__core-user';
export const TAG_COLLECTION = 'svc__core-tag';
export const ADMIN_TAG = 'ADMIN';

export interface OAuthAccount {
  provider: string;
  providerAccountId: string;
}

/** A user document in `svc__core-user`. Tags hold tag ids; a tag's id is its name (`ADMIN`). */
export interface UserDoc {
  _id: string;
  email: string;
  firstname: string;
  lastname: string;
  email_verified: boolean;
  passwordHash?: string;
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
  firstname?: string;
  lastname?: string;
  isAdmin?: boolean;
  email_verified?: boolean;
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

  async update(id: string, patch: UserPatch): Promise<UserDoc> {
    const $set: Record<string, unknown> = { updatedAt: new Date().toISOString() };
    if (patch.firstname !== undefined) $set.firstname = patch.firstname;
    if (patch.lastname !== undefined) $set.lastname = patch.lastname;
    if (patch.password !== undefined) $set.passwordHash = await hashPassword(patch.password);
    const update = {
      $set,
      ...(patch.isAdmin === true ? { $addToSet: { tags: ADMIN_TAG } } : {}),
      ...(patch.isAdmin === false ? { $pull: { tags: ADMIN_TAG } } : {}),
    };
    const user = await this.users.updateOne({ _id: id }, update);
    if (!user) throw notFound('No user with this id');
    return user;
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
      await this.users.updateOne({ _id: user._id }, { $set: { passwordHash: await hashPassword(password) } });
    }
    return user;
  }
}
