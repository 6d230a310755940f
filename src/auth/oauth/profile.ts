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
