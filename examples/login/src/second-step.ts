// The second step of a login (CONTRACT 10: a TOTP code, or a recovery code), shared by the example login
// UI and the admin console: one form, one set of words.

import type { LoggedIn, SvcClient } from '@svc/client';
import { field, form, h } from './dom.ts';

/** The intro and the form; `done` runs with the finished login. */
export function secondStepForm(svc: SvcClient, done: (result: LoggedIn) => void | Promise<void>): HTMLElement[] {
  return [
    h('p', {}, 'Enter the 6-digit code from your authenticator app.'),
    form(
      {
        label: 'Second step',
        submit: 'Verify',
        action: async ({ code = '', recoveryCode = '' }) => done(await svc.loginTotp(code.trim() ? { code: code.trim() } : { recoveryCode: recoveryCode.trim() })),
      },
      field('Code', { name: 'code', inputmode: 'numeric', autocomplete: 'one-time-code', pattern: '[0-9]{6}' }),
      h('details', {}, h('summary', {}, 'Lost your device? Use a recovery code'), field('Recovery code', { name: 'recoveryCode', autocomplete: 'off' })),
    ),
  ];
}
