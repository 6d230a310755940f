import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config/load.ts';

/**
 * The mails svc sends (CONTRACT 12). Each has a text and an HTML part; an app overrides either with
 * `emails/<kind>.txt` or `emails/<kind>.html` in its app root, and the subject with
 * `auth.email.subjects.<kind>`.
 */
export const MAIL_KINDS = ['verify', 'reset', 'magicLink', 'signupExisting', 'passwordChanged', 'totpDisabled', 'newDevice'] as const;
export type MailKind = (typeof MAIL_KINDS)[number];

/**
 * What a template may use as `{{name}}`: the address, and for mails with a link the link and how long it
 * works; `waysIn`: the ways in a password change or reset left as they were (a passkey, a connected
 * account, TOTP), so the user can check them on the account page.
 */
export interface MailVars {
  email: string;
  /** `app.name` (every kind; empty when unset). */
  appName?: string;
  link?: string;
  validFor?: string;
  waysIn?: string;
  /** New-device notices: when (UTC), the browser and system, and the address of the login. */
  time?: string;
  device?: string;
  ip?: string;
}
const VARIABLES: Record<MailKind, (keyof MailVars)[]> = {
  verify: ['email', 'link', 'validFor'],
  reset: ['email', 'link', 'validFor'],
  magicLink: ['email', 'link', 'validFor'],
  signupExisting: ['email', 'link', 'validFor'],
  passwordChanged: ['email', 'waysIn'],
  totpDisabled: ['email'],
  newDevice: ['email', 'time', 'device', 'ip', 'link', 'validFor'],
};

const SUBJECTS: Record<MailKind, string> = {
  verify: 'Confirm your email address',
  reset: 'Reset your password',
  magicLink: 'Your login link',
  signupExisting: 'Someone tried to sign up with your address',
  passwordChanged: 'Your password was changed',
  totpDisabled: 'Two-factor authentication was turned off',
  newDevice: 'New login to your account',
};

const NOT_YOU = 'If this was not you, you can ignore this mail: nothing changes until the link is used.';
const ALARM = 'If this was not you, reset your password now and check your account: someone else may have access to it.';

/** The default texts: [paragraphs before the link, the link's label, paragraphs after it]. */
const TEXTS: Record<MailKind, [string[], string | null, string[]]> = {
  verify: [['Please confirm that {{email}} is your address.'], 'Confirm my address', ['The link works for {{validFor}}.', NOT_YOU]],
  reset: [['Someone (hopefully you) asked to reset the password of the account {{email}}.'], 'Choose a new password', ['The link works for {{validFor}}, once.', NOT_YOU]],
  magicLink: [['Use this link to log in as {{email}}, in the browser where you asked for it.'], 'Log in', ['The link works for {{validFor}}, once.', NOT_YOU]],
  signupExisting: [
    ['Someone tried to sign up with {{email}}, which already has an account. Nothing was changed.', 'If it was you and you forgot your password, you can choose a new one:'],
    'Choose a new password',
    ['The link works for {{validFor}}, once. If it was not you, you can ignore this mail.'],
  ],
  passwordChanged: [
    [
      'The password of the account {{email}} was changed, and every session of the account was ended.',
      'A new password leaves the other ways in as they were. {{waysIn}} Review them on your account page: open the site yourself and sign in (security notices never carry a link).',
      ALARM,
    ],
    null,
    [],
  ],
  totpDisabled: [['Two-factor authentication was turned off for the account {{email}}.', ALARM], null, []],
  newDevice: [
    ['Someone logged in to the account {{email}} from a device it had not used before.', 'When: {{time}}', 'Device: {{device}}', 'IP address: {{ip}}', 'If this was you, there is nothing to do.'],
    'This was not me',
    ['The link works for {{validFor}}, once: it ends that login, stops the password from working and sends you a link to choose a new one.'],
  ],
};

/** With `app.name` set, every default mail opens with it (who writes: the app the user knows, not svc). */
const named = (kind: MailKind, appName: string | undefined): [string[], string | null, string[]] => {
  const [before, label, after] = TEXTS[kind];
  return [appName ? ['{{appName}}', ...before] : before, label, after];
};

function defaultText(kind: MailKind, appName?: string): string {
  const [before, label, after] = named(kind, appName);
  return [...before, ...(label ? [`${label}: {{link}}`] : []), ...after].join('\n\n') + '\n';
}

/** Inline styles only, no images, fonts or stylesheets from elsewhere: it renders the same offline and in clients that block remote content. */
function defaultHtml(kind: MailKind, appName?: string): string {
  const [before, label, after] = named(kind, appName);
  const p = (text: string) => `<p style="margin:0 0 16px">${text}</p>`;
  const button = label
    ? `<p style="margin:0 0 16px"><a href="{{link}}" style="display:inline-block;padding:10px 18px;background:#1f4fd1;color:#ffffff;text-decoration:none;border-radius:4px">${label}</a></p>` +
      `<p style="margin:0 0 16px;font-size:13px;color:#555555">Or copy this address into your browser: {{link}}</p>`
    : '';
  return (
    '<!doctype html>\n<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"></head>' +
    '<body style="margin:0;padding:24px;font-family:Arial,Helvetica,sans-serif;font-size:15px;line-height:1.5;color:#222222;background:#ffffff">' +
    `<div style="max-width:560px">${before.map(p).join('')}${button}${after.map(p).join('')}</div></body></html>\n`
  );
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

/**
 * The templates of every kind, read once at start-up: an override that uses a variable its kind does
 * not have stops start-up (a typo would otherwise send a mail with a hole where the link should be).
 */
export class MailTemplates {
  private readonly templates = new Map<MailKind, { subject: string; text: string; html: string }>();

  private readonly appName: string | undefined;

  constructor(config: Config) {
    this.appName = config.app.name;
    const dir = path.join(config.env.appRoot, 'emails');
    for (const kind of MAIL_KINDS) {
      const read = (ext: 'txt' | 'html', fallback: string) => {
        const file = path.join(dir, `${kind}.${ext}`);
        if (!existsSync(file)) return fallback;
        const text = readFileSync(file, 'utf8');
        for (const [, name] of text.matchAll(/\{\{\s*(\w+)\s*\}\}/g)) {
          if (name !== 'appName' && !VARIABLES[kind].includes(name as keyof MailVars)) {
            throw new Error(`emails/${kind}.${ext}: unknown variable {{${name}}} (this mail has ${[...VARIABLES[kind], 'appName'].map((v) => `{{${v}}}`).join(', ')})`);
          }
        }
        return text;
      };
      const subject = config.auth.email.subjects[kind] ?? (this.appName ? `${this.appName}: ${SUBJECTS[kind]}` : SUBJECTS[kind]);
      this.templates.set(kind, { subject, text: read('txt', defaultText(kind, this.appName)), html: read('html', defaultHtml(kind, this.appName)) });
    }
  }

  /** The mail of `kind` with `vars` filled in: as they are in the text part, HTML-escaped in the HTML part. */
  render(kind: MailKind, vars: MailVars): RenderedMail {
    const t = this.templates.get(kind)!;
    const all: MailVars = { appName: this.appName ?? '', ...vars };
    const fill = (template: string, escape: (s: string) => string) => template.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name: keyof MailVars) => escape(all[name] ?? ''));
    return { subject: t.subject, text: fill(t.text, (s) => s), html: fill(t.html, escapeHtml) };
  }
}
