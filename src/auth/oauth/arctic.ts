/**
 * arctic (the OAuth client library), loaded on first use: a login with a provider, or a provider check.
 * Its index loads all of its modules, a class per provider (143 in all, 1.1 MB of heap), which an
 * instance without OAuth providers never needs. Every path to a provider client awaits `loadArctic`
 * first (`providerClient`), so the code behind it reads the module synchronously with `arctic()`.
 */
type Arctic = typeof import('arctic');

let loaded: Arctic | undefined;

export async function loadArctic(): Promise<Arctic> {
  return (loaded ??= await import('arctic'));
}

/** The module, once `loadArctic` has resolved. */
export function arctic(): Arctic {
  if (!loaded) throw new Error('arctic is not loaded yet: await loadArctic() first');
  return loaded;
}
