// The admin console (CONTRACT 16, docs/console.md): plain TypeScript on @svc/client, one page per hash
// route (`#/users`, `#/users/<id>`, ...), so it works at /admin and /api/admin without any server-side
// routing. Nothing is shown but the sign-in page until the API says the session is an admin's; a
// signed-in non-admin sees "not allowed" and the console asks the API for nothing else.

import { isLoggedIn, SvcError, type LoginResult, type SessionWithUser } from '@svc/client';
import { secondStepForm } from '../../examples/login/src/second-step.ts';
import { auditPage } from './pages/audit.ts';
import { deploymentPage } from './pages/deployment.ts';
import { pluginPages, pluginsOn } from './pages/plugins.ts';
import { providersPage } from './pages/providers.ts';
import { userPage, usersPage } from './pages/users.ts';
import { webhooksPage } from './pages/webhooks.ts';
import { workSessionsPage } from './pages/work-sessions.ts';
import { actionButton, apiBase, clearMessages, field, form, h, href, page, showError, svc } from './ui.ts';

declare global {
  interface Window {
    /** The app's name (`app.name`), which dom.ts's `page` puts in every title. */
    SVC_APP_NAME?: string;
  }
}
window.SVC_APP_NAME = `${document.querySelector<HTMLMetaElement>('meta[name="svc-app-name"]')?.content || 'svc'} admin`;

type Page = (params: string[]) => void | Promise<void>;

/** The pages of the navigation, in its order; the plugins' pages join when those plugins are on. */
const PAGES: { path: string; title: string; show: Page }[] = [
  { path: 'users', title: 'Users', show: (params) => (params[0] ? userPage(params[0]) : usersPage()) },
  { path: 'providers', title: 'Sign-in providers', show: providersPage },
  { path: 'work-sessions', title: 'Work sessions', show: workSessionsPage },
  { path: 'audit', title: 'Audit log', show: auditPage },
  { path: 'webhooks', title: 'Webhooks', show: webhooksPage },
  { path: 'deployment', title: 'Deployment check', show: deploymentPage },
];

let me: SessionWithUser | null = null;

function navigation(current: string): void {
  const nav = document.getElementById('nav')!;
  if (!me?.isAdmin) {
    nav.replaceChildren();
    return;
  }
  nav.replaceChildren(
    h(
      'ul',
      {},
      ...PAGES.map((p) => h('li', {}, h('a', { href: href(p.path), ...(p.path === current ? { 'aria-current': 'page' } : {}) }, p.title))),
      h('li', {}, actionButton('Sign out', signOut, { class: 'secondary' })),
    ),
  );
}

async function signOut(): Promise<void> {
  await svc.logout();
  me = null;
  location.hash = '#/login';
  await route();
}

// ---------------------------------------------------------------------------------------------
// Sign-in: password (+ TOTP or a recovery code), passkey, OAuth

async function afterLogin(result: LoginResult): Promise<void> {
  if (!isLoggedIn(result)) return secondStep();
  location.hash = '#/users';
  await route();
}

function secondStep(): void {
  page('Two-step verification', ...secondStepForm(svc, afterLogin));
}

async function loginPage(): Promise<void> {
  // An OAuth login of a user with TOTP on comes back with `?mfa=totp` (docs/account.md).
  if (new URLSearchParams(location.search).get('mfa') === 'totp') return secondStep();
  const providers = await svc.oauthProviders().catch(() => []);
  page(
    'Sign in',
    h('p', {}, 'Sign in with an administrator account.'),
    form(
      { label: 'Sign in with email and password', submit: 'Sign in', action: async ({ email = '', password = '' }) => afterLogin(await svc.login({ email, password })) },
      field('Email', { name: 'email', type: 'email', autocomplete: 'username webauthn', required: true }),
      field('Password', { name: 'password', type: 'password', autocomplete: 'current-password', required: true }),
    ),
    h('div', { class: 'actions' }, actionButton('Sign in with a passkey', async () => afterLogin(await svc.loginWithPasskey()), { class: 'secondary' })),
    providers.length
      ? h(
          'section',
          { 'aria-labelledby': 'oauth-title' },
          h('h2', { id: 'oauth-title' }, 'Or continue with'),
          h('div', { class: 'actions' }, ...providers.map((p) => actionButton(`Continue with ${p.label}`, () => oauthLogin(p.providerId), { class: 'secondary' }))),
        )
      : null,
  );
}

/**
 * Leaves for the provider; the way back is this console when svc takes the return path (the console is
 * on a listed frontend's origin, as behind the proxy), else the app's start page.
 */
async function oauthLogin(providerId: string): Promise<void> {
  try {
    await svc.setReturnTo(location.pathname);
  } catch {
    // Served from an origin SVC_FRONTEND_URLS does not list (svc's own port): the provider's way back goes to `/`.
  }
  location.assign(svc.oauthLoginUrl(providerId));
}

function notAllowedPage(): void {
  page(
    'Not allowed',
    h('p', {}, `You are signed in as ${me?.user.email ?? 'a user'}, who is not an administrator. The console is for administrators only.`),
    h('div', { class: 'actions' }, actionButton('Sign out', signOut)),
  );
}

// ---------------------------------------------------------------------------------------------
// Routing

async function route(): Promise<void> {
  const run = ++routes;
  clearMessages();
  const [path = '', ...params] = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  try {
    me ??= await svc.currentSession({ user: true });
    // Once, though route() runs twice at once after a login (its own call and the hashchange).
    if (me?.isAdmin) await (pluginsAdded ??= pluginsOn(apiBase).then((on) => void PAGES.push(...pluginPages(on))));
  } catch (e) {
    navigation('');
    page('The service cannot be reached');
    showError(e);
    return;
  }
  // A newer navigation came while this one waited (after a login, or a link followed during the first load): it draws the page.
  if (run !== routes) return;
  navigation(path);
  if (!me) return loginPage();
  if (!me.isAdmin) return notAllowedPage();
  const target = PAGES.find((p) => p.path === path);
  if (!target) {
    location.replace('#/users');
    return;
  }
  page(target.title, h('p', {}, 'Loading…'));
  try {
    await target.show(params);
  } catch (e) {
    // The session ended meanwhile (expired, ended elsewhere): back to the sign-in page.
    if (e instanceof SvcError && e.status === 401) {
      me = null;
      return route();
    }
    showError(e);
  }
}
let pluginsAdded: Promise<void> | undefined;
let routes = 0;

window.addEventListener('hashchange', () => void route());
void route();
