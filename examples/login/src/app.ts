// The reference login UI of svc (issue 38): plain TypeScript on @svc/client, one page per path.
// Paths: /login (password + second step, passkey, OAuth buttons), /login/link (magic link),
// /signup, /verify-email, /forgot-password, /reset-password (the mail links of docs/email.md land on
// the last three and /login/link), /account (sessions, password, TOTP, passkeys, connected accounts, API keys),
// /device (a command-line tool's device login: docs/api-keys.md#device-login), /not-me (the "this wasn't me"
// link of a new-device notice: docs/security.md#new-device-notices-and-this-wasnt-me).
// Anything that needs a fresh login asks for it in a dialog (step-up) and then goes on.

import { createClient, isLoggedIn, SvcError, type LoginResult, type OAuthProvider, type Passkey, type Session } from '@svc/client';
import { actionButton, appName, clearMessages, field, form, h, link, page, say, showError } from './dom.ts';
import { secondStepForm } from './second-step.ts';
import { stepUpRunner } from './step-up.ts';

declare global {
  interface Window {
    /** Set by /config.js: where the API is (`/api` behind the proxy, `http://localhost:3000/api` from `npm run example`). */
    SVC_API_BASE?: string;
    /** Set by /config.js: the app's name (`app.name` of svc's config; build.ts), in the title and the header. */
    SVC_APP_NAME?: string;
    /**
     * Set by /config.js when the captcha provider's script comes from elsewhere than the provider (a mirror,
     * a test's fake on loopback): its full URL (build.ts `captchaScript`). A CSP must allow its origin.
     */
    SVC_CAPTCHA_SCRIPT?: string;
  }
}

const svc = createClient({ baseUrl: window.SVC_API_BASE ?? '/api' });
const params = new URLSearchParams(location.search);

/** Messages for `?auth_error=<code>` (docs/oauth.md) after an OAuth journey. */
const AUTH_ERRORS: Record<string, string> = {
  access_denied: 'The sign-in was cancelled at the provider.',
  account_exists: 'An account with this email exists: sign in with your password, and your account page offers to connect this provider.',
  identity_in_use: 'That account of the provider is already connected to another user.',
  no_email: 'The provider did not share an email address.',
  invalid_state: 'The sign-in took too long or was started in another browser. Try again.',
};

/** Where to go after a login: a same-site path from `?next=`, else the account page. */
function next(result?: LoginResult): string {
  const wanted = (result && isLoggedIn(result) && result.returnTo) || params.get('next') || '/account';
  return /^\/(?![/\\])/.test(wanted) ? wanted : '/account';
}

/** Runs `action`, asking for a fresh login in the step-up dialog when svc wants one first. */
const fresh = stepUpRunner(svc, document.getElementById('step-up') as HTMLDialogElement);

// ---------------------------------------------------------------------------------------------
// Login

/** The second step of a login (TOTP code or a recovery code); resolves when signed in. */
function secondStep(): void {
  clearMessages(); // e.g. "Checking your sign-in link…" of the magic link that led here
  page('Two-step verification', ...secondStepForm(svc, (result) => location.assign(next(result))), link('/login', 'Back to sign in'));
}

/** After any first step: the second step, or on to the next page. */
function afterLogin(result: LoginResult): void {
  if (isLoggedIn(result)) location.assign(next(result));
  else secondStep();
}

function oauthButtons(providers: OAuthProvider[]): HTMLElement | null {
  if (!providers.length) return null;
  return h(
    'section',
    { 'aria-labelledby': 'oauth-title' },
    h('h2', { id: 'oauth-title' }, 'Or continue with'),
    h(
      'div',
      { class: 'oauth' },
      ...providers.map((p) => actionButton(`Continue with ${p.label}`, () => svc.startOAuthLogin(p.providerId, { returnTo: next() }))),
    ),
  );
}

