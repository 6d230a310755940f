// The smallest frontend that uses svc the way SPEC.md describes: cookies only (credentials: 'include'),
// a login page at /login (password form and one button per OAuth provider, return path through
// /api/auth/oauth/return-to), `?auth_error=<code>` shown as a snackbar and removed from the address bar.
// And the pages of README "Sign-up and recovery": /signup, /forgot-password, /login/mail (ask for a
// login link), and the three pages links in mails open: /verify-email, /reset-password, /login/link.
// Those read the token from their URL and POST it only when the person acts (a button, a form): a page
// load never uses a token, as mail scanners load links, some of them running scripts.

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
    if (res.status === 200) return location.assign(returnTo);
    const error = await res.json().catch(() => null);
    show(error?.error?.message ?? `The server answered ${res.status}`);
    document.getElementById('resend')?.remove();
    if (error?.error?.code === 'email_not_verified') form.after(resendConfirmation(email.value));
  });
  const providers = element('div', { id: 'providers' });
  const more = element(
    'p',
    { id: 'more' },
    element('a', { href: '/forgot-password' }, 'Forgot your password?'),
    ' · ',
    element('a', { href: '/signup' }, 'Sign up'),
    ' · ',
    element('a', { href: '/login/mail' }, 'Log in by mail'),
  );
  main.replaceChildren(element('h1', {}, 'Sign in'), form, more, providers);

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

// ---------------------------------------------------------------------------------------------
// Sign-up and recovery (README "Sign-up and recovery")

/** A page with a heading and a one-field-or-more form whose submit calls `send(values)`. */
function formPage(title, fields, buttonLabel, send) {
  document.title = title;
  const inputs = fields.map(([name, type, autocomplete]) => element('input', { type, name, autocomplete, required: true }));
  const form = element(
    'form',
    { id: 'form' },
    ...fields.map(([, , , label], i) => element('label', {}, label, inputs[i])),
    element('button', { type: 'submit' }, buttonLabel),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    await send(Object.fromEntries(fields.map(([name], i) => [name, inputs[i].value])));
  });
  main.replaceChildren(element('h1', {}, title), form);
}

/** Replaces the page's content below its heading with a result and a way on. */
function result(text, link) {
  main.replaceChildren(main.querySelector('h1'), element('p', { id: 'result' }, text), ...(link ? [element('p', {}, element('a', { href: link[0] }, link[1]))] : []));
}

/** The token of a mailed link: taken from the URL, then removed from the address bar (and from history and Referer). */
function takeToken() {
  const url = new URL(location.href);
  const token = url.searchParams.get('token') ?? '';
  url.searchParams.delete('token');
  history.replaceState(history.state, '', `${url.pathname}${url.search}`);
  return token;
}

function resendConfirmation(email) {
  const button = element('button', { type: 'button', id: 'resend' }, 'Send the confirmation again');
  button.addEventListener('click', async () => {
    const res = await api('/auth/email/verify/request', { method: 'POST', body: JSON.stringify({ email }) });
    if (res.status === 202) result('If the address has an account to confirm, a mail is on its way.');
    else show(await errorMessage(res));
  });
  return button;
}

function renderSignup() {
  const fields = [
    ['email', 'email', 'username', 'Email'],
    ['password', 'password', 'new-password', 'Password (at least 8 characters)'],
  ];
  formPage('Sign up', fields, 'Sign up', async (body) => {
    const res = await api('/auth/signup', { method: 'POST', body: JSON.stringify(body) });
    if (res.status === 202) result('Check your mail: follow the link in it to confirm your address.');
    else show(await errorMessage(res));
  });
}

function renderForgot() {
  formPage('Forgot your password?', [['email', 'email', 'username', 'Email']], 'Send me a link', async (body) => {
    const res = await api('/auth/password/forgot', { method: 'POST', body: JSON.stringify(body) });
    if (res.status === 202) result('If the address has an account, a mail with a link is on its way.');
    else show(await errorMessage(res));
  });
}

function renderMagicLinkRequest() {
  formPage('Log in by mail', [['email', 'email', 'username', 'Email']], 'Send me a login link', async (body) => {
    const res = await api('/auth/login/link', { method: 'POST', body: JSON.stringify(body) });
    if (res.status === 202) result('If the address has an account, a mail with a login link is on its way: open it in this browser.');
    else show(await errorMessage(res));
  });
}

function renderReset() {
  const token = takeToken();
  formPage('Choose a new password', [['newPassword', 'password', 'new-password', 'New password (at least 8 characters)']], 'Set the password', async (body) => {
    const res = await api('/auth/password/reset', { method: 'POST', body: JSON.stringify({ token, newPassword: body.newPassword }) });
    if (res.status === 204) result('Your password was changed. Every session of your account was ended.', ['/login', 'Sign in']);
    else show(await errorMessage(res)); // invalid_token: ask for a new link; validation_failed: the same link still works
  });
}

/** A landing page of a mailed link: one button that POSTs the token. */
function renderLanding(title, buttonLabel, send) {
  document.title = title;
  const token = takeToken();
  const button = element('button', { type: 'button', id: 'use-link' }, buttonLabel);
  button.addEventListener('click', () => send(token));
  main.replaceChildren(element('h1', {}, title), button);
}

function renderVerify() {
  renderLanding('Confirm your address', 'Confirm my address', async (token) => {
    const res = await api('/auth/email/verify', { method: 'POST', body: JSON.stringify({ token }) });
    if (res.status === 200) result(`${(await res.json()).email} is confirmed.`, ['/login', 'Sign in']);
    else show(await errorMessage(res));
  });
}

function renderMagicLink() {
  renderLanding('Log in', 'Log in', async (token) => {
    const res = await api('/auth/login/link/verify', { method: 'POST', body: JSON.stringify({ token }) });
    if (res.status !== 200) return show(await errorMessage(res));
    if ((await res.json()).mfaRequired) return result('Enter the code of your authenticator app (this test frontend has no page for it).');
    location.assign('/');
  });
}

const PUBLIC_PAGES = {
  '/signup': renderSignup,
  '/forgot-password': renderForgot,
  '/login/mail': renderMagicLinkRequest,
  '/reset-password': renderReset,
  '/verify-email': renderVerify,
  '/login/link': renderMagicLink,
};

async function start() {
  const url = new URL(location.href);
  const authError = url.searchParams.get('auth_error');
  if (authError !== null) {
    show(AUTH_ERRORS[authError] ?? `Sign-in failed (${authError}).`);
    url.searchParams.delete('auth_error');
    history.replaceState(history.state, '', `${url.pathname}${url.search}${url.hash}`);
  }
  if (location.pathname === '/login') return renderLogin(safePath(url.searchParams.get('redirect')));
  if (Object.hasOwn(PUBLIC_PAGES, location.pathname)) return PUBLIC_PAGES[location.pathname]();
  const res = await api('/auth/session?expand=user');
  if (res.status === 200) return renderSignedIn(await res.json());
  if (res.status === 401) return renderLogin(safePath(location.pathname));
  show(await errorMessage(res));
}

start().catch((err) => show(String(err)));
