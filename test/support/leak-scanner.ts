// Proves that no svc response gives away a secret: the OAuth client secrets, the access/refresh/id
// tokens the IdP issued, and session ids. A session id may appear only in the Set-Cookie line of the
// session cookie itself; everything else (body, every other header, every other Set-Cookie line,
// Location) is scanned.
//
// Secrets are learned as they appear: client secrets when registered, tokens from the IdP's token
// endpoint responses (see oidc.ts `issued`) and from svc's own login handlers
// (`instance.auth.registerOAuthLoginHandler`), session ids from the session cookie. Each response is
// checked when it arrives and every response of a test is checked again at the end (`verify()`),
// against everything learned by then.

import type { ServerInstance } from '../../src/instance.ts';
import type { OAuthLoginContext } from '../../src/auth/oauth/flow.ts';
import type { SvcFetch } from './oidc.ts';

interface Recorded {
  label: string;
  headers: [string, string][];
  setCookies: string[];
  body: string;
}

export interface LeakSources {
  /** Token sets that grow while the suite runs (e.g. the IdP's issued tokens). */
  tokenSets?: Set<string>[];
}

export class LeakScanner {
  private readonly secrets = new Map<string, string>();
  private readonly recorded: Recorded[] = [];
  /** Every login handler context svc delivered (for assertions on tokens and sid). */
  readonly loginContexts: OAuthLoginContext[] = [];
  /** Count of svc responses scanned. */
  scanned = 0;

  constructor(
    private readonly cookieName = 'sid_app',
    private readonly sources: LeakSources = {},
  ) {}

  /** Adds a value that must never appear in a response (`kind` names it in the failure). */
  addSecret(value: string | null | undefined, kind: string): void {
    if (value && value.length >= 8) this.secrets.set(value, kind);
  }

  /** Adds a token set that grows while the suite runs (a provider stand-in started later). */
  addTokenSet(set: Set<string>): void {
    this.sources.tokenSets = [...(this.sources.tokenSets ?? []), set];
  }

  /** Session ids seen in Set-Cookie so far. */
  get sessionIds(): string[] {
    return [...this.secrets].filter(([, kind]) => kind === 'session id').map(([v]) => v);
  }

  private all(): Map<string, string> {
    const all = new Map(this.secrets);
    for (const set of this.sources.tokenSets ?? []) for (const token of set) if (!all.has(token)) all.set(token, 'IdP token');
    return all;
  }

  /**
   * Registers a login handler for each provider id that records the tokens svc got, so they are
   * scanned for even when they never reached the IdP log (and gives tests the handler contexts).
   */
  watchLogins(instance: ServerInstance, providerIds: string[]): void {
    for (const id of providerIds) {
      instance.auth.registerOAuthLoginHandler(id, (ctx) => {
        this.loginContexts.push(ctx);
        this.addSecret(ctx.accessToken, 'access token');
        this.addSecret(ctx.refreshToken, 'refresh token');
      });
    }
  }

  /** Wraps svc's fetch: every response is recorded and scanned before the caller sees it. */
  wrap(fetch: SvcFetch): SvcFetch {
    return async (path, init) => {
      const res = await fetch(path, init);
      await this.inspect(`${init?.method ?? 'GET'} ${path} -> ${res.status}`, res);
      return res;
    };
  }

  /** Records and scans one response (its body is read from a clone). */
  async inspect(label: string, res: Response): Promise<void> {
    const setCookies = res.headers.getSetCookie();
    for (const line of setCookies) {
      const [name, value] = this.cookiePair(line);
      if (name === this.cookieName && value) this.addSecret(value, 'session id');
    }
    const headers = [...res.headers].filter(([name]) => name.toLowerCase() !== 'set-cookie');
    const body = res.body ? await res.clone().text() : '';
    const entry: Recorded = { label, headers, setCookies, body };
    this.recorded.push(entry);
    this.scanned++;
    this.check(entry);
  }

  private cookiePair(line: string): [string, string] {
    const pair = line.split(';')[0] ?? '';
    const eq = pair.indexOf('=');
    return [pair.slice(0, eq).trim(), pair.slice(eq + 1).trim()];
  }

  /** Throws naming the response, the place and the kind of secret. */
  private check(entry: Recorded, secrets = this.all()): void {
    const places: [string, string][] = [['body', entry.body], ...entry.headers.map(([n, v]) => [`header ${n}`, v] as [string, string])];
    for (const line of entry.setCookies) {
      const [name, value] = this.cookiePair(line);
      // The session cookie's own line may carry the session id; nothing else may ride along in it.
      if (name === this.cookieName) {
        places.push([`Set-Cookie ${name} (attributes)`, line.slice(line.indexOf(';') + 1)]);
        if (value && secrets.get(value) !== 'session id') places.push([`Set-Cookie ${name}`, value]);
      } else {
        places.push([`Set-Cookie ${name}`, line]);
      }
    }
    for (const [where, text] of places) {
      if (!text) continue;
      const decoded = safeDecode(text);
      for (const [secret, kind] of secrets) {
        if (text.includes(secret) || decoded.includes(secret) || text.includes(encodeURIComponent(secret))) {
          throw new Error(`LEAK: ${entry.label}: ${where} contains a ${kind} (${secret.slice(0, 6)}...)`);
        }
      }
    }
  }

  /** Checks every response recorded since the last call again, against everything learned now. */
  verify(): void {
    const secrets = this.all();
    const batch = this.recorded.splice(0);
    for (const entry of batch) this.check(entry, secrets);
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
