// Users (CONTRACT 3 and 16, docs/console.md): `#/users` searches by email, pages through everyone and
// creates a user; `#/users/<id>` edits names, the admin flag and the password, sends a reset mail, lists
// and ends the user's sessions, shows their ways in and API keys, and deletes the user. What needs a
// recent sign-in (granting admin, setting a password, deleting) goes through `fresh` (step-up).

import type { ApiKey, User, UserSession, WaysIn } from '@svc/client';
import { actionButton, confirmAction, field, form, fresh, h, href, isNotFound, page, pager, say, showError, svc, table, when } from '../ui.ts';

const LIMIT = 20;

/** What the list shows now; kept while the console is open, so "All users" returns to the same page. */
const shown = { email: '', offset: 0 };

let checks = 0;
/** A labelled checkbox (its label after it, as people expect); checked, its form data has `name=true`. */
function checkbox(label: string, name: string): HTMLElement {
  const id = `c${++checks}-${name}`;
  return h('div', { class: 'field check' }, h('input', { type: 'checkbox', id, name, value: 'true' }), h('label', { for: id }, label));
}

const fullName = (u: User) => [u.firstname, u.lastname].filter(Boolean).join(' ') || '—';
const yesNo = (yes: boolean) => (yes ? 'Yes' : 'No');
const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

export async function usersPage(): Promise<void> {
  const list = h('div', {}, h('p', {}, 'Loading…'));
  const created = h('div', {});

  /** Reads a page of users and shows it; throws (the list stays as it was) when the API refuses. */
  async function load(offset: number, focusList = false): Promise<number> {
    const res = await svc.admin.listUsers({ offset, limit: LIMIT, ...(shown.email ? { email: shown.email } : {}) });
    shown.offset = offset;
    list.replaceChildren(
      table(
        shown.email ? `Users with the address ${shown.email}` : 'Users',
        // Three columns whose lines name what they hold: readable at 360 px.
        ['User', 'Status', 'Last login'],
        res.items.map((u) => [
          h('div', {}, h('a', { href: href('users', u.id) }, u.email), h('div', {}, fullName(u))),
          h('div', {}, u.isAdmin ? 'Administrator' : 'User', h('div', {}, u.email_verified ? 'Email verified' : 'Email not verified')),
          when(u.lastLoginAt),
        ]),
        shown.email ? `No user has the address ${shown.email}.` : 'No user yet: create one above.',
      ),
      pager(res, (to) => void load(to, true).catch((e: unknown) => showError(e))),
    );
    if (focusList) list.querySelector<HTMLElement>('.table')?.focus();
    return res.total;
  }

  const search = form(
    {
      label: 'Search users',
      submit: 'Search',
      action: async ({ email = '' }) => {
        shown.email = email.trim();
        const total = await load(0);
        say(shown.email ? (total ? `Found ${shown.email}.` : `No user has the address ${shown.email}.`) : `${plural(total, 'user', 'users')} in all.`);
      },
    },
    field('Search by email', { name: 'email', type: 'email', autocomplete: 'off', value: shown.email }, 'The full address; leave it empty to list every user.'),
  );

  const create = form(
    {
      label: 'Create a user',
      submit: 'Create user',
      action: async ({ email = '', password = '', firstname = '', lastname = '', isAdmin }, el) => {
        // svc asks for a recent sign-in only when the new user is an admin.
        const user = await fresh(() =>
          svc.admin.createUser({
            email: email.trim(),
            password,
            ...(firstname.trim() ? { firstname: firstname.trim() } : {}),
            ...(lastname.trim() ? { lastname: lastname.trim() } : {}),
            ...(isAdmin === 'true' ? { isAdmin: true } : {}),
          }),
        );
        el.reset();
        created.replaceChildren(h('p', {}, 'Created: ', h('a', { href: href('users', user.id) }, user.email), user.isAdmin ? ' (administrator)' : ''));
        say(`${user.email} is created.`);
        await load(shown.offset).catch((e: unknown) => showError(e));
        el.querySelector('input')?.focus();
      },
    },
    field('Email', { name: 'email', type: 'email', autocomplete: 'off', required: true }),
    field('Password', { name: 'password', type: 'password', autocomplete: 'new-password', required: true }, 'At least 8 characters. Tell the user in person; they can change it.'),
    field('First name', { name: 'firstname', autocomplete: 'off' }),
    field('Last name', { name: 'lastname', autocomplete: 'off' }),
    checkbox('Administrator', 'isAdmin'),
  );

  page(
    'Users',
    h('section', { 'aria-labelledby': 'users-search' }, h('h2', { id: 'users-search' }, 'Find a user'), search),
    h('details', {}, h('summary', {}, 'Create a user'), create, created),
    h('section', { 'aria-labelledby': 'users-list' }, h('h2', { id: 'users-list' }, 'All users'), list),
  );
  await load(shown.offset).catch((e: unknown) => {
    list.replaceChildren(h('p', { class: 'empty' }, 'The users could not be read.'));
    throw e;
  });
}

