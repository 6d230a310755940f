import { randomBytes } from 'node:crypto';
import type { Config } from '../config/load.ts';
import type { AuditLog } from '../audit/log.ts';
import type { Logger } from '../logger.ts';
import { hasCharacters, MIN_PASSWORD_LENGTH } from './passwords.ts';
import { ADMIN_TAG, type UserService } from './users.ts';

/**
 * Makes sure an instance can be administered (CONTRACT section 1). When no admin exists:
 * `SVC_ADMIN_EMAIL` + `SVC_ADMIN_PASSWORD` create one (or promote that existing user); without them,
 * on the embedded database, `admin@localhost` gets a random password printed once; on MongoDB a
 * warning says how to create one.
 */
export async function ensureAdmin(users: UserService, config: Config, dbKind: string, logger: Logger, audit?: AuditLog): Promise<void> {
  const created = (user: { _id: string; email: string }) => audit?.record(null, { type: 'user.created', actor: { type: 'system' }, subject: { userId: user._id, email: user.email }, details: { via: 'bootstrap' } });
  if ((await users.countAdmins()) > 0) return;
  const { adminEmail, adminPassword } = config.env;
  if (adminEmail && adminPassword) {
    if (!hasCharacters(adminPassword, MIN_PASSWORD_LENGTH)) throw new Error(`SVC_ADMIN_PASSWORD must be at least ${MIN_PASSWORD_LENGTH} characters`);
    let existing = await users.findByEmail(adminEmail);
    if (!existing) {
      try {
        await created(await users.create({ email: adminEmail, password: adminPassword, isAdmin: true, email_verified: true, createdVia: 'bootstrap' }));
        logger.info({ email: adminEmail }, 'bootstrap admin created from SVC_ADMIN_EMAIL');
        return;
      } catch (err) {
        // Instances started together on an empty database all get here; the unique email lets one create
        // the admin. The others go on (one start failed with "A user with this email already exists").
        if ((err as { code?: string }).code !== 'user_exists') throw err;
        if ((await users.countAdmins()) > 0) return;
        existing = await users.findByEmail(adminEmail);
        if (!existing) throw err;
      }
    }
    await users.users.updateOne({ _id: existing._id }, { $addToSet: { tags: ADMIN_TAG } });
    logger.warn({ email: existing.email }, 'no admin existed: the existing user named by SVC_ADMIN_EMAIL is now an admin (password unchanged)');
    return;
  }
  if (dbKind !== 'embedded') {
    logger.warn('no admin exists: set SVC_ADMIN_EMAIL and SVC_ADMIN_PASSWORD, or run `npx svc user create --email you@example.com --admin`');
    return;
  }
  const email = adminEmail ?? 'admin@localhost';
  const password = randomBytes(18).toString('base64url');
  await created(await users.create({ email, password, isAdmin: true, email_verified: true, createdVia: 'bootstrap' }));
  // Printed once, on purpose (CONTRACT section 1): the only way to learn it. Change it after login.
  const line = `bootstrap admin created: email ${email} password ${password} (shown once; change it with POST /auth/password once logged in)`;
  // A LOG_LEVEL above warn would swallow the one chance to learn it: then it goes to stderr as it is.
  if (logger.isLevelEnabled('warn')) logger.warn({ email }, line);
  else process.stderr.write(`svc: ${line}\n`);
}
