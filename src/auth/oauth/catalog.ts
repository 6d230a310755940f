// TEMPORARY STUB: being replaced by the full catalog (another engineer is writing this file).
import type { CatalogEntry } from './catalog-types.ts';

export const catalog: CatalogEntry[] = [];

export function discoverArcticProviders(mod: Record<string, unknown>): string[] {
  return Object.entries(mod)
    .filter(([name, value]) => name !== 'OAuth2Client' && typeof value === 'function' && 'createAuthorizationURL' in (value as { prototype: object }).prototype)
    .map(([name]) => name);
}

export function catalogEntry(id: string): CatalogEntry | undefined {
  return catalog.find((e) => e.id === id);
}
