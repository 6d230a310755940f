import * as v from 'valibot';
import { emailSchema, NAME_MAX_LENGTH } from '../../http/schemas.ts';

/** What the flow needs of a provider's user: SPEC.md "Userinfo mapping", normalized. */
export interface Profile {
  /** Stable per user: `providerAccountId`. */
  id?: string;
  email?: string;
  emailVerified: boolean;
  name?: string;
  /** OpenID Connect's own split of the name (`given_name`, `family_name`), when the provider gives it. */
  givenName?: string;
  familyName?: string;
  avatarUrl?: string;
}

const first = (json: Record<string, unknown>, keys: string[]): unknown => {
  for (const key of keys) {
    const value = json[key];
    if (value !== undefined && value !== null && value !== '') return value;
  }
  return undefined;
};

const text = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;

/** Truthy, with the strings providers use for booleans (`"true"`) read as such. */
const truthy = (value: unknown): boolean => value === true || value === 'true' || value === 1;

/**
 * The generic userinfo mapping of SPEC.md: first match wins per row. `email`|`mail`,
 * `email_verified`|`verified_email`|`verified`, `id`|`sub`|`user_id`, `name`|`display_name`|`displayName`,
 * `avatar_url`|`picture`|`avatar`. Without a name, OpenID Connect's `given_name` and `family_name` make one.
 */
export function mapUserInfo(json: Record<string, unknown>): Profile {
  const [givenName, familyName] = [text(json.given_name), text(json.family_name)];
  return {
    id: text(first(json, ['id', 'sub', 'user_id'])),
    email: text(first(json, ['email', 'mail'])),
    emailVerified: truthy(first(json, ['email_verified', 'verified_email', 'verified'])),
    name: text(first(json, ['name', 'display_name', 'displayName'])) ?? ([givenName, familyName].filter(Boolean).join(' ') || undefined),
    givenName,
    familyName,
    avatarUrl: text(first(json, ['avatar_url', 'picture', 'avatar'])),
  };
}

/**
 * First and last name of a new user: the provider's own split when it gives one ("Mary Ann" + "Evans"),
 * else the name split after its first word.
 */
export function personName(profile: Profile): { firstname: string; lastname: string } {
  if (profile.givenName || profile.familyName) return { firstname: profile.givenName ?? '', lastname: profile.familyName ?? '' };
  return splitName(profile.name);
}

/** "Ada King Lovelace" -> firstname "Ada", lastname "King Lovelace". */
export function splitName(name: string | undefined): { firstname: string; lastname: string } {
  const parts = (name ?? '').trim().split(/\s+/).filter(Boolean);
  return { firstname: parts[0] ?? '', lastname: parts.slice(1).join(' ') };
}

/** Longest provider account id kept (ids are numbers, UUIDs or URLs; more is not an id). */
export const MAX_ACCOUNT_ID_LENGTH = 256;

/** A provider's name as one line of text: no control or direction-override characters, at most 100 characters. */
function cleanName(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const line = name.replace(/[\p{Cc}\u202a-\u202e\u2066-\u2069]/gu, ' ').replace(/\s+/g, ' ').trim();
  return [...line].slice(0, NAME_MAX_LENGTH).join('').trim() || undefined;
}

/**
 * What a provider says, held to the rules svc's own inputs follow (the provider's answer is input
 * too): an email as `emailSchema` takes it (one mailbox, one line, at most 254 characters; else
 * none: `no_email` where one is needed), names as one line of at most 100 characters, an avatar only
 * as an http(s) URL. An account id over 256 characters is refused (null). A CRLF in a provider's
 * email once made a user whose address was a mail's To with a second line.
 */
export function cleanProfile(profile: Profile): Profile | null {
  if (profile.id !== undefined && profile.id.length > MAX_ACCOUNT_ID_LENGTH) return null;
  const email = profile.email === undefined ? undefined : v.safeParse(emailSchema, profile.email);
  const avatar = profile.avatarUrl && profile.avatarUrl.length <= 2048 && /^https?:\/\//i.test(profile.avatarUrl) ? profile.avatarUrl : undefined;
  const cleaned: Profile = { emailVerified: profile.emailVerified };
  if (profile.id !== undefined) cleaned.id = profile.id;
  if (email?.success) cleaned.email = email.output;
  for (const key of ['name', 'givenName', 'familyName'] as const) {
    const value = cleanName(profile[key]);
    if (value !== undefined) cleaned[key] = value;
  }
  if (avatar) cleaned.avatarUrl = avatar;
  return cleaned;
}