async function loginPage(): Promise<void> {
  // An OAuth login of a user with TOTP on comes back here for the code (docs/account.md).
  if (params.get('mfa') === 'totp') return secondStep();
  const providers = await svc.oauthProviders().catch(() => []);
  page(
    'Sign in',
    form(
      {
        label: 'Sign in with email and password',
        submit: 'Sign in',
        action: async ({ email = '', password = '' }) => {
          try {
            afterLogin(await withCaptcha((captchaToken) => svc.login(captchaToken ? { email, password, captchaToken } : { email, password })));
          } catch (e) {
            if (e instanceof SvcError && e.code === 'email_not_verified') offerConfirmationAgain(email);
            throw e;
          }
        },
      },
      field('Email', { name: 'email', type: 'email', autocomplete: 'username webauthn', required: true }),
      field('Password', { name: 'password', type: 'password', autocomplete: 'current-password', required: true }),
      h('div', { id: 'captcha' }),
    ),
    h('div', { id: 'resend' }),
    h('div', { class: 'actions' }, actionButton('Sign in with a passkey', async () => afterLogin(await svc.loginWithPasskey()))),
    oauthButtons(providers),
    h(
      'nav',
      { 'aria-label': 'Other ways' },
      h('ul', {}, h('li', {}, link('/forgot-password', 'Forgot your password?')), h('li', {}, link('/login/link', 'Email me a sign-in link')), h('li', {}, link('/signup', 'Create an account'))),
    ),
  );
}

/** The three providers' widget scripts (explicit rendering) and their global objects; all share `render(el, {sitekey, callback})`. */
const CAPTCHA_SCRIPTS = {
  turnstile: ['https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit', 'turnstile'],
  hcaptcha: ['https://js.hcaptcha.com/1/api.js?render=explicit', 'hcaptcha'],
  recaptcha: ['https://www.google.com/recaptcha/api.js?render=explicit', 'grecaptcha'],
} as const;
interface CaptchaWidgets {
  render(el: HTMLElement, opts: { sitekey: string; callback: (token: string) => void; 'expired-callback'?: () => void }): unknown;
  reset?(id?: unknown): void;
}
/** The token of the solved widget, sent with the next try; the widget id and its box, once rendered. */
const captcha: { token?: string; widget?: unknown; box?: HTMLElement; provider?: keyof typeof CAPTCHA_SCRIPTS } = {};

/**
 * Sends a request that svc may refuse with `captcha_required` (login, sign-up, forgot-password, magic
 * link: docs/security.md#captcha-on-risk), with the solved widget's token when there is one. Failed logins
 * came from here before: the widget appears only then, in the form's `#captcha`. A token works once at the
 * provider: any answer to a try that sent one asks for a new solve.
 */
async function withCaptcha<T>(send: (captchaToken: string | undefined) => Promise<T>): Promise<T> {
  const captchaToken = captcha.token;
  try {
    return await send(captchaToken);
  } catch (e) {
    if (e instanceof SvcError && (e.code === 'captcha_required' || e.code === 'captcha_failed' || captchaToken)) await showCaptcha();
    throw e;
  }
}

/**
 * After `captcha_required` (or `captcha_failed`): loads the provider's script named by `GET /auth/config`
 * (never before: a caller without failed logins never loads third-party code) and shows its widget; a
 * new try after a failure needs a new solve.
 */
async function showCaptcha(): Promise<void> {
  const holder = document.getElementById('captcha');
  if (!holder) return;
  captcha.token = undefined;
  const { captcha: config } = await svc.authConfig();
  if (!config) return;
  const [providerSrc, global] = CAPTCHA_SCRIPTS[config.provider];
  const src = window.SVC_CAPTCHA_SCRIPT || providerSrc;
  const widgets = () => (window as unknown as Record<string, CaptchaWidgets | undefined>)[global];
  // Reset only a widget still on this page (another page of this app drew its own form since).
  if (captcha.widget !== undefined && captcha.provider === config.provider && captcha.box?.isConnected) return widgets()?.reset?.(captcha.widget);
  if (!widgets()) {
    await new Promise<void>((resolve, reject) => {
      const script = h('script', { src, async: true }) as HTMLScriptElement;
      script.addEventListener('load', () => resolve());
      script.addEventListener('error', () => reject(new SvcError(0, 'captcha_unavailable', 'The captcha could not be loaded; check your connection and try again.')));
      document.head.append(script);
    });
    // reCAPTCHA's object appears before it is ready: wait for `render` (a few hundred ms at most).
    for (let i = 0; i < 50 && typeof widgets()?.render !== 'function'; i++) await new Promise((r) => setTimeout(r, 100));
  }
  const box = h('div', { class: 'captcha' });
  holder.replaceChildren(h('p', {}, 'Please confirm you are a person, then try again.'), box);
  captcha.provider = config.provider;
  captcha.box = box;
  captcha.widget = widgets()?.render(box, { sitekey: config.siteKey, callback: (token) => (captcha.token = token), 'expired-callback': () => (captcha.token = undefined) });
}

