// What every console page shares: the API client, step-up, a confirmation dialog, tables, pagers and
// the states a page goes through (loading, empty, error). The element and form helpers are the example
// login UI's (examples/login/src/dom.ts): one set of DOM helpers and one way of showing errors.

import { createClient, SvcError } from '@svc/client';
import { h, say } from '../../examples/login/src/dom.ts';
import { stepUpRunner } from '../../examples/login/src/step-up.ts';

export { actionButton, clearMessages, field, form, h, page, say, showError } from '../../examples/login/src/dom.ts';

/**
 * Where the API is: the console is served at `/admin`, or at `/api/admin` behind a proxy that forwards
 * `/api/` (kept or stripped, svc answers both): the API is at the same prefix.
 */
export const apiBase = location.pathname.replace(/\/admin\/?$/, '');

export const svc = createClient({ baseUrl: apiBase });

/** Runs `action`, asking for a fresh login in the step-up dialog when the API wants one (403 `reauthentication_required`). */
export const fresh = stepUpRunner(svc, document.getElementById('step-up') as HTMLDialogElement);

/** The console's address of a page: `#/users/<id>`. */
export const href = (...parts: string[]) => `#/${parts.map(encodeURIComponent).join('/')}`;

/** A date as the reader's locale writes it; a dash for none. */
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

/**
 * Asks "are you sure?" in a modal dialog (keyboard: Enter confirms, Escape cancels); resolves true only
 * on the confirm button.
 */
export function confirmAction(question: string, confirmLabel: string): Promise<boolean> {
  const dialog = document.getElementById('confirm') as HTMLDialogElement;
  return new Promise((resolve) => {
    const finish = (yes: boolean) => {
      dialog.oncancel = null;
      dialog.close();
      resolve(yes);
    };
    const yes = h('button', { type: 'button', class: 'danger', onclick: () => finish(true) }, confirmLabel);
    dialog.replaceChildren(
      h('h2', { id: 'confirm-title' }, 'Are you sure?'),
      h('p', {}, question),
      h('div', { class: 'actions' }, yes, h('button', { type: 'button', class: 'secondary', onclick: () => finish(false) }, 'Cancel')),
    );
    dialog.setAttribute('aria-labelledby', 'confirm-title');
    dialog.oncancel = () => finish(false);
    dialog.showModal();
    yes.focus();
  });
}

type Cell = Node | string | null | undefined | false;

/**
 * A table with a caption (what it lists, for screen readers) and a header row; `empty` is said instead
 * when there is no row. On a narrow screen (style.css) each row is a block of its cells, each under its
 * column's name (`data-label`), so every cell and button is on the screen at 360 px; wider, a table too
 * wide for its box scrolls sideways inside it. The roles are explicit: a table laid out as blocks stays
 * a table for assistive technology in every browser.
 */
export function table(caption: string, headers: string[], rows: Cell[][], empty: string): HTMLElement {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h(
    'div',
    { class: 'table', role: 'region', 'aria-label': caption, tabindex: '0' },
    h(
      'table',
      { role: 'table' },
      h('caption', {}, caption),
      h('thead', { role: 'rowgroup' }, h('tr', { role: 'row' }, ...headers.map((text) => h('th', { scope: 'col', role: 'columnheader' }, text)))),
      h(
        'tbody',
        { role: 'rowgroup' },
        ...rows.map((cells) =>
          h(
            'tr',
            { role: 'row' },
            ...cells.map((cell, i) => h('td', { role: 'cell', 'data-label': headers[i], ...(i === cells.length - 1 && cell instanceof HTMLElement && cell.tagName === 'DIV' ? { class: 'actions-cell' } : {}) }, cell)),
          ),
        ),
      ),
    ),
  );
}

/** "Previous" and "Next" for offset paging; buttons only where there is somewhere to go. */
export function pager(at: { offset: number; limit: number; total: number }, go: (offset: number) => void): HTMLElement {
  const last = Math.min(at.offset + at.limit, at.total);
  return h(
    'nav',
    { class: 'actions', 'aria-label': 'Pages' },
    h('span', {}, at.total ? `${at.offset + 1}–${last} of ${at.total}` : ''),
    at.offset > 0 ? h('button', { type: 'button', class: 'secondary', onclick: () => go(Math.max(0, at.offset - at.limit)) }, 'Previous') : null,
    last < at.total ? h('button', { type: 'button', class: 'secondary', onclick: () => go(at.offset + at.limit) }, 'Next') : null,
  );
}

/** Copies `text` to the clipboard and says so (or says where to copy it by hand). */
export async function copy(text: string, what: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    say(`${what} copied.`);
  } catch {
    say(`Copy ${what} by hand: ${text}`);
  }
}

/** True for the API's "not found" (a page of an id that is gone). */
export const isNotFound = (e: unknown) => e instanceof SvcError && e.status === 404;

/** A secret shown once (webhook secret, user's API key): in a box, with a copy button. */
export function shownOnce(label: string, secret: string): HTMLElement {
  return h(
    'div',
    { class: 'secret', role: 'group', 'aria-label': label },
    h('p', {}, h('strong', {}, `${label}: `), 'shown once. Copy it now; it cannot be shown again.'),
    h('p', {}, h('code', {}, secret)),
    h('button', { type: 'button', class: 'secondary', onclick: () => void copy(secret, label) }, `Copy ${label.toLowerCase()}`),
  );
}
