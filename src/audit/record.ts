import { random16, uuidText } from '../uuid.ts';

/**
 * Every audit record type (CONTRACT section 13), in one place: a type not listed here cannot be
 * written, and webhook subscriptions are checked against this list.
 */
export const AUDIT_TYPES = [
  'login.succeeded',
  'login.failed',
  'logout',
  'session.revoked',
  'reauthenticated',
  'password.changed',
  'password.reset',
  'totp.enabled',
  'totp.disabled',
  'recovery_code.used',
  'passkey.added',
  'passkey.removed',
  'oauth.linked',
  'oauth.unlinked',
  'email.verified',
  'user.created',
  'user.updated',
  'user.deleted',
  'provider.created',
  'provider.updated',
  'provider.deleted',
  'work_session.created',
  'work_session.updated',
  'work_session.deleted',
  'api_key.created',
  'api_key.revoked',
  'device.approved',
  'device.denied',
  'webhook.created',
  'webhook.updated',
  'webhook.deleted',
] as const;

export type AuditType = (typeof AUDIT_TYPES)[number];

/** Who did it: a user on their own account, an admin on someone's, a key, svc itself, nobody known. */
export interface AuditActor {
  type: 'user' | 'admin' | 'api_key' | 'system' | 'anonymous';
  id?: string;
}

/** The record as the API and webhooks show it (CONTRACT section 13). */
export interface AuditRecord {
  id: string;
  type: AuditType;
  /** ISO 8601, UTC, milliseconds. */
  at: string;
  actor: AuditActor;
  subject: { userId?: string; email?: string };
  /** The public session id (`GET /auth/sessions`), never the cookie value or the store hash. */
  sessionId?: string;
  ip?: string;
  device?: string;
  details: Record<string, unknown>;
}

/** Why sessions ended, for `session.revoked` (CONTRACT section 13). */
export type RevokeReason = 'logout_all' | 'session_deleted' | 'password_changed' | 'password_reset' | 'admin' | 'user_deleted' | 'not_me' | 'claim';

/** Why a login failed (`login.failed` `details.reason`). */
export type LoginFailure = 'invalid_credentials' | 'invalid_code' | 'invalid_passkey' | 'too_many_attempts' | 'email_not_verified';

/** Whether `pattern` (a type, or a prefix ending in `.*`) names at least one known type. */
export function knownTypePattern(pattern: string): boolean {
  return pattern.endsWith('.*') ? AUDIT_TYPES.some((t) => t.startsWith(pattern.slice(0, -1))) : (AUDIT_TYPES as readonly string[]).includes(pattern);
}

/** Whether `type` matches `pattern` (`login.*` matches `login.failed`; `*` is not a pattern). */
export function matchesType(type: string, pattern: string): boolean {
  return pattern.endsWith('.*') ? type.startsWith(pattern.slice(0, -1)) : type === pattern;
}

let lastMs = 0;
let sequence = 0;

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 12-bit sequence that counts up within one
 * millisecond of this process (method 1 of section 6.2), then 62 random bits. Ids made here sort in
 * the order they were made, so `_id` is both the key and the time order the API pages by.
 */
export function uuidv7(now = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    sequence = random16().readUInt16BE() & 0x1ff; // room to count up before the 12 bits run out
  } else if (++sequence > 0xfff) {
    lastMs += 1; // more than 3,584 ids in one millisecond: borrow the next one, order is kept
    sequence = 0;
  }
  const bytes = random16();
  bytes.writeUIntBE(lastMs, 0, 6);
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  return uuidText(bytes);
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