/** docs/email.md: where login answers `email_not_verified`, offer the mail again. */
function offerConfirmationAgain(email: string): void {
  document.getElementById('resend')?.replaceChildren(
    actionButton('Send the confirmation again', async () => {
      await svc.requestVerification(email);
      say(`If ${email} waits for confirmation, a new link is on its way.`);
    }),
  );
}

async function magicLinkPage(): Promise<void> {
  const token = params.get('token');
  if (token) {
    history.replaceState(null, '', location.pathname); // the token leaves the address bar (and the history)
    // A click uses the token, not the page load: some mail scanners run a page's script (docs/email.md).
    page(
      'Sign in by link',
      h('p', {}, 'Sign in with the link from your mail.'),
      h(
        'div',
        { class: 'actions' },
        actionButton('Sign in', async () => {
          say('Checking your sign-in link…');
          try {
            afterLogin(await svc.verifyMagicLink(token));
          } catch (e) {
            clearMessages();
            page('Sign-in link', h('p', {}, 'This link cannot be used: it was used already, has expired, or was opened in another browser than the one that asked for it.'), link('/login/link', 'Ask for a new link'));
            throw e;
          }
        }),
      ),
    );
    return;
  }
  page(
    'Email me a sign-in link',
    form(
      {
        label: 'Ask for a sign-in link',
        submit: 'Send the link',
        action: async ({ email = '' }) => {
          await withCaptcha((captchaToken) => svc.requestMagicLink(email, captchaToken));
          say(`If ${email} has an account, a sign-in link is on its way. Open it in this browser.`);
        },
      },
      field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true }),
      h('div', { id: 'captcha' }),
    ),
    link('/login', 'Back to sign in'),
  );
}

// ---------------------------------------------------------------------------------------------
// Sign-up, verification, forgot/reset

function signupPage(): void {
  page(
    'Create an account',
    form(
      {
        label: 'Create an account',
        submit: 'Create account',
        action: async ({ email = '', password = '', firstname, lastname }) => {
          await withCaptcha((captchaToken) => svc.signup({ email, password, ...(firstname ? { firstname } : {}), ...(lastname ? { lastname } : {}), ...(captchaToken ? { captchaToken } : {}) }));
          page('Check your mail', h('p', {}, `We sent a link to ${email}. Follow it to confirm your address, then sign in.`), link('/login', 'Sign in'));
          say('Account requested: check your mail.');
        },
      },
      field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true }),
      field('Password', { name: 'password', type: 'password', autocomplete: 'new-password', minlength: '8', required: true }, 'At least 8 characters.'),
      field('First name (optional)', { name: 'firstname', autocomplete: 'given-name' }),
      field('Last name (optional)', { name: 'lastname', autocomplete: 'family-name' }),
      h('div', { id: 'captcha' }),
    ),
    link('/login', 'I have an account'),
  );
}

async function verifyEmailPage(): Promise<void> {
  const token = params.get('token');
  const resend = form(
    {
      label: 'Send a new confirmation link',
      submit: 'Send a new link',
      action: async ({ email = '' }) => {
        await svc.requestVerification(email);
        say(`If ${email} waits for confirmation, a new link is on its way.`);
      },
    },
    field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true }),
  );
  if (!token) return page('Confirm your email', resend);
  // A click uses the token, not the page load: some mail scanners run a page's script (docs/email.md).
  // The token leaves the address bar (history, screenshots).
  history.replaceState(null, '', location.pathname);
  page(
    'Confirm your email',
    h('p', {}, 'Confirm that this address is yours.'),
    form(
      {
        label: 'Confirm your email',
        submit: 'Confirm my address',
        action: async ({ password = '' }) => {
          let answer: Awaited<ReturnType<typeof svc.verifyEmail>>;
          try {
            answer = await svc.verifyEmail(token, password || undefined);
          } catch (e) {
            // A wrong sign-up password keeps the page (the link still works); anything else killed the link.
            if (!(e instanceof SvcError && (e.code === 'invalid_credentials' || e.code === 'too_many_attempts'))) page('Confirm your email', h('p', {}, 'This link cannot be used any more.'), resend);
            throw e;
          }
          if (answer.passwordResetToken) return choosePasswordPage(answer.email, answer.passwordResetToken);
          page('Email confirmed', h('p', {}, `${answer.email} is confirmed. You can sign in now.`), link('/login', 'Sign in'));
          say('Email confirmed.');
        },
      },
      field(
        'Your sign-up password (optional)',
        { name: 'password', type: 'password', autocomplete: 'current-password' },
        'Only if you signed up in another browser and want to keep that password. Otherwise leave it empty.',
      ),
    ),
  );
}

