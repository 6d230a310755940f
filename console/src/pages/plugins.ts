// The pages of the bundled plugins, when the app has them on: the cache list (docs/cache-list.md) and the
// CLI connector's jobs (docs/cli-connector.md). Which are on: the routes /openapi.json lists.

import { page } from '../ui.ts';

export interface PluginsOn {
  cacheList: boolean;
  cliConnector: boolean;
}

export const CACHE_LIST = '/svc__cache';
export const CLI_CONNECTOR = '/plugin/svc/plugin-cli-connector';

/** Which of the two plugins this svc mounts (a failure to read the document: neither). */
export async function pluginsOn(apiBase: string): Promise<PluginsOn> {
  try {
    const res = await fetch(`${apiBase}/openapi.json`, { credentials: 'include' });
    const paths = Object.keys(((await res.json()) as { paths?: Record<string, unknown> }).paths ?? {});
    return { cacheList: paths.some((p) => p.startsWith(`${CACHE_LIST}/`)), cliConnector: paths.some((p) => p.startsWith(`${CLI_CONNECTOR}/`)) };
  } catch {
    return { cacheList: false, cliConnector: false };
  }
}

export function pluginPages(on: PluginsOn): { path: string; title: string; show: (params: string[]) => void | Promise<void> }[] {
  return [
    ...(on.cacheList ? [{ path: 'cache', title: 'Cache', show: () => page('Cache') }] : []),
    ...(on.cliConnector ? [{ path: 'cli-jobs', title: 'CLI jobs', show: () => page('CLI jobs') }] : []),
  ];
}