// ---------------------------------------------------------------------------------------------
// One user

/** A part of the user page that reads its own data: "Loading…", then what `render` made, or "could not be read" and the API's message. */
function part(render: () => Promise<Node[]>, what: string): { el: HTMLElement; refresh: () => Promise<void> } {
  const el = h('div', {}, h('p', {}, 'Loading…'));
  const refresh = async () => {
    try {
      el.replaceChildren(...(await render()));
    } catch (e) {
      el.replaceChildren(h('p', { class: 'empty' }, `The ${what} could not be read.`));
      showError(e);
    }
  };
  return { el, refresh };
}

/** Puts the focus on what `el` shows now (its table, or the sentence saying there is none), after the row with the focus went away. */
function focusIn(el: HTMLElement): void {
  const target = el.querySelector<HTMLElement>('.table, .empty');
  if (target && !target.hasAttribute('tabindex')) target.setAttribute('tabindex', '-1');
  target?.focus();
}

const section = (id: string, title: string, ...content: (Node | string | null)[]) => h('section', { 'aria-labelledby': id }, h('h2', { id }, title), ...content);

export async function userPage(id: string): Promise<void> {
  let user: User;
  try {
    user = await svc.admin.getUser(id);
  } catch (e) {
    if (!isNotFound(e)) throw e;
    page('User', h('p', {}, 'This user does not exist (any more).'), h('p', {}, h('a', { href: href('users') }, 'All users')));
    return;
  }
  // Another page was opened while the user was read: that page is drawn, not this one.
  if (location.hash !== href('users', id)) return;
  const who = user.email;

  // Names
  const names = form(
    {
      label: 'Names',
      submit: 'Save names',
      action: async ({ firstname = '', lastname = '' }) => {
        user = await svc.admin.updateUser(id, { firstname: firstname.trim(), lastname: lastname.trim() });
        say(`The names of ${who} are saved.`);
      },
    },
    field('First name', { name: 'firstname', autocomplete: 'off', value: user.firstname ?? '' }),
    field('Last name', { name: 'lastname', autocomplete: 'off', value: user.lastname ?? '' }),
  );

  // Administrator
  const adminState = h('p', {});
  const adminButton = actionButton('', async () => {
    const makeAdmin = !user.isAdmin;
    if (!makeAdmin && !(await confirmAction(`Take administrator rights from ${who}? Their sessions lose them at once, and their API keys with auth:admin are revoked.`, 'Remove administrator'))) return;
    user = await fresh(() => svc.admin.updateUser(id, { isAdmin: makeAdmin }));
    showAdmin();
    say(makeAdmin ? `${who} is an administrator now.` : `${who} is no longer an administrator.`);
    adminButton.focus();
  });
  const showAdmin = () => {
    adminState.textContent = user.isAdmin ? `${who} is an administrator.` : `${who} is not an administrator.`;
    adminButton.textContent = user.isAdmin ? 'Remove administrator' : 'Make administrator';
    adminButton.className = user.isAdmin ? 'danger' : '';
  };
  showAdmin();

  // Password
  const setPassword = form(
    {
      label: 'Set a password',
      submit: 'Set password',
      action: async ({ password = '' }, el) => {
        await fresh(() => svc.admin.updateUser(id, { password }));
        el.reset();
        say(`The password of ${who} is set; their sessions ended.`);
        await Promise.all([sessions.refresh(), waysIn.refresh()]);
      },
    },
    field('New password', { name: 'password', type: 'password', autocomplete: 'new-password', required: true }, 'At least 8 characters. Every session of the user ends.'),
  );
  const resetMail = actionButton(
    'Send password reset mail',
    async () => {
      // 501 `email_not_configured` when svc sends no mail: its message says so.
      await svc.forgotPassword(who);
      say(`A password reset mail is on its way to ${who}.`);
    },
    { class: 'secondary' },
  );

  // Sessions
  const sessions = part(async () => {
    const { items } = await svc.admin.userSessions(id);
    return [
      table(
        `Sessions of ${who}, newest first`,
        ['Session', 'From', 'Actions'],
        items.map((s: UserSession) => [
          h('div', {}, h('div', {}, `Signed in: ${when(s.createdAt)}`), h('div', {}, `Last seen: ${when(s.lastSeenAt)}`)),
          h('div', {}, h('div', {}, `IP address: ${s.ip ?? '—'}`), h('div', {}, `Device: ${s.device ?? '—'}`)),
          h(
            'div',
            {},
            actionButton(
              'End',
              async () => {
                await svc.admin.endUserSession(id, s.id);
                say(`The session signed in ${when(s.createdAt)} has ended.`);
                await sessions.refresh();
                focusIn(sessions.el);
              },
              { class: 'secondary', 'aria-label': `End the session signed in ${when(s.createdAt)}` },
            ),
          ),
        ]),
        `${who} is signed in nowhere.`,
      ),
      ...(items.length
        ? [
            h(
              'div',
              { class: 'actions' },
              actionButton(
                'End all sessions',
                async () => {
                  if (!(await confirmAction(`Sign ${who} out everywhere? Their API keys keep working.`, 'End all sessions'))) return;
                  await svc.admin.endUserSessions(id);
                  say(`Every session of ${who} has ended.`);
                  await sessions.refresh();
                },
                { class: 'danger' },
              ),
            ),
          ]
        : []),
    ];
  }, 'sessions');

  // Ways in
  const waysIn = part(async () => {
    const w: WaysIn = await svc.admin.userWaysIn(id);
    return [
      h('dl', {}, h('dt', {}, 'Password'), h('dd', {}, w.password ? 'Set' : 'Not set'), h('dt', {}, 'Two-step verification (TOTP)'), h('dd', {}, w.totp ? 'On' : 'Off')),
      table(`Passkeys of ${who}`, ['Passkey', 'Use'], w.passkeys.map((p) => [p.name, h('div', {}, h('div', {}, `Added: ${when(p.createdAt)}`), h('div', {}, `Last used: ${when(p.lastUsedAt)}`))]), 'No passkey.'),
      table(
        `Connected accounts of ${who}`,
        ['Account', 'Connected'],
        w.providers.map((p) => [h('div', {}, p.provider, h('div', {}, 'Account id: ', h('code', {}, p.providerAccountId)), h('div', {}, `Email: ${p.email ?? '—'}`)), when(p.linkedAt)]),
        'No connected account.',
      ),
    ];
  }, 'ways in');

  // API keys
  const apiKeys = part(async () => {
    const { items } = await svc.admin.userApiKeys(id);
    return [
      table(
        `API keys of ${who}`,
        ['Key', 'Use', 'Actions'],
        items.map((k: ApiKey) => [
          h('div', {}, k.name, h('div', {}, h('code', {}, k.prefix)), h('div', {}, `Scopes: ${k.scopes.join(', ') || 'none'}`)),
          h('div', {}, h('div', {}, `Created: ${when(k.createdAt)}`), h('div', {}, `Expires: ${k.expiresAt ? when(k.expiresAt) : 'never'}`), h('div', {}, `Last used: ${when(k.lastUsedAt)}`)),
          h(
            'div',
            {},
            actionButton(
              'Revoke',
              async () => {
                if (!(await confirmAction(`Revoke the API key "${k.name}" of ${who}? Whatever uses it stops working within a second.`, 'Revoke key'))) return;
                await svc.admin.deleteUserApiKey(id, k.id);
                say(`The API key "${k.name}" is revoked.`);
                await apiKeys.refresh();
                focusIn(apiKeys.el);
              },
              { class: 'danger', 'aria-label': `Revoke the API key ${k.name}` },
            ),
          ),
        ]),
        'No API key. Users make their own (a recent sign-in needed).',
      ),
    ];
  }, 'API keys');

  const remove = actionButton(
    'Delete user',
    async () => {
      if (!(await confirmAction(`Delete ${who}? Their sessions end, their API keys are revoked, and the account cannot be brought back.`, 'Delete user'))) return;
      await fresh(() => svc.admin.deleteUser(id));
      page('User deleted', h('p', {}, `${who} is deleted: their sessions ended and their API keys are revoked.`), h('p', {}, h('a', { href: href('users') }, 'All users')));
      say(`${who} is deleted.`);
    },
    { class: 'danger' },
  );

  page(
    who,
    h('p', {}, h('a', { href: href('users') }, 'All users')),
    h('dl', {}, h('dt', {}, 'Email verified'), h('dd', {}, yesNo(user.email_verified)), h('dt', {}, 'Last login'), h('dd', {}, when(user.lastLoginAt)), h('dt', {}, 'User id'), h('dd', {}, h('code', {}, id))),
    h('p', {}, h('a', { href: href('audit', id) }, `Audit log of ${who}`)),
    section('user-names', 'Names', names),
    section('user-admin', 'Administrator', adminState, h('div', { class: 'actions' }, adminButton)),
    section('user-password', 'Password', setPassword, h('p', { class: 'hint' }, 'Or let the user choose one: svc mails them a reset link (when it sends mail).'), h('div', { class: 'actions' }, resetMail)),
    section('user-sessions', 'Sessions', sessions.el),
    section('user-ways-in', 'Ways in', waysIn.el),
    section('user-api-keys', 'API keys', apiKeys.el),
    section('user-delete', 'Delete', h('div', { class: 'actions' }, remove)),
  );
  await Promise.all([sessions.refresh(), waysIn.refresh(), apiKeys.refresh()]);
}
