// Work sessions (CONTRACT 6, docs/work-sessions.md): guest links. The list at `#/work-sessions` (paged),
// creating one, one work session at `#/work-sessions/<id>` (label, expiry, plugin data), deactivating and
// reactivating, deleting, and "Copy guest link": the app's page with `?workSession=<id>`, which the
// frontend turns into the `x-work-session-id` header and socket.io's `auth.sessionId`.

import type { WorkSession } from '@svc/client';
import { actionButton, confirmAction, copy, field, form, fresh, h, href, page, pager, say, svc, table, when } from '../ui.ts';

const PAGE_SIZE = 20;

/** The guest link the docs describe: the app's origin (the console is served on it) with `?workSession=<id>`. */
export const guestLink = (id: string) => `${location.origin}/?workSession=${encodeURIComponent(id)}`;

const nameOf = (w: WorkSession) => w.label || `work session ${w.id.slice(0, 8)}`;

function stateOf(w: WorkSession): string {
  if (!w.isActive) return 'Deactivated';
  if (w.expiresAt && Date.parse(w.expiresAt) <= Date.now()) return 'Expired';
  return 'Active';
}

/** An ISO time as a `datetime-local` value in the reader's time zone (`2030-01-31T18:00`). */
function localValue(iso: string | null): string {
  if (!iso) return '';
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** A `datetime-local` value (the reader's time zone) as ISO 8601, or null for none. */
const isoOf = (local: string) => (local.trim() ? new Date(local).toISOString() : null);

let areas = 0;
/** A labelled textarea for JSON, with a hint. */
function jsonField(label: string, name: string, value: string, hint: string): HTMLElement {
  const id = `ta${++areas}-${name}`;
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    h('textarea', { id, name, rows: '5', required: true, spellcheck: 'false', autocomplete: 'off', 'aria-describedby': `${id}-hint` }, value),
    h('p', { class: 'hint', id: `${id}-hint` }, hint),
  );
}

/**
 * The plugin data typed into `form`, parsed; bad JSON (or not an object) is said beside the textarea
 * (marked invalid and focused) and thrown, so the form's error region says it too.
 */
function pluginDataOf(text: string, el: HTMLFormElement): Record<string, unknown> {
  let value: unknown;
  let problem = '';
  try {
    value = JSON.parse(text);
    if (!value || typeof value !== 'object' || Array.isArray(value)) problem = 'Plugin data must be a JSON object, e.g. {"svc__todo": {"owner": "<user id>"}}.';
  } catch (e) {
    problem = `Plugin data is not valid JSON: ${(e as Error).message}.`;
  }
  if (!problem) return value as Record<string, unknown>;
  const area = el.querySelector<HTMLTextAreaElement>('textarea[name="pluginData"]')!;
  const errorId = `${area.id}-error`;
  area.after(h('p', { class: 'field-error', id: errorId }, problem));
  area.setAttribute('aria-invalid', 'true');
  area.setAttribute('aria-describedby', `${errorId} ${area.id}-hint`);
  area.focus();
  throw new Error(problem);
}

const PLUGIN_DATA_HINT = 'A JSON object keyed by plugin key, with what each plugin needs, e.g. {"svc__todo": {"owner": "<user id>"}}. Guests may read those plugins\' routes.';

/** Copy guest link, deactivate/reactivate, delete. */
function sessionActions(w: WorkSession, after: () => Promise<void>, gone: () => Promise<void>): HTMLElement[] {
  const name = nameOf(w);
  return [
    actionButton('Copy guest link', () => copy(guestLink(w.id), `The guest link of ${name}`), { class: 'secondary', 'aria-label': `Copy guest link of ${name}` }),
    actionButton(
      w.isActive ? 'Deactivate' : 'Reactivate',
      async () => {
        await fresh(() => svc.admin.updateWorkSession(w.id, { isActive: !w.isActive }));
        await after();
        say(w.isActive ? `${name} is deactivated: its guests are refused from now on.` : `${name} is active again.`);
      },
      { class: 'secondary', 'aria-label': `${w.isActive ? 'Deactivate' : 'Reactivate'} ${name}` },
    ),
    actionButton(
      'Delete',
      async () => {
        if (!(await confirmAction(`Delete ${name}? Its guest link stops working and its guests are disconnected.`, 'Delete work session'))) return;
        await fresh(() => svc.admin.deleteWorkSession(w.id));
        await gone();
        say(`${name} is deleted.`);
      },
      { class: 'danger', 'aria-label': `Delete ${name}` },
    ),
  ];
}

/** Shows `render`'s page at `address` without a hashchange (main.ts's route() would clear what is said next). */
async function show(address: string, render: () => Promise<void>): Promise<void> {
  history.pushState(null, '', address);
  await render();
}

export async function workSessionsPage(params: string[] = []): Promise<void> {
  if (params[0]) return workSessionPage(params[0]);
  let offset = 0;
  const list = h('div', {}, h('p', {}, 'Loading…'));

  async function load(at = offset): Promise<void> {
    const result = await svc.admin.listWorkSessions({ offset: at, limit: PAGE_SIZE });
    // The last one of a page was deleted: the page before.
    if (!result.items.length && result.total > 0 && at > 0) return load(Math.max(0, at - PAGE_SIZE));
    offset = at;
    list.replaceChildren(
      table(
        'Work sessions',
        ['Work session', 'Actions'],
        // Two columns, the actions free to wrap: readable on a 360 px screen.
        result.items.map((w) => [
          h(
            'span',
            {},
            h('a', { href: href('work-sessions', w.id) }, nameOf(w)),
            h('br'),
            h('strong', {}, stateOf(w)),
            h('span', { class: 'hint' }, ` · ${w.expiresAt ? `expires ${when(w.expiresAt)}` : 'never expires'} · ${Object.keys(w.pluginData).join(', ')} · created ${when(w.createdAt)}`),
          ),
          h('span', { class: 'actions' }, ...sessionActions(w, () => load(), () => load())),
        ]),
        'No work sessions yet: create one above.',
      ),
      result.total > PAGE_SIZE ? pager(result, (next) => void load(next).catch(() => undefined)) : '',
    );
  }

  const create = form(
    {
      label: 'Create a work session',
      submit: 'Create work session',
      action: async ({ label = '', pluginData = '', composition = '', expiresAt = '' }, el) => {
        const data = pluginDataOf(pluginData, el);
        const created = await fresh(() =>
          svc.admin.createWorkSession({
            pluginData: data,
            ...(label.trim() ? { label: label.trim() } : {}),
            ...(composition.trim() ? { composition: composition.trim() } : {}),
            expiresAt: isoOf(expiresAt),
          }),
        );
        el.reset();
        await load(0);
        say(`${nameOf(created)} is created. Its guest link: ${guestLink(created.id)}`);
      },
    },
    field('Label', { name: 'label', autocomplete: 'off', maxlength: '200' }, 'What it is for, e.g. "review with Acme"'),
    jsonField('Plugin data', 'pluginData', '', PLUGIN_DATA_HINT),
    field('Composition', { name: 'composition', autocomplete: 'off', spellcheck: 'false', maxlength: '128' }, 'Optional: the page (composition) guests land on'),
    field('Expires at', { name: 'expiresAt', type: 'datetime-local' }, 'Optional, in your time zone; empty: never expires'),
  );

  page(
    'Work sessions',
    h('p', {}, 'A work session lets people without an account read what its plugins share, through its guest link, until it is deactivated, expires or is deleted.'),
    h('section', { 'aria-labelledby': 'ws-add' }, h('h2', { id: 'ws-add' }, 'New work session'), create),
    h('section', { 'aria-labelledby': 'ws-list' }, h('h2', { id: 'ws-list' }, 'All work sessions'), list),
  );
  await load(0).catch((e: unknown) => {
    list.replaceChildren(h('p', { class: 'empty' }, 'The work sessions could not be read.'));
    throw e;
  });
}

/** `#/work-sessions/<id>`: its guest link, its settings (label, expiry, plugin data) and actions. */
async function workSessionPage(id: string): Promise<void> {
  let w: WorkSession;
  try {
    w = await svc.admin.getWorkSession(id);
  } catch (e) {
    if (!(e && typeof e === 'object' && (e as { status?: number }).status === 404)) throw e;
    page('Work session', h('p', {}, 'This work session does not exist (any more).'), h('p', {}, h('a', { href: href('work-sessions') }, 'All work sessions')));
    return;
  }
  const name = nameOf(w);
  const edit = form(
    {
      label: `Edit ${name}`,
      submit: 'Save changes',
      action: async ({ label = '', pluginData = '', expiresAt = '' }, el) => {
        const data = pluginDataOf(pluginData, el);
        const saved = await fresh(() => svc.admin.updateWorkSession(id, { label: label.trim(), pluginData: data, expiresAt: isoOf(expiresAt) }));
        await workSessionPage(id);
        say(`${nameOf(saved)} is saved.`);
      },
    },
    field('Label', { name: 'label', autocomplete: 'off', maxlength: '200', value: w.label ?? '' }),
    field('Expires at', { name: 'expiresAt', type: 'datetime-local', value: localValue(w.expiresAt) }, 'In your time zone; empty: never expires; a time past ends guest access at once'),
    jsonField('Plugin data', 'pluginData', JSON.stringify(w.pluginData, null, 2), PLUGIN_DATA_HINT),
  );
  page(
    name,
    h('p', {}, h('a', { href: href('work-sessions') }, 'All work sessions')),
    h(
      'dl',
      {},
      h('dt', {}, 'State'),
      h('dd', {}, stateOf(w)),
      h('dt', {}, 'Guest link'),
      h('dd', {}, h('code', {}, guestLink(w.id))),
      h('dt', {}, 'Composition'),
      h('dd', {}, w.composition ?? '—'),
      h('dt', {}, 'Created'),
      h('dd', {}, when(w.createdAt)),
    ),
    h('div', { class: 'actions' }, ...sessionActions(w, () => workSessionPage(id), () => show(href('work-sessions'), () => workSessionsPage()))),
    h('section', { 'aria-labelledby': 'ws-edit' }, h('h2', { id: 'ws-edit' }, 'Settings'), edit),
  );
}
