// A real SMTP server on loopback for the suites (the `smtp-server` package), whose received messages
// are parsed by `mailparser`: svc's mails go through nodemailer, EHLO, (STARTTLS,) MAIL, RCPT, DATA,
// exactly as to a relay, and tests read what a mail client would show.

import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  to: string[];
  from: string;
  subject: string;
  text: string;
  html: string;
  /** Whether the session ran over TLS (STARTTLS or implicit). */
  secure: boolean;
  parsed: ParsedMail;
}

export interface TestSmtp {
  /** `smtp://127.0.0.1:<port>`. With STARTTLS on offer, its certificate is smtp-server's own (self-signed, and expired). */
  url: string;
  mails: ReceivedMail[];
  /** Connections the server accepted (held ones included). */
  connections: number;
  /** While on, every new connection waits for its greeting until `release()`. */
  hold(): void;
  release(): void;
  /** The mails to `address` so far. */
  to(address: string): ReceivedMail[];
  /** Waits until `count` mails to `address` arrived (10 s at most), and returns them. */
  waitFor(address: string, count?: number): Promise<ReceivedMail[]>;
  close(): Promise<void>;
}

/** The token of the first link in a mail's text part that goes to `path`. */
export function tokenFrom(mail: ReceivedMail, path: string): string {
  const m = new RegExp(`https?://[^\\s]*${path.replace(/[/.]/g, '\\$&')}\\?token=([A-Za-z0-9_-]+)`).exec(mail.text);
  if (!m) throw new Error(`no link to ${path} in the mail:\n${mail.text}`);
  return m[1]!;
}

export async function startSmtp(opts: { starttls?: boolean } = {}): Promise<TestSmtp> {
  const mails: ReceivedMail[] = [];
  let held: (() => void)[] | null = null;
  const state = { connections: 0 };
  const server = new SMTPServer({
    authOptional: true,
    logger: false,
    // Without STARTTLS on offer, nodemailer speaks plain SMTP; with it, it upgrades, as with a local
    // Postfix and its self-signed "snakeoil" certificate (smtp-server's built-in one, self-signed and expired).
    disabledCommands: opts.starttls ? [] : ['STARTTLS'],
    onConnect(_session, callback) {
      state.connections++;
      if (held) held.push(() => callback());
      else callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((parsed) => {
          mails.push({
            to: session.envelope.rcptTo.map((r) => r.address),
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            subject: parsed.subject ?? '',
            text: parsed.text ?? '',
            html: typeof parsed.html === 'string' ? parsed.html : '',
            secure: session.secure,
            parsed,
          });
          callback();
        })
        .catch((err: Error) => callback(err));
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  const to = (address: string) => mails.filter((m) => m.to.includes(address));
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    get connections() {
      return state.connections;
    },
    hold: () => void (held ??= []),
    release() {
      const waiting = held ?? [];
      held = null;
      for (const go of waiting) go();
    },
    to,
    async waitFor(address, count = 1) {
      for (const deadline = Date.now() + 10_000; to(address).length < count; ) {
        if (Date.now() > deadline) throw new Error(`${to(address).length} of ${count} mails to ${address} arrived`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return to(address);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
