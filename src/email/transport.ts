import { createRequire } from 'node:module';
import type { Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';
import { isLoopback, type Config } from '../config/load.ts';
import type { Logger } from '../logger.ts';
import { MailTemplates, type MailKind, type MailVars } from './templates.ts';

/** Jobs waiting or running at once; past it a job is dropped (logged): a flood must not grow the heap. */
const MAX_PENDING = 1000;

/** `alice@example.com` -> `a***@example.com`: enough for an operator to tell mails apart, not an address list. */
export const maskAddress = (address: string) => address.replace(/^([^@]?)[^@]*@/, '$1***@');

/** An error's text without the addresses it may quote (a relay's "550 <bob@x> unknown"). */
const scrub = (message: string) => message.replace(/[^\s<>"'@]+@[^\s<>"']+/g, (a) => maskAddress(a));

/**
 * nodemailer, loaded when a mailer is configured: an instance without `SVC_SMTP_URL` does not carry it
 * (about 3 MB of heap at rest). A CommonJS package, so it loads synchronously, as the constructor needs.
 */
const loadNodemailer = () => createRequire(import.meta.url)('nodemailer') as typeof import('nodemailer');

/**
 * Mail through SMTP (CONTRACT 12): nodemailer on `SVC_SMTP_URL` (STARTTLS when the server offers it,
 * `smtps://` for TLS from the start), sender `SVC_MAIL_FROM`.
 *
 * Work that may end in a mail runs off the request path (`later`): a public route answers at once,
 * the same way for a known and an unknown address, and the lookup, the token and the SMTP round trips
 * happen after the answer. A failure is a log line (kind, masked address, the relay's reason), never
 * a token: a mail's text is never logged.
 */
export class Mailer {
  private readonly transport: Transporter<SMTPTransport.SentMessageInfo, SMTPTransport.Options> | undefined;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly templates = new MailTemplates(config),
  ) {
    const url = config.env.smtpUrl;
    // `auth.email.timeouts` (seconds): a hung relay never holds a job for long.
    const { connect, greeting, socket } = config.auth.email.timeouts;
    this.transport = url
      ? loadNodemailer().createTransport(
          {
            url,
            connectionTimeout: connect * 1000,
            greetingTimeout: greeting * 1000,
            socketTimeout: socket * 1000,
            // A relay on this host (Postfix with Debian's self-signed "snakeoil" certificate, which it offers
            // STARTTLS with) is reached over no network, so there is no one in between a certificate check
            // would keep out: its certificate is taken as it is. Anywhere else it must be valid. The URL
            // may say otherwise (`?tls.rejectUnauthorized=true`): its options win over these.
            ...(isLoopback(new URL(url).hostname) ? { tls: { rejectUnauthorized: false } } : {}),
          },
          { from: config.env.mailFrom },
        )
      : undefined;
  }

  /** The options nodemailer connects with (the URL's merged in): what tests check reached it. */
  get transportOptions(): SMTPTransport.Options {
    return (this.transport?.transporter as SMTPTransport | undefined)?.options ?? {};
  }

  /** Whether `SVC_SMTP_URL` is set. */
  get configured(): boolean {
    return this.transport !== undefined;
  }

  /**
   * Runs `job` after the current request has its answer (never awaited by it). `what` names the job in
   * the log line should it fail.
   */
  later(what: string, job: () => Promise<void>): void {
    if (this.pending.size >= MAX_PENDING) {
      this.logger.warn({ job: what }, 'too many mails waiting: this one is dropped');
      return;
    }
    const run = new Promise<void>((resolve) => setImmediate(resolve))
      .then(job)
      .catch((err: unknown) => this.logger.error({ job: what, err: scrub((err as Error).message) }, 'a mail job failed'))
      .finally(() => this.pending.delete(run));
    this.pending.add(run);
  }

  /** Says that a mail to `to` was not even tried: the address had its mails of the window (the answer was 202 all the same). */
  capped(to: string, limit: number, minutes: number): void {
    this.logger.info({ to: maskAddress(to) }, `mail not sent: ${limit} mails to this address in ${minutes} minutes already`);
  }

  /** Sends one mail of `kind` to `to` (the user's address only). Awaits SMTP: call it inside `later`, never on a request path. */
  async send(to: string, kind: MailKind, vars: MailVars): Promise<void> {
    if (!this.transport) return;
    const mail = this.templates.render(kind, vars);
    try {
      // An address object, not a string: nodemailer reads a string as a list (`a@x.com,b` -> a@x.com), an object is one mailbox as it is.
      await this.transport.sendMail({ to: { name: '', address: to }, subject: mail.subject, text: mail.text, html: mail.html });
      this.logger.info({ kind, to: maskAddress(to) }, 'mail sent');
    } catch (err) {
      const e = err as Error & { code?: string; responseCode?: number };
      this.logger.error({ kind, to: maskAddress(to), code: e.code, responseCode: e.responseCode, err: scrub(e.message) }, 'mail could not be sent');
    }
  }

  /** Resolves once every job queued so far has ended (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  /** Connects and says EHLO (and STARTTLS, AUTH when configured): `svc doctor`. */
  async verify(): Promise<void> {
    if (!this.transport) throw new Error('SVC_SMTP_URL is not set');
    await this.transport.verify();
  }

  /** Lets queued mails go out, then closes the transport. */
  async close(): Promise<void> {
    await this.idle();
    this.transport?.close();
  }
}
