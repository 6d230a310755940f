// The audit log (CONTRACT 13, docs/events.md): the filters of `GET /auth/audit` (user by email or id, type or `prefix.*`,
// since, until; records per page), newest first, paged by cursor ("Older", and "Newer" back through the cursors seen).
// `#/audit/<userId>` opens it filtered to one user (the users page links there).

import { SvcError, type AuditRecord } from '@svc/client';
import { field, form, h, href, page, showError, svc, table, when } from '../ui.ts';

interface Filters {
  userId?: string;
  type?: string;
  since?: string;
  until?: string;
  limit?: number;
}

const PAGE_SIZES = ['10', '25', '50', '100', '200'];

/** A `datetime-local` value (the reader's local time) as ISO 8601 in UTC; none for an empty field. */
const iso = (local: string | undefined) => (local ? new Date(local).toISOString() : undefined);

const actorOf = (r: AuditRecord) => (r.actor.id ? `${r.actor.type} ${r.actor.id}` : r.actor.type);

function userOf(r: AuditRecord): Node | string {
  const { userId, email } = r.subject;
  if (!userId) return email ?? '—';
  return h('a', { href: href('users', userId) }, email ?? userId);
}

/** `details` as `key: value` lines (values of objects as JSON). */
function detailsOf(r: AuditRecord): Node | string {
  const lines = Object.entries(r.details ?? {}).map(([k, v]) => h('div', {}, `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`));
  return lines.length ? h('div', {}, ...lines) : '';
}

/**
 * One record in three columns (the event: type, time and details; who; where from), each line naming
 * what it holds: eight columns of ids and emails cannot be read on a 360 px screen, three can.
 */
function rowOf(r: AuditRecord) {
  const line = (label: string, value: Node | string) => h('div', {}, `${label}: `, value);
  return [
    h('div', {}, h('code', {}, r.type), h('div', {}, h('time', { datetime: r.at }, when(r.at))), detailsOf(r)),
    h('div', {}, line('Actor', actorOf(r)), line('User', userOf(r))),
    // A span (lines by <br>): the table keeps a last <div> cell on one line (its buttons), this one wraps.
    h('span', {}, 'IP: ', r.ip ?? '—', h('br'), 'Device: ', r.device ?? '—', h('br'), 'Session: ', r.sessionId ? h('code', {}, r.sessionId) : '—'),
  ];
}

/**
 * The user filter as the API takes it: an id as typed, an email address looked up (one that no user has
 * is refused beside the field, as the API refuses a bad filter); none for an empty field.
 */
async function userIdOf(text: string): Promise<string | undefined> {
  if (!text) return undefined;
  if (!text.includes('@')) return text;
  const { items } = await svc.admin.listUsers({ email: text, limit: 1 });
  if (!items[0]) throw new SvcError(400, 'validation_failed', `No user has the address ${text}`, [{ path: 'userId', message: `no user has the address ${text}` }]);
  return items[0].id;
}

export async function auditPage(params: string[] = []): Promise<void> {
  let filters: Filters = params[0] ? { userId: params[0] } : {};
  /** The cursors of the pages shown before this one (their first is undefined: the newest page). */
  let cursors: (string | undefined)[] = [];
  let cursor: string | undefined;
  let loaded = false;
  const results = h('div', { 'aria-live': 'polite' });

  const filtersForm = form(
    {
      label: 'Filter the audit log',
      submit: 'Filter',
      action: async ({ userId, type, since, until, limit }) => {
        filters = { userId: await userIdOf(userId?.trim() ?? ''), type: type?.trim() || undefined, since: iso(since), until: iso(until), limit: Number(limit) || undefined };
        cursors = [];
        cursor = undefined;
        await load();
      },
    },
    h(
      'div',
      { class: 'filters' },
      field('User', { name: 'userId', value: filters.userId ?? '', autocomplete: 'off', spellcheck: 'false' }, 'An email address or a user id'),
      field('Type', { name: 'type', autocomplete: 'off', spellcheck: 'false' }, 'A type (login.failed) or a prefix (login.*)'),
      field('Since', { name: 'since', type: 'datetime-local', step: '1' }, 'Your local time; included'),
      field('Until', { name: 'until', type: 'datetime-local', step: '1' }, 'Your local time; not included'),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'audit-limit' }, 'Records per page'),
        h('select', { id: 'audit-limit', name: 'limit' }, ...PAGE_SIZES.map((n) => h('option', { value: n, selected: n === '50' }, n))),
      ),
    ),
  );

  /** Loads the page at `cursor`; a refused filter keeps the list as it was and says why beside its field. */
  async function load(): Promise<void> {
    results.setAttribute('aria-busy', 'true');
    try {
      const query = Object.fromEntries(Object.entries({ ...filters, cursor }).filter(([, v]) => v !== undefined));
      const { items, nextCursor } = await svc.admin.audit(query);
      const older = nextCursor ? h('button', { type: 'button', class: 'secondary', onclick: () => go(nextCursor, true) }, 'Older') : null;
      const newer = cursors.length ? h('button', { type: 'button', class: 'secondary', onclick: () => go(cursors.at(-1), false) }, 'Newer') : null;
      results.replaceChildren(
        table('Audit records, newest first', ['Event', 'Who', 'From'], items.map(rowOf), 'No record matches these filters.'),
        ...(older || newer ? [h('nav', { class: 'actions', 'aria-label': 'Audit log pages' }, newer, older)] : []),
      );
      loaded = true;
    } catch (e) {
      // The page is there (heading, filters): a failure says the API's message, beside a refused field.
      if (!loaded) results.replaceChildren(h('p', { class: 'empty' }, 'The audit log could not be read.'));
      throw e;
    } finally {
      results.removeAttribute('aria-busy');
    }
  }

  /** To the page at `to`: older (this one's cursor kept for "Newer") or newer (back one). */
  function go(to: string | undefined, older: boolean): void {
    if (older) cursors.push(cursor);
    else cursors.pop();
    cursor = to;
    load()
      .then(() => (results.querySelector<HTMLElement>('[role="region"]') ?? results).focus())
      .catch((e: unknown) => showError(e));
  }

  page('Audit log', filtersForm, results);
  results.replaceChildren(h('p', {}, 'Loading…'));
  await load().catch((e: unknown) => showError(e, { scope: filtersForm }));
}
