// The smallest frontend that uses svc the way SPEC.md describes: cookies only (credentials: 'include'),
// a login page at /login (password form and one button per OAuth provider, return path through
// /api/auth/oauth/return-to), `?auth_error=<code>` shown as a snackbar and removed from the address bar.

const API = `${window.SVC_API ?? ''}/api`;
const main = document.getElementById('main');
const who = document.getElementById('who');
const snackbar = document.getElementById('snackbar');

const AUTH_ERRORS = {
  access_denied: 'Sign-in was cancelled at the identity provider.',
  account_exists: 'An account with this email already exists: sign in with your password, then link this provider.',
  no_email: 'The identity provider did not tell us your email address.',
  invalid_state: 'This sign-in link is no longer valid: please try again.',
  provider_not_found: 'This sign-in method is not available.',
};

function api(path, init = {}) {
  const headers = init.body === undefined ? {} : { 'content-type': 'application/json' };
  return fetch(`${API}${path}`, { credentials: 'include', ...init, headers: { ...headers, ...init.headers } });
}

function show(message) {
  snackbar.textContent = message;
  snackbar.hidden = false;
}

/** A same-site path, else '/' (the server checks again; this keeps the page from going elsewhere). */
function safePath(value) {
  return typeof value === 'string' && value.startsWith('/') && !value.startsWith('//') && !value.startsWith('/\\') ? value : '/';
}

function element(tag, attrs = {}, ...children) {
  const node = Object.assign(document.createElement(tag), attrs);
  node.append(...children);
  return node;
}

async function errorMessage(res) {
  try {
    return (await res.json()).error.message;
  } catch {
    return `The server answered ${res.status}`;
  }
}

async function renderLogin(returnTo) {
  document.title = 'Sign in';
  const email = element('input', { type: 'email', name: 'email', autocomplete: 'username', required: true });
  const password = element('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true });
  const form = element(
    'form',
    { id: 'login' },
    element('label', {}, 'Email', email),
    element('label', {}, 'Password', password),
    element('button', { type: 'submit' }, 'Sign in'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const res = await api('/auth/login', { method: 'POST', body: JSON.stringify({ email: email.value, password: password.value }) });
    if (res.status === 200) location.assign(returnTo);
    else show(await errorMessage(res));
  });
  const providers = element('div', { id: 'providers' });
  main.replaceChildren(element('h1', {}, 'Sign in'), form, providers);

  const list = await api('/auth/oauth/providers');
  if (list.status !== 200) return;
  for (const provider of await list.json()) {
    const button = element('button', { type: 'button', className: 'provider' }, `Sign in with ${provider.label}`);
    button.addEventListener('click', async () => {
      // The return path travels in an HttpOnly cookie set by svc, bound to this page by a CSRF token.
      const csrf = await api('/auth/oauth/return-to/csrf');
      const { csrfToken } = await csrf.json();
      const stored = await api('/auth/oauth/return-to', {
        method: 'POST',
        headers: { 'x-svc-oauth-return-to-csrf': csrfToken },
        body: JSON.stringify({ returnTo }),
      });
      if (stored.status !== 204) return show(await errorMessage(stored));
      location.assign(`${API}/auth/oauth/${encodeURIComponent(provider.providerId)}`);
    });
    providers.append(button);
  }
}

function renderSignedIn(session) {
  const page = location.pathname === '/' ? 'Home' : location.pathname.slice(1);
  document.title = page;
  who.textContent = `Signed in as ${session.user.email}`;
  const logout = element('button', { id: 'logout', type: 'button' }, 'Log out');
  const logoutAll = element('button', { id: 'logout-all', type: 'button' }, 'Log out everywhere');
  const end = (path) => async () => {
    const res = await api(path, { method: 'POST' });
    if (res.status !== 204) return show(await errorMessage(res));
    who.textContent = '';
    main.replaceChildren(element('h1', {}, 'Signed out'), element('p', {}, element('a', { href: '/login' }, 'Sign in again')));
  };
  logout.addEventListener('click', end('/auth/logout'));
  logoutAll.addEventListener('click', end('/auth/logout-all'));
  main.replaceChildren(element('h1', { id: 'page' }, page), element('p', {}, `Provider: ${session.provider}`), logout, logoutAll);
}

async function start() {
  const url = new URL(location.href);
  const authError = url.searchParams.get('auth_error');
  if (authError !== null) {
    show(AUTH_ERRORS[authError] ?? `Sign-in failed (${authError}).`);
    url.searchParams.delete('auth_error');
    history.replaceState(history.state, '', `${url.pathname}${url.search}${url.hash}`);
  }
  if (location.pathname === '/login') return renderLogin(safePath(url.searchParams.get('redirect')));
  const res = await api('/auth/session?expand=user');
  if (res.status === 200) return renderSignedIn(await res.json());
  if (res.status === 401) return renderLogin(safePath(location.pathname));
  show(await errorMessage(res));
}

start().catch((err) => show(String(err)));
