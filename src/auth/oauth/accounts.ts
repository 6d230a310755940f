import { randomUUID } from 'node:crypto';
import type { Collection, Database } from '../../db/index.ts';
import { DuplicateKeyError } from '../../db/index.ts';
import type { UserDoc, UserService } from '../users.ts';

export const ACCOUNT_COLLECTION = 'svc__core-oauthaccount';

/**
 * Which user an OAuth account belongs to. A plain compound unique index on (provider,
 * providerAccountId) makes "one account, one user" hold on every backend; the user's
 * `oauthAccounts` array mirrors it for reading.
 */
interface AccountLink {
  _id: string;
  provider: string;
  providerAccountId: string;
  userId: string;
  /** The identity's email when it was linked (providers without one: absent). */
  email?: string | null;
  createdAt: string;
}

/** A connected account as its owner sees it (`GET /auth/account/providers`). */
export interface ConnectedAccount {
  provider: string;
  providerAccountId: string;
  email: string | null;
  linkedAt: string;
}

export class AccountLinks {
  private constructor(
    private readonly links: Collection<AccountLink>,
    private readonly users: UserService,
  ) {}

  static async open(db: Database, users: UserService): Promise<AccountLinks> {
    return new AccountLinks(await db.collection<AccountLink>(ACCOUNT_COLLECTION, [{ fields: ['provider', 'providerAccountId'] }]), users);
  }

  /** The user holding this account; a link to a deleted user is dropped. */
  async findUser(provider: string, providerAccountId: string): Promise<UserDoc | null> {
    const link = await this.links.findOne({ provider, providerAccountId });
    if (!link) return null;
    const user = await this.users.findById(link.userId);
    if (!user) await this.links.deleteOne({ _id: link._id });
    return user;
  }

  /**
   * Links the account to the user. Throws DuplicateKeyError when it already belongs to someone
   * (a concurrent login may have linked it first).
   */
  async link(userId: string, provider: string, providerAccountId: string, email: string | null = null): Promise<void> {
    await this.links.insertOne({ _id: randomUUID(), provider, providerAccountId, userId, email, createdAt: new Date().toISOString() });
    await this.users.users.updateOne({ _id: userId }, { $addToSet: { oauthAccounts: { provider, providerAccountId } } });
  }

  /** Idempotent for the same user: true when the account is (now) this user's. */
  async linkIfFree(userId: string, provider: string, providerAccountId: string, email: string | null = null): Promise<boolean> {
    try {
      await this.link(userId, provider, providerAccountId, email);
      return true;
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      const owner = await this.links.findOne({ provider, providerAccountId });
      return owner?.userId === userId;
    }
  }

  async unlinkAll(userId: string): Promise<void> {
    await this.links.deleteMany({ userId });
  }

  async listFor(userId: string): Promise<ConnectedAccount[]> {
    const links = await this.links.find({ userId }, { sort: { createdAt: 1, _id: 1 } });
    return links.map((l) => ({ provider: l.provider, providerAccountId: l.providerAccountId, email: l.email ?? null, linkedAt: l.createdAt }));
  }

  /** Removes one identity of a user (the mirror on the user first: a login checks it). False when unknown. */
  async unlink(userId: string, provider: string, providerAccountId: string): Promise<boolean> {
    await this.users.users.updateOne({ _id: userId }, { $pull: { oauthAccounts: { provider, providerAccountId } } });
    return this.links.deleteOne({ userId, provider, providerAccountId });
  }
}
