// The cache list (svc__cache, CONTRACT 9, docs/cache-list.md): keys of a store instance and database by
// pattern, a page at a time, and one entry's value at `#/cache/<instance>/<db>/<key>`, as svc serves it
// (secrets redacted unless the service runs with HIDE_SECRETS=false; long values cut at 16 KiB).

import { field, form, h, href, page, showError, table } from '../ui.ts';
import { CACHE_LIST, pluginCall } from './plugins.ts';

interface EntrySummary {
  key: string;
  ttl: number;
  type: string;
}
interface EntriesPage {
  items: EntrySummary[];
  offset: number;
  limit: number;
  hasMore: boolean;
}
interface Entry extends EntrySummary {
  size: number;
  value: string;
  valueParsed?: unknown;
  truncated?: true;
}

const PAGE_SIZES = ['25', '50', '100', '200', '500'];

/** The search as it was last run: kept while the console is open, so "Back to the list" finds it. */
const search = { pattern: '', db: '0', instance: 'cache', limit: '50', offset: 0 };

/** `ttl` as a person reads it: seconds, or what -1 and -2 mean. */
function ttlOf(ttl: number): string {
  if (ttl === -1) return 'No expiry';
  if (ttl === -2) return 'Gone';
  if (ttl < 120) return `${ttl} s`;
  if (ttl < 7200) return `${Math.round(ttl / 60)} min`;
  if (ttl < 172_800) return `${Math.round(ttl / 3600)} h`;
  return `${Math.round(ttl / 86_400)} days`;
}

function select(label: string, name: string, options: string[], value: string): HTMLElement {
  const id = `cache-${name}`;
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    h('select', { id, name }, ...options.map((o) => h('option', { value: o, selected: o === value }, o))),
  );
}

export async function cachePage(params: string[] = []): Promise<void> {
  if (params.length >= 3) return entryPage(params[0]!, params[1]!, params.slice(2).join('/'));
  const instances = await pluginCall<{ id: string; label: string }[]>(`${CACHE_LIST}/cacheInstances`).catch(() => [{ id: 'cache', label: 'cache' }]);
  const results = h('div', { 'aria-live': 'polite' }, h('p', {}, 'Loading…'));

  async function load(): Promise<void> {
    results.setAttribute('aria-busy', 'true');
    try {
      const at = await pluginCall<EntriesPage>(`${CACHE_LIST}/cacheEntries`, { query: search });
      const go = (offset: number) => {
        search.offset = offset;
        load()
          .then(() => (results.querySelector<HTMLElement>('[role="region"]') ?? results).focus())
          .catch((e: unknown) => showError(e));
      };
      results.replaceChildren(
        table(
          `Keys matching ${search.pattern || 'anything'} in ${search.instance}, database ${search.db}`,
          ['Key', 'Type', 'Expires in'],
          at.items.map((e) => [h('a', { href: href('cache', search.instance, search.db, e.key) }, e.key), e.type, ttlOf(e.ttl)]),
          'No key matches.',
        ),
        h(
          'nav',
          { class: 'actions', 'aria-label': 'Key pages' },
          at.items.length ? h('span', {}, `${at.offset + 1}–${at.offset + at.items.length}`) : null,
          at.offset > 0 ? h('button', { type: 'button', class: 'secondary', onclick: () => go(Math.max(0, at.offset - at.limit)) }, 'Previous') : null,
          at.hasMore ? h('button', { type: 'button', class: 'secondary', onclick: () => go(at.offset + at.limit) }, 'Next') : null,
        ),
      );
    } catch (e) {
      results.replaceChildren(h('p', { class: 'empty' }, 'The keys could not be read.'));
      throw e;
    } finally {
      results.removeAttribute('aria-busy');
    }
  }

  const filters = form(
    {
      label: 'Search keys',
      submit: 'Search',
      action: async ({ pattern = '', db = '0', instance = 'cache', limit = '50' }) => {
        Object.assign(search, { pattern, db: db.trim() || '0', instance, limit, offset: 0 });
        await load();
      },
    },
    h(
      'div',
      { class: 'filters' },
      field('Pattern', { name: 'pattern', value: search.pattern, autocomplete: 'off', spellcheck: 'false' }, 'A Redis glob: session:* (empty: every key)'),
      field('Database', { name: 'db', type: 'number', min: '0', max: '15', inputmode: 'numeric', value: search.db }, '0 to 15'),
      select('Instance', 'instance', instances.map((i) => i.id), search.instance),
      select('Keys per page', 'limit', PAGE_SIZES, search.limit),
    ),
  );
  page('Cache', h('p', {}, 'The keys of the stores svc uses, read only. Values are shown as svc serves them: secrets redacted.'), filters, results);
  await load().catch((e: unknown) => showError(e, { scope: filters }));
}

async function entryPage(instance: string, db: string, key: string): Promise<void> {
  const back = h('p', {}, h('a', { href: href('cache') }, 'Back to the list'));
  let entry: Entry;
  try {
    entry = await pluginCall<Entry>(`${CACHE_LIST}/cacheEntry`, { query: { key, db, instance } });
  } catch (e) {
    page('Cache entry', h('p', {}, h('code', {}, key)), back);
    throw e;
  }
  const value = entry.valueParsed !== undefined ? JSON.stringify(entry.valueParsed, null, 2) : entry.value;
  page(
    'Cache entry',
    back,
    h(
      'dl',
      {},
      h('dt', {}, 'Key'),
      h('dd', {}, h('code', {}, entry.key)),
      h('dt', {}, 'Instance and database'),
      h('dd', {}, `${instance}, database ${db}`),
      h('dt', {}, 'Type'),
      h('dd', {}, entry.type),
      h('dt', {}, 'Expires in'),
      h('dd', {}, ttlOf(entry.ttl)),
      h('dt', {}, 'Size'),
      h('dd', {}, String(entry.size)),
    ),
    h('h2', { id: 'cache-value' }, 'Value'),
    entry.truncated ? h('p', { class: 'hint' }, 'Cut at 16 KiB: the value is longer.') : null,
    value ? h('pre', { tabindex: '0', 'aria-labelledby': 'cache-value' }, value) : h('p', { class: 'empty' }, 'No value to show (empty, withheld, or a type svc does not show).'),
  );
}
