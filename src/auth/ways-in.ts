import type { RegistrationResponseJSON } from '@simplewebauthn/server';
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/load.ts';
import { AppError } from '../http/errors.ts';
import type { Store } from '../store/store.ts';
import type { AccountLinks } from './oauth/accounts.ts';
import type { PasskeyService, PasskeyView } from './passkeys.ts';
import { epochOf, type UserDoc, type UserService } from './users.ts';

/**
 * A user's ways in (CONTRACT 10, 11): disconnecting an identity and removing a passkey never take the
 * last one (409 `last_login_method`), and each is a lifecycle event (the credentials epoch moves);
 * adding a passkey leaves none behind when the account changed meanwhile.
 */
export class WaysIn {
  constructor(
    private readonly config: Config,
    private readonly store: Store,
    private readonly users: UserService,
    private readonly passkeys: PasskeyService,
    private readonly accounts: AccountLinks,
  ) {}

  /**
   * Runs `change` while no other change of the user's ways in runs, on any instance (a store lock,
   * `SET NX` with a 10 s expiry): "is this the last way in?" and the removal are one step, so two
   * parallel removals cannot each leave the other as the last way in and then both go.
   */
  private async withLock<T>(userId: string, change: () => Promise<T>): Promise<T> {
    const key = `${this.config.auth.store.keyPrefix}ways-in-lock:${userId}`;
    const token = randomBytes(16).toString('base64url');
    for (let attempt = 0; !(await this.store.set(key, token, { nx: true, ttl: 10 })); attempt++) {
      if (attempt >= 100) throw new AppError(503, 'unavailable', 'Another change of this account is under way; try again');
      await new Promise((r) => setTimeout(r, 20));
    }
    try {
      return await change();
    } finally {
      // Only our own lock: one that expired under a slow change may be another instance's by now.
      await this.store.delIfValue(key, token).catch(() => {});
    }
  }

  /** Whether the user has a way in besides the one `without` names. */
  private async hasOtherWayIn(user: UserDoc, without: { identity?: boolean; passkey?: boolean }): Promise<boolean> {
    if (user.passwordHash) return true;
    if (user.oauthAccounts.length > (without.identity ? 1 : 0)) return true;
    return (await this.passkeys.count(user._id)) > (without.passkey ? 1 : 0);
  }

  /**
   * Disconnects one identity of a user (CONTRACT 10): 404 when it is not theirs, 409
   * `last_login_method` when nothing else would log them in (no password, no other identity, no
   * passkey). A lifecycle event: the epoch moves.
   */
  async disconnect(userId: string, provider: string, providerAccountId: string): Promise<void> {
    await this.withLock(userId, async () => {
      const user = await this.users.get(userId);
      const mine = user.oauthAccounts.some((a) => a.provider === provider && a.providerAccountId === providerAccountId);
      if (!mine) throw new AppError(404, 'not_found', 'No connected account of yours matches');
      if (!(await this.hasOtherWayIn(user, { identity: true }))) {
        throw new AppError(409, 'last_login_method', 'This is your only way to log in: set a password, add a passkey or connect another account first');
      }
      if (!(await this.accounts.unlink(userId, provider, providerAccountId))) throw new AppError(404, 'not_found', 'No connected account of yours matches');
      await this.users.advanceEpoch(userId);
    });
  }

  /** Removes one passkey of a user: 404 when it is not theirs, 409 `last_login_method`. A lifecycle event. */
  async removePasskey(userId: string, id: string): Promise<void> {
    await this.withLock(userId, async () => {
      const user = await this.users.get(userId);
      const mine = (await this.passkeys.list(userId)).some((p) => p.id === id);
      if (mine && !(await this.hasOtherWayIn(user, { passkey: true }))) {
        throw new AppError(409, 'last_login_method', 'This passkey is your only way to log in: set a password or add another passkey first');
      }
      await this.passkeys.remove(userId, id);
      await this.users.advanceEpoch(userId);
    });
  }

  /**
   * Saves a passkey from the browser's response to this session's options. A lifecycle event that
   * came after the options (or while saving: a claim) leaves no passkey behind: the options carry
   * the epoch, and the user is read again after the write (see `login` for the order).
   */
  async addPasskey(userId: string, sessionHash: string, response: RegistrationResponseJSON, name: string | undefined): Promise<PasskeyView> {
    const user = await this.users.get(userId);
    const created = await this.passkeys.register(user, sessionHash, response, name);
    const fresh = await this.users.findById(userId);
    if (!fresh || epochOf(fresh) !== epochOf(user)) {
      await this.passkeys.remove(userId, created.id).catch(() => {});
      throw new AppError(400, 'invalid_passkey', 'The account changed while the passkey was saved: start again');
    }
    return created;
  }
}