/**
 * The verification was a claim (CONTRACT 12): this browser did not sign up, so whatever password the
 * sign-up had is gone (it may have been a stranger's). The answer's token sets the owner's own.
 */
function choosePasswordPage(email: string, token: string): void {
  page(
    'Choose your password',
    h('p', {}, `${email} is confirmed. The account was signed up from another browser, so its password was removed: choose yours now.`),
    form(
      {
        label: 'Choose your password',
        submit: 'Set password',
        action: async ({ newPassword = '' }) => {
          await svc.resetPassword({ token, newPassword });
          page('Email confirmed', h('p', {}, `${email} is confirmed and your password is set. You can sign in now.`), link('/login', 'Sign in'));
          say('Email confirmed and password set.');
        },
      },
      field('New password', { name: 'newPassword', type: 'password', autocomplete: 'new-password', minlength: '8', required: true }, 'At least 8 characters.'),
    ),
  );
}

/** A reset link that cannot be used: say so, and offer a new one before anyone types a password. */
const DEAD_RESET_LINK = {
  title: 'Ask for a new link',
  why: 'This link cannot be used any more: it was used already, has expired, or the password changed since. Send yourself a new one.',
  submit: 'Send me a new link',
};

function forgotPage(dead?: typeof DEAD_RESET_LINK): void {
  page(
    dead?.title ?? 'Forgot your password?',
    ...(dead ? [h('p', { id: 'dead-link' }, dead.why)] : []),
    form(
      {
        label: 'Ask for a reset link',
        submit: dead?.submit ?? 'Send a reset link',
        action: async ({ email = '' }) => {
          await withCaptcha((captchaToken) => svc.forgotPassword(email, captchaToken));
          say(`If ${email} has an account, a link to choose a new password is on its way.`);
        },
      },
      field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true }),
      h('div', { id: 'captcha' }),
    ),
    link('/login', 'Back to sign in'),
  );
}

async function resetPage(): Promise<void> {
  const token = params.get('token');
  if (!token) return forgotPage();
  history.replaceState(null, '', location.pathname);
  // Whether the link still works, asked on load: the check never uses the token (a mail scanner that runs
  // this script spends nothing), and a dead link offers a new one before anyone types a password.
  let unchecked: unknown;
  try {
    await svc.checkResetToken(token);
  } catch (e) {
    if (e instanceof SvcError && e.code === 'invalid_token') return forgotPage(DEAD_RESET_LINK);
    unchecked = e; // no answer (offline, too many requests): the form still tries, and says why it may fail
  }
  page(
    'Choose a new password',
    form(
      {
        label: 'Choose a new password',
        submit: 'Set password',
        action: async ({ newPassword = '' }) => {
          try {
            await svc.resetPassword({ token, newPassword });
          } catch (e) {
            // A dead link (used, expired, outdated): no new password can be set with it, so offer a new
            // link (docs/email.md). A too short password keeps the form: the same link still works.
            if (e instanceof SvcError && e.code === 'invalid_token') forgotPage(DEAD_RESET_LINK);
            throw e;
          }
          page('Password changed', h('p', {}, 'Your password is changed and every session has ended. Sign in with the new password.'), link('/login', 'Sign in'));
          say('Password changed.');
        },
      },
      field('New password', { name: 'newPassword', type: 'password', autocomplete: 'new-password', minlength: '8', required: true }, 'At least 8 characters.'),
    ),
  );
  if (unchecked) showError(unchecked);
}

/**
 * `/not-me?token=`: the link of a new-device notice. Nothing happens on load (mail scanners open links,
 * some run scripts): the person confirms with the button, which POSTs the token.
 */
