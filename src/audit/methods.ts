/**
 * A login's `details.method` (CONTRACT 13) from the session's `provider`: svc's own ways in by name,
 * every other provider an OAuth provider id (`oauth:<providerId>`).
 */
const OWN: Record<string, string> = { password: 'password', passkey: 'passkey', email: 'magic_link', device: 'device' };

export function loginMethod(provider: string): string {
  return OWN[provider] ?? `oauth:${provider}`;
}
