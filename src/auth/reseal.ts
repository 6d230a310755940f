/**
 * Start-up, with `SVC_SECRET_ENCRYPTION_KEY` set: every secret at rest in the database is brought to
 * the current seal (issue 39, finding 9): OAuth client secrets and TOTP secrets saved in plaintext
 * (before the key was set) or sealed without their record id are sealed again with it, each with a
 * log line. After this, a plaintext value where a key is set is refused, never used
 * (`SecretBox.open`). Provider token blobs live in the store only as long as a session, so they are
 * not rewritten: one written before the key was set is refused when read.
 */
import type { Logger } from '../logger.ts';
import type { ProviderService } from './oauth/providers.ts';
import { BOUND_PREFIX, sealedRecord } from './oauth/secrets.ts';
import type { UserService } from './users.ts';

/**
 * A filter for `field` holding a string not sealed the current way: below `enc:v1:r.` or from
 * `enc:v1:r/` on (`/` follows `.`), a range both databases compare as strings, so the users whose
 * secrets are sealed already are never read.
 */
const LAST = `${BOUND_PREFIX.slice(0, -1)}/`;
const notBound = (field: string) => [{ [field]: { $lt: BOUND_PREFIX } }, { [field]: { $gte: LAST } }];

export async function resealSecretsAtRest(providers: ProviderService, users: UserService, logger: Logger): Promise<void> {
  const box = providers.secrets;
  if (!box.encrypts) return;
  for (const providerId of await providers.resealClientSecrets()) {
    logger.warn({ providerId }, 'an OAuth client secret was stored without the current seal: sealed again with SVC_SECRET_ENCRYPTION_KEY');
  }
  for (const user of await users.users.find({ $or: [...notBound('totp.secret'), ...notBound('totp.pending')] })) {
    for (const field of ['secret', 'pending'] as const) {
      const stored = user.totp?.[field];
      if (!stored || !box.needsResealing(stored)) continue;
      // Only if unchanged meanwhile (another instance starting, an enrolment): never over a newer value.
      const path = `totp.${field}`;
      await users.users.updateOne({ _id: user._id, [path]: stored }, { $set: { [path]: box.reseal(stored, sealedRecord.totp(user._id)) } });
      logger.warn({ userId: user._id, field: path }, 'a TOTP secret was stored without the current seal: sealed again with SVC_SECRET_ENCRYPTION_KEY');
    }
  }
}