function notMePage(): void {
  const token = params.get('token');
  history.replaceState(null, '', location.pathname);
  if (!token) {
    page('This was not me', h('p', {}, 'Open the link of the mail about a new login to your account.'), link('/login', 'Sign in'));
    return;
  }
  page(
    'This was not me',
    h('p', {}, 'Someone logged in to your account from a new device. If it was not you, end that login: your password then stops working and we mail you a link to choose a new one.'),
    form(
      {
        label: 'End the login that was not me',
        submit: 'It was not me: end that login',
        action: async () => {
          try {
            await svc.notMe(token);
          } catch (e) {
            if (e instanceof SvcError && e.code === 'invalid_token') {
              page('Link used or expired', h('p', {}, 'This link was used already or is older than 7 days. To be safe, choose a new password.'), link('/forgot-password', 'Choose a new password'));
              return;
            }
            throw e;
          }
          page('Login ended', h('p', {}, 'That login has ended and your password no longer works. Follow the link we just mailed you to choose a new one, then check your account page.'), link('/forgot-password', 'No mail? Ask for a new link'));
          say('Login ended.');
        },
      },
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// Account

const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

async function sessionsSection(): Promise<HTMLElement> {
  const { items } = await svc.sessions();
  return h(
    'section',
    { 'aria-labelledby': 'sessions-title' },
    h('h2', { id: 'sessions-title' }, 'Where you are signed in'),
    h(
      'ul',
      { class: 'list', id: 'sessions' },
      ...items.map((s) =>
        h(
          'li',
          {},
          h('span', {}, h('strong', {}, s.device ?? 'Unknown device'), s.current ? ' (this browser)' : '', h('br'), `${s.ip ?? ''} · last seen ${when(s.lastSeenAt)}`),
          actionButton(
            'End',
            async () => {
              await svc.endSession(s.id);
              if (s.current) return location.assign('/login');
              say('Session ended.');
              await accountPage();
            },
            { 'aria-label': `End the session on ${s.device ?? 'unknown device'}${s.current ? ' (this browser)' : ''}` },
          ),
        ),
      ),
    ),
  );
}

/** The account's name in a password form, hidden: password managers file the password under it. */
const usernameOf = (session: Session) =>
  h('input', { type: 'text', name: 'username', autocomplete: 'username', value: session.user?.email ?? '', hidden: true, readonly: true, tabindex: '-1', 'aria-hidden': 'true' });

function passwordSection(session: Session): HTMLElement {
  return h(
    'section',
    { 'aria-labelledby': 'password-title' },
    h('h2', { id: 'password-title' }, 'Password'),
    form(
      {
        label: 'Change password',
        submit: 'Change password',
        action: async ({ currentPassword = '', newPassword = '' }, el) => {
          await svc.changePassword({ currentPassword, newPassword });
          el.reset();
          say('Password changed; your other sessions have ended.');
        },
      },
      usernameOf(session),
      field('Current password', { name: 'currentPassword', type: 'password', autocomplete: 'current-password', required: true }),
      field('New password', { name: 'newPassword', type: 'password', autocomplete: 'new-password', minlength: '8', required: true }),
    ),
  );
}

function totpSection(session: Session): HTMLElement {
  const body = h('div', { id: 'totp' });
  const section = h('section', { 'aria-labelledby': 'totp-title' }, h('h2', { id: 'totp-title' }, 'Two-step verification'), body);
  if (session.totp) {
    body.append(
      h('p', {}, 'On: signing in asks for a code from your authenticator app.'),
      form(
        {
          label: 'Turn two-step verification off',
          submit: 'Turn off',
          // A code works for every account, also one without a password (made by an OAuth login).
          action: async ({ password = '', code = '' }) => {
            const proof = code.trim() ? { code: code.trim() } : { password };
            // A step-up the session needs first takes the password given here (not asked twice); a code
            // works once, so after a code the dialog asks for another proof.
            const disable = () => svc.totpDisable(proof);
            await ('password' in proof ? svc.withStepUp(disable, async () => proof) : fresh(disable));
            say('Two-step verification is off.');
            await accountPage();
          },
        },
        usernameOf(session),
        field('Password', { name: 'password', type: 'password', autocomplete: 'current-password' }),
        field('Or a code from your authenticator app', { name: 'code', inputmode: 'numeric', autocomplete: 'one-time-code', pattern: '[0-9]{6}' }),
      ),
    );
    return section;
  }
  body.append(
    h('p', {}, 'Off.'),
    actionButton('Turn on', async () => {
      const { qrCode, otpauthUri } = await fresh(() => svc.totpEnroll());
      body.replaceChildren(
        h('p', {}, 'Scan this code with your authenticator app, then enter the 6-digit code it shows.'),
        h('img', { src: qrCode, alt: 'QR code for your authenticator app', id: 'totp-qr', width: '200', height: '200' }),
        h(
          'details',
          {},
          h('summary', {}, 'Cannot scan? Enter the key by hand'),
          h('p', {}, 'Key: ', h('code', { id: 'totp-key' }, (new URL(otpauthUri).searchParams.get('secret') ?? '').replace(/(.{4})(?=.)/g, '$1 '))),
          h('p', {}, 'Or, in an app that takes one, the whole address: ', h('code', { id: 'otpauth-uri' }, otpauthUri)),
        ),
        form(
          {
            label: 'Confirm two-step verification',
            submit: 'Confirm',
            action: async ({ code = '' }) => {
              const { recoveryCodes } = await fresh(() => svc.totpConfirm(code.trim()));
              body.replaceChildren(
                h('p', {}, 'On. Keep these recovery codes somewhere safe: each works once if you lose your device. They are shown only now.'),
                h('ul', { id: 'recovery-codes', class: 'codes' }, ...recoveryCodes.map((c) => h('li', {}, h('code', {}, c)))),
                actionButton('Done', () => accountPage()),
              );
              say('Two-step verification is on.');
            },
          },
          field('Code', { name: 'code', inputmode: 'numeric', autocomplete: 'one-time-code', pattern: '[0-9]{6}', required: true }),
        ),
      );
      body.querySelector('input')?.focus();
    }),
  );
  return section;
}

/** Swaps the passkey's row for a form with its name, focused; Save renames it, Cancel puts the row back. */
async function renamePasskey(passkey: Passkey): Promise<void> {
  const row = document.querySelector(`#passkeys li[data-id="${CSS.escape(passkey.id)}"]`)!;
  const rename = form(
    {
      label: `Rename passkey ${passkey.name}`,
      submit: 'Save',
      action: async ({ name = '' }) => {
        const renamed = await svc.renamePasskey(passkey.id, name.trim());
        say(`Passkey renamed to ${renamed.name}.`);
        await accountPage();
      },
    },
    field('New name', { name: 'name', value: passkey.name, autocomplete: 'off', maxlength: '64', required: true }),
  );
  rename.querySelector('.actions')!.append(actionButton('Cancel', () => accountPage()));
  row.replaceChildren(rename);
  row.querySelector('input')?.focus();
}

async function passkeysSection(): Promise<HTMLElement> {
  const { items } = await svc.passkeys();
  return h(
    'section',
    { 'aria-labelledby': 'passkeys-title' },
    h('h2', { id: 'passkeys-title' }, 'Passkeys'),
    items.length
      ? h(
          'ul',
          { class: 'list', id: 'passkeys' },
          ...items.map((p) =>
            h(
              'li',
              { 'data-id': p.id },
              h('span', {}, h('strong', {}, p.name), h('br'), `added ${when(p.createdAt)}, last used ${when(p.lastUsedAt)}`),
              actionButton('Rename', () => renamePasskey(p), { 'aria-label': `Rename passkey ${p.name}` }),
              actionButton(
                'Remove',
                async () => {
                  await fresh(() => svc.deletePasskey(p.id));
                  say(`Passkey ${p.name} removed.`);
                  await accountPage();
                },
                { 'aria-label': `Remove passkey ${p.name}` },
              ),
            ),
          ),
        )
      : h('p', {}, 'None yet.'),
    form(
      {
        label: 'Add a passkey',
        submit: 'Add a passkey',
        action: async ({ name = '' }) => {
          const added = await fresh(() => svc.registerPasskey(name.trim() || undefined));
          say(`Passkey ${added.name} added.`);
          await accountPage();
        },
      },
      field('Name (optional)', { name: 'name', autocomplete: 'off', maxlength: '64' }),
    ),
  );
}

/** The user's API keys (a device login makes one): what each may do, and Revoke (docs/api-keys.md). */
async function apiKeysSection(): Promise<HTMLElement> {
  const { items } = await svc.apiKeys();
  return h(
    'section',
    { 'aria-labelledby': 'api-keys-title' },
    h('h2', { id: 'api-keys-title' }, 'API keys'),
    h('p', {}, 'Scripts and command-line tools use these; a device you approve gets one.'),
    items.length
      ? h(
          'ul',
          { class: 'list', id: 'api-keys' },
          ...items.map((k) =>
            h(
              'li',
              { 'data-id': k.id },
              h(
                'span',
                {},
                h('strong', {}, k.name),
                ` (${k.prefix}…)`,
                h('br'),
                `may ${k.scopes.length ? k.scopes.join(', ') : 'only tell who you are'}; added ${when(k.createdAt)}, last used ${when(k.lastUsedAt)}${k.expiresAt ? `, expires ${when(k.expiresAt)}` : ''}`,
              ),
              actionButton(
                'Revoke',
                async () => {
                  await fresh(() => svc.deleteApiKey(k.id));
                  say(`API key ${k.name} revoked.`);
                  await accountPage();
                },
                { 'aria-label': `Revoke API key ${k.name}` },
              ),
            ),
          ),
        )
      : h('p', {}, 'None.'),
  );
}

/** A provider's name for people ("GitHub"), its id when the list does not have it. */
const labelOf = (providers: OAuthProvider[], id: string) => providers.find((p) => p.providerId === id)?.label ?? id;

async function connectedSection(): Promise<HTMLElement> {
  const [{ items }, providers] = await Promise.all([svc.accountProviders(), svc.oauthProviders()]);
  return h(
    'section',
    { 'aria-labelledby': 'connected-title' },
    h('h2', { id: 'connected-title' }, 'Connected accounts'),
    items.length
      ? h(
          'ul',
          { class: 'list', id: 'connected' },
          ...items.map((a) =>
            h(
              'li',
              {},
              h('span', {}, h('strong', {}, labelOf(providers, a.provider)), h('br'), `${a.email ?? a.providerAccountId} · since ${when(a.linkedAt)}`),
              actionButton(
                'Disconnect',
                async () => {
                  await fresh(() => svc.unlinkProvider(a.provider, a.providerAccountId));
                  say(`${labelOf(providers, a.provider)} disconnected.`);
                  await accountPage();
                },
                { 'aria-label': `Disconnect ${labelOf(providers, a.provider)}` },
              ),
            ),
          ),
        )
      : h('p', {}, 'None.'),
    h(
      'div',
      { class: 'oauth' },
      ...providers.map((p) =>
        actionButton(`Connect ${p.label}`, async () => {
          const { authorizationUrl } = await fresh(() => svc.linkProvider(p.providerId));
          location.assign(authorizationUrl);
        }),
      ),
    ),
  );
}

/**
 * Set when an OAuth login came back with `account_exists`, the only way a pending link is made: the
 * account page asks for one only then (the link's cookie is HttpOnly, and asking every time would
 * answer 404 `no_pending_link` on every visit).
 */
const PENDING_LINK_HINT = 'svc-example:pending-link';

/** A pending link (docs/oauth.md): an identity that waits for this user to accept it. */
async function pendingLinkSection(): Promise<HTMLElement | null> {
  if (!sessionStorage.getItem(PENDING_LINK_HINT)) return null;
  const [pending, providers] = await Promise.all([svc.pendingLink().catch(() => null), svc.oauthProviders().catch(() => [])]);
  const done = () => sessionStorage.removeItem(PENDING_LINK_HINT);
  if (!pending) {
    done();
    return null;
  }
  return h(
    'section',
    { 'aria-labelledby': 'pending-title', class: 'notice' },
    h('h2', { id: 'pending-title' }, 'Connect this sign-in?'),
    h('p', {}, `Connect your ${labelOf(providers, pending.provider)} account (${pending.email}) to this account?`),
    h(
      'div',
      { class: 'actions' },
      actionButton('Connect', async () => {
        await fresh(() => svc.confirmLink());
        done();
        say('Connected.');
        await accountPage();
      }),
      actionButton('Not now', async () => {
        await svc.cancelLink();
        done();
        await accountPage();
      }),
    ),
  );
}

/**
 * For an admin: the deployment self-check's findings for this page's own requests (docs/deployment-topologies.md),
 * the same the console and `svc doctor --url` show. Nothing when there is none, or for anyone else.
 */
async function deploymentSection(session: Session): Promise<HTMLElement | null> {
  if (!session.isAdmin) return null;
  const { findings } = await svc.admin.diagnostics().catch(() => ({ findings: [] }));
  if (!findings.length) return null;
  return h(
    'section',
    { 'aria-labelledby': 'deployment-title' },
    h('h2', { id: 'deployment-title' }, 'Deployment check (admins)'),
    h('p', {}, 'svc found settings that can cost users their session:'),
    h('ul', {}, ...findings.map((f) => h('li', {}, h('strong', {}, f.code), `: ${f.message}`))),
  );
}

async function accountPage(): Promise<void> {
  const session = await svc.currentSession({ user: true });
  if (!session) return location.assign(`/login?next=${encodeURIComponent(location.pathname)}`);
  const sections = await Promise.all([pendingLinkSection(), sessionsSection(), passkeysSection(), connectedSection(), apiKeysSection(), deploymentSection(session)]);
  const status = document.getElementById('status')!.textContent;
  page(
    'Your account',
    h('p', { id: 'who' }, `Signed in as ${session.user.email}`),
    h(
      'div',
      { class: 'actions' },
      actionButton('Sign out', async () => {
        await svc.logout();
        location.assign('/login');
      }),
      actionButton('Sign out everywhere', async () => {
        await svc.logoutAll();
        location.assign('/login');
      }),
    ),
    sections[0],
    sections[1],
    passwordSection(session),
    totpSection(session),
    sections[2],
    sections[3],
    sections[4],
    sections[5],
  );
  if (status) say(status); // a page redrawn after an action keeps its announcement
}

// ---------------------------------------------------------------------------------------------
// Device login (RFC 8628): a command-line tool shows a code and this page's address
// (`verification_uri_complete` carries the code); the person checks what it asks for and approves it
// (step-up) or denies it. The tool's next poll gets an API key named after it.

async function devicePage(): Promise<void> {
  if (!(await svc.currentSession())) return location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
  const code = params.get('user_code');
  if (!code) return deviceCodeForm();
  try {
    await deviceRequest(code);
  } catch (e) {
    deviceCodeForm(code); // a mistyped or used code: the form to type it again
    throw e;
  }
}

function deviceCodeForm(typed = ''): void {
  page(
    'Sign in a device',
    h('p', {}, 'Enter the code your command-line tool shows.'),
    form(
      { label: 'Device code', submit: 'Continue', action: async ({ userCode = '' }) => deviceRequest(userCode.trim()) },
      field('Code', { name: 'userCode', value: typed, autocomplete: 'off', autocapitalize: 'characters', spellcheck: 'false', required: true }, 'Eight letters, like BCDF-GHJK; the hyphen and the case do not matter.'),
    ),
  );
}

async function deviceRequest(code: string): Promise<void> {
  const asked = await svc.pendingDevice(code);
  const done = (title: string, text: string) => page(title, h('p', {}, text), link('/account', 'Your account'));
  page(
    'Sign in a device',
    h('p', {}, 'A device asks to act as you. Approve only if you started this yourself, with this code.'),
    h(
      'dl',
      { id: 'device-request' },
      h('dt', {}, 'Name'),
      h('dd', { id: 'device-name' }, asked.name),
      h('dt', {}, 'Code'),
      h('dd', {}, code.toUpperCase()),
      h('dt', {}, 'Asked at'),
      h('dd', {}, new Date(asked.createdAt).toLocaleString()),
      h('dt', {}, 'Permissions'),
      h('dd', {}, asked.scopes.length ? h('ul', { id: 'device-scopes' }, ...asked.scopes.map((s) => h('li', {}, s))) : 'none: it can only tell who you are'),
    ),
    h(
      'div',
      { class: 'actions' },
      actionButton('Approve', async () => {
        await fresh(() => svc.approveDevice(code));
        done('Device approved', 'The device is signed in: you can go back to it. Its key is listed, and can be revoked, under your API keys.');
      }),
      actionButton('Deny', async () => {
        await svc.denyDevice(code);
        done('Device denied', 'The device was refused; nothing was signed in.');
      }),
    ),
  );
}

// ---------------------------------------------------------------------------------------------

const pages: Record<string, () => void | Promise<void>> = {
  '/login': loginPage,
  '/login/link': magicLinkPage,
  '/signup': signupPage,
  '/verify-email': verifyEmailPage,
  '/forgot-password': forgotPage,
  '/reset-password': resetPage,
  '/account': accountPage,
  '/device': devicePage,
  '/not-me': notMePage,
};

async function start(): Promise<void> {
  const authError = params.get('auth_error');
  const path = location.pathname.replace(/\/$/, '') || '/';
  // Any other path (`/` above all: svc sends every OAuth failure to `/?auth_error=<code>`) goes on to the
  // page for the caller, its query kept, so that page shows the error.
  const render = pages[path] ?? (async () => location.assign(`${(await svc.currentSession()) ? '/account' : '/login'}${location.search}`));
  try {
    await render();
  } catch (e) {
    showError(e);
  }
  if (authError === 'account_exists') sessionStorage.setItem(PENDING_LINK_HINT, '1');
  if (authError) {
    showError(new SvcError(0, authError, AUTH_ERRORS[authError] ?? `The sign-in failed (${authError}).`));
    history.replaceState(null, '', location.pathname);
  }
}

clearMessages();
document.querySelector('header .brand')!.textContent = appName();
document.title = appName();
void start();
