// The console's users pages (issue 57): search, paging and keyboard-only creation on `#/users`; on a
// user's page a name edit, admin granted (step-up), a session of the user's other browser ended, an API
// key revoked, the reset mail refused without SMTP, and the user deleted through the confirm dialog.
// axe-core and a screenshot of both pages.

import { expect, it } from 'vitest';
import { expectHeading, focusedLabel, mainButton, poll, type ConsoleSuite } from './harness.ts';

/** The console's users page tests (registered inside console-browser.test.ts's describe block). */
/** The console signed in as the suite's admin, on a user's page: the page and its sessions region. */
async function openUser(s: ConsoleSuite, id: string, email: string) {
  const page = await s.newPage();
  await s.signIn(page);
  await expectHeading(page, 'Users');
  await page.goto(`${s.url}#/users/${id}`);
  await expectHeading(page, email);
  return { page, sessions: page.getByRole('region', { name: `Sessions of ${email}, newest first` }) };
}

export function usersTests(s: ConsoleSuite): void {
  const unique = (tag: string) => `${tag}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}@example.com`;
  const userByEmail = async (email: string) => {
    const { items } = (await (await s.d.adminFetch(`/auth/users?email=${encodeURIComponent(email)}`)).json()) as { items: { id: string; firstname?: string; isAdmin: boolean }[] };
    return items[0];
  };

  it('search, paging, and creating a user with the keyboard alone; the users page passes axe-core', async () => {
    // More users than a page holds (20), so there is a next page.
    const { total } = (await (await s.d.adminFetch('/auth/users?limit=1')).json()) as { total: number };
    await Promise.all(Array.from({ length: Math.max(0, 21 - total) }, (_, i) => s.d.createUser(unique(`filler${i}`), 'a filler password')));

    const page = await s.newPage();
    await s.signIn(page);
    await expectHeading(page, 'Users');
    await page.getByRole('region', { name: 'Users', exact: true }).waitFor();
    await s.expectAccessible(page, 'the users page');
    await s.shots.take(page, 'users');

    // Paging: Next, then Previous.
    const pages = page.getByRole('navigation', { name: 'Pages' });
    expect(await pages.textContent()).toMatch(/^1–20 of \d+/);
    await pages.getByRole('button', { name: 'Next' }).click();
    await poll(() => pages.textContent()).toMatch(/^21–/);
    await pages.getByRole('button', { name: 'Previous' }).click();
    await poll(() => pages.textContent()).toMatch(/^1–20 of/);

    // Create: from the heading, Tab to "Create a user", Enter opens it, then Tab and type; Enter sends.
    const email = unique('keyboard');
    await page.locator('h1').focus();
    for (let i = 0; i < 10 && (await focusedLabel(page)) !== 'Create a user'; i++) await page.keyboard.press('Tab');
    expect(await focusedLabel(page)).toBe('Create a user');
    await page.keyboard.press('Enter');
    for (const [label, text] of [['Email', email], ['Password', 'a keyboard password'], ['First name', 'Kay'], ['Last name', 'Board']] as const) {
      await page.keyboard.press('Tab');
      expect(await focusedLabel(page)).toBe(label);
      await page.keyboard.type(text);
    }
    await page.keyboard.press('Enter');
    await poll(() => page.locator('#status').textContent()).toBe(`${email} is created.`);
    expect(await userByEmail(email)).toMatchObject({ firstname: 'Kay', isAdmin: false });

    // Search by the address: one row, its link to the user's page; an unknown address says so.
    await page.getByLabel('Search by email').fill(email);
    await page.getByLabel('Search by email').press('Enter');
    await poll(() => page.getByRole('region', { name: `Users with the address ${email}` }).getByRole('row').count()).toBe(2); // header + 1
    expect(await page.getByRole('link', { name: email }).first().getAttribute('href')).toMatch(/^#\/users\/[\w-]+$/);
    await page.getByLabel('Search by email').fill(unique('nobody'));
    await page.getByLabel('Search by email').press('Enter');
    await poll(() => page.locator('main .empty').textContent()).toMatch(/^No user has the address/);
    // A refused address is said beside the field (the API's validation_failed), and the list stays.
    await page.getByLabel('Search by email').fill('not an address');
    await page.getByLabel('Search by email').press('Enter');
    await poll(() => page.getByLabel('Search by email').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#error').textContent()).not.toBe('');
    await page.getByLabel('Search by email').fill('');
    await mainButton(page, 'Search').click();
    await poll(() => pages.textContent()).toMatch(/^1–20 of/);
  });

  it("a user's password set (step-up): their sessions end, the old password stops working, the new one signs in; End all sessions", async () => {
    const email = unique('password');
    await s.d.createUser(email, 'the first password');
    const id = (await userByEmail(email))!.id;
    const signIn = (password: string) => fetch(`${s.d.appOrigin}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
    const cookieOf = (res: Response) => res.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.startsWith('sid_app='))!;
    const sessionOf = (cookie: string) => fetch(`${s.d.appOrigin}/api/auth/session`, { headers: { cookie } }).then((r) => r.status);
    const before = cookieOf(await signIn('the first password'));

    const { page, sessions } = await openUser(s, id, email);
    await poll(() => sessions.getByRole('row').count()).toBe(2);
    await page.getByLabel('New password', { exact: true }).fill('the second password');
    await mainButton(page, 'Set password').click();
    await s.afterStepUp(page, page.locator('#status', { hasText: `The password of ${email} is set; their sessions ended.` }));
    await page.getByText(`${email} is signed in nowhere.`).waitFor();
    expect(await sessionOf(before)).toBe(401);
    expect((await signIn('the first password')).status).toBe(401);
    const after = await signIn('the second password');
    expect(after.status).toBe(200);

    // End all sessions, after the confirm dialog: the new session ends too.
    await page.reload();
    await expectHeading(page, email);
    await poll(() => sessions.getByRole('row').count()).toBe(2);
    await mainButton(page, 'End all sessions').click();
    await page.getByRole('dialog').getByRole('button', { name: 'End all sessions' }).click();
    await page.getByText(`${email} is signed in nowhere.`).waitFor();
    expect(await sessionOf(cookieOf(after))).toBe(401);
  });

  it("a user's page: name, admin (step-up), a session and an API key ended, reset mail refused without SMTP, delete; axe-core", async () => {
    const email = unique('managed');
    const password = 'a managed password';
    await s.d.createUser(email, password);
    const id = (await userByEmail(email))!.id;
    // A tool's login (fetch, no browser) makes an API key; then the user signs in from a browser of their own.
    const login = await fetch(`${s.d.appOrigin}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
    const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.startsWith('sid_app='))!;
    const made = await fetch(`${s.d.appOrigin}/api/auth/api-keys`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'deploy-bot', scopes: [] }) });
    expect(made.status, await made.clone().text()).toBe(201);
    const { key } = (await made.json()) as { key: string };
    const theirs = await s.newPage();
    await s.signIn(theirs, { email, password });
    await expectHeading(theirs, 'Not allowed');

    const { page, sessions } = await openUser(s, id, email);
    await poll(() => sessions.getByRole('row').count()).toBe(3); // header + the tool's + the browser's
    await page.getByRole('region', { name: `API keys of ${email}` }).getByText('deploy-bot').waitFor();
    expect(await page.locator('#user-ways-in + div dd').first().textContent()).toBe('Set');
    await s.expectAccessible(page, "a user's page");
    await s.shots.take(page, 'user');

    // Names (no step-up).
    await page.getByLabel('First name').fill('Mona');
    await mainButton(page, 'Save names').click();
    await poll(() => page.locator('#status').textContent()).toBe(`The names of ${email} are saved.`);
    expect((await userByEmail(email))?.firstname).toBe('Mona');

    // Admin: svc asks for a recent sign-in when it is older than freshAge; afterStepUp answers if it does.
    await mainButton(page, 'Make administrator').click();
    await s.afterStepUp(page, page.getByText(`${email} is an administrator.`));
    expect((await userByEmail(email))?.isAdmin).toBe(true);

    // End the newest session (the user's browser): that browser is signed out, the tool's session lives on.
    await sessions.getByRole('button', { name: /^End the session/ }).first().click();
    await poll(() => sessions.getByRole('row').count()).toBe(2);
    await theirs.reload();
    await expectHeading(theirs, 'Sign in');
    expect((await fetch(`${s.d.appOrigin}/api/auth/session`, { headers: { cookie } })).status).toBe(200);

    // Revoke the key through the confirm dialog: the key stops working.
    await page.getByRole('button', { name: 'Revoke the API key deploy-bot' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
    await page.getByText('No API key.').waitFor();
    await poll(async () => (await fetch(`${s.d.appOrigin}/api/auth/session`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);

    // The deployment sends no mail: the API's refusal is said.
    await mainButton(page, 'Send password reset mail').click();
    await poll(() => page.locator('#error').textContent()).toMatch(/sends no mail/);

    // Delete: the dialog, then (step-up if asked) the user is gone.
    await mainButton(page, 'Delete user').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete user' }).click();
    await s.afterStepUp(page, page.getByRole('heading', { level: 1, name: 'User deleted' }));
    expect(await userByEmail(email)).toBeUndefined();
    expect((await fetch(`${s.d.appOrigin}/api/auth/session`, { headers: { cookie } })).status).toBe(401);
    // Its page, opened again, says the user is gone (not a blank page).
    await page.reload();
    await expectHeading(page, 'User');
    await page.getByText('This user does not exist (any more).').waitFor();
  });
}
