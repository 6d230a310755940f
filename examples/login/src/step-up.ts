// Step-up (CONTRACT 10): a dialog that asks for the password, a TOTP code or a passkey, shared by the
// example login UI and the admin console (one dialog, one set of words).

import { SvcError, type Proof, type SvcClient } from '@svc/client';
import { clearFieldErrors, field, h, markInvalid, showError } from './dom.ts';

/** What the dialog says of a proof svc did not take (the page's own words for the wrong answers). */
const STEP_UP_ERRORS: Record<string, string> = {
  invalid_credentials: 'That password is wrong. Try again, or use a code or a passkey.',
  invalid_code: 'That code is wrong or was used already. Try the next code your app shows.',
};

/**
 * Opens the dialog, which sends the proof itself (`POST /auth/reauthenticate`). A wrong answer is said in
 * the dialog, beside the field it concerns, and the dialog stays open for another try; it closes only
 * once svc took a proof (resolves true) or when the person cancels (false; Escape too).
 */
function stepUp(svc: SvcClient, stepUpDialog: HTMLDialogElement): Promise<boolean> {
  return new Promise((resolve) => {
    const error = h('p', { id: 'step-up-error', class: 'dialog-error', role: 'alert' });
    const finish = (done: boolean) => {
      stepUpDialog.oncancel = null;
      stepUpDialog.close();
      resolve(done);
    };
    const password = field('Password', { name: 'password', type: 'password', autocomplete: 'current-password' });
    const code = field('Or a code from your authenticator app', { name: 'code', inputmode: 'numeric', autocomplete: 'one-time-code', pattern: '[0-9]{6}' });
    const buttons = h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit' }, 'Confirm'),
      h('button', { type: 'button', onclick: () => void attempt({ passkey: true }) }, 'Use a passkey'),
      h('button', { type: 'button', class: 'secondary', onclick: () => finish(false) }, 'Cancel'),
    );
    const proofForm = h('form', { 'aria-label': 'Confirm it is you', novalidate: true }, error, password, code, buttons);
    const input = (name: string) => proofForm.querySelector<HTMLInputElement>(`input[name="${name}"]`)!;
    let busy = false;

    /** Sends `proof`; a refusal is said in the dialog (the field it concerns marked and focused), which stays open. */
    async function attempt(proof: Proof): Promise<void> {
      if (busy) return;
      busy = true;
      proofForm.setAttribute('aria-busy', 'true');
      error.textContent = '';
      clearFieldErrors(proofForm);
      try {
        await svc.reauthenticate(proof);
        finish(true);
      } catch (e) {
        const wrong = e instanceof SvcError ? STEP_UP_ERRORS[e.code] : undefined;
        if (!wrong) showError(e, { scope: proofForm, region: error });
        else {
          error.textContent = wrong;
          const refused = input('code' in proof ? 'code' : 'password');
          markInvalid(refused, error.id);
          refused.select();
          refused.focus();
        }
      } finally {
        busy = false;
        proofForm.removeAttribute('aria-busy');
      }
    }

    proofForm.addEventListener('submit', (event) => {
      event.preventDefault();
      const typedCode = input('code').value.trim();
      const typedPassword = input('password').value;
      if (!typedCode && !typedPassword) {
        clearFieldErrors(proofForm);
        error.textContent = 'Enter your password, or a code from your authenticator app.';
        markInvalid(input('password'), error.id);
        input('password').focus();
        return;
      }
      void attempt(typedCode ? { code: typedCode } : { password: typedPassword });
    });
    stepUpDialog.replaceChildren(h('h2', { id: 'step-up-title' }, 'Confirm it is you'), h('p', {}, 'This change needs a recent sign-in.'), proofForm);
    stepUpDialog.setAttribute('aria-labelledby', 'step-up-title');
    stepUpDialog.oncancel = () => finish(false); // Escape
    stepUpDialog.showModal();
  });
}

/**
 * Runs `action`; when svc wants a fresh login first (403 `reauthentication_required`), the dialog asks for
 * one (as many tries as the person needs), then `action` runs again. Cancelled: the 403 is announced.
 */
export function stepUpRunner(svc: SvcClient, dialog: HTMLDialogElement): <T>(action: () => Promise<T>) => Promise<T> {
  return async (action) => {
    try {
      return await action();
    } catch (e) {
      if (!(e instanceof SvcError && e.code === 'reauthentication_required')) throw e;
      if (!(await stepUp(svc, dialog))) throw e;
      return action();
    }
  };
}
