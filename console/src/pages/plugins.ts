// The pages of the bundled plugins, when the app has them on: the cache list (docs/cache-list.md) and the
// CLI connector's jobs (docs/cli-connector.md). Which are on: the routes /openapi.json lists. Their
// routes are the plugins' own, not @svc/client's (whose table holds svc's core routes only): `pluginCall`
// calls them the client's way (session cookie, JSON, one SvcError with the API's message).

import { SvcError } from '@svc/client';
import { apiBase } from '../ui.ts';
import { cachePage } from './cache.ts';
import { cliJobsPage } from './cli-jobs.ts';

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

/**
 * `GET` (or `POST` with `body`) of a plugin route: `path` under the API, `query` values left out when
 * undefined. Answers the JSON (a plugin's `{"data": ...}` wrapper taken off); an error answer throws an
 * SvcError carrying the API's code and message (CONTRACT 2), as @svc/client does.
 */
export async function pluginCall<T>(path: string, opts: { query?: Record<string, string | number | undefined>; body?: unknown } = {}): Promise<T> {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) search.set(k, String(v));
  const qs = search.toString() ? `?${search}` : ''; // not `search.size`: newer than the browsers the build targets
  let res: Response;
  try {
    res = await fetch(`${apiBase}${path}${qs}`, {
      method: opts.body === undefined ? 'GET' : 'POST',
      credentials: 'include',
      ...(opts.body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(opts.body) }),
    });
  } catch (cause) {
    throw new SvcError(0, 'network_error', `The service cannot be reached (${String(cause)})`);
  }
  const json = (await res.json().catch(() => undefined)) as { error?: { code?: string; message?: string; details?: { path: string; message: string }[] }; data?: unknown } | undefined;
  if (!res.ok) {
    const e = json?.error;
    throw new SvcError(res.status, e?.code ?? 'unexpected_response', e?.message ?? `HTTP ${res.status}`, e?.details ?? []);
  }
  if (json === undefined) throw new SvcError(res.status, 'unexpected_response', `HTTP ${res.status} from ${path} is not JSON`);
  return (json && typeof json === 'object' && !Array.isArray(json) && 'data' in json ? json.data : json) as T;
}

export function pluginPages(on: PluginsOn): { path: string; title: string; show: (params: string[]) => void | Promise<void> }[] {
  return [
    ...(on.cacheList ? [{ path: 'cache', title: 'Cache', show: cachePage }] : []),
    ...(on.cliConnector ? [{ path: 'cli-jobs', title: 'CLI jobs', show: cliJobsPage }] : []),
  ];
}

