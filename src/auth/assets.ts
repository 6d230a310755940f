import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { encodeExtended } from 'content-disposition';
import { AppError, notFound } from '../http/errors.ts';
import type { Store } from '../store/store.ts';
import type { Session, SessionService } from './sessions.ts';
import { sha256hex } from './hash.ts';

/** What a resolver hands over for a download (CONTRACT section 6). A Node `Readable` works as a stream too. */
export interface Asset {
  body: Uint8Array | string | ReadableStream<Uint8Array> | Readable;
  contentType?: string;
  /** Sent as `Content-Disposition: attachment` (only the last path segment, encoded per RFC 8187). */
  filename?: string;
}

/**
 * Finds an asset for a user: null when it does not exist or the user may not have it. Asked at
 * minting (is there such an asset for this user?) and again at every download (what is it now?).
 */
export type AssetResolver = (assetId: string, ctx: { userId: string }) => Promise<Asset | null>;

export type AssetTokenMode = 'single' | 'session';

/** What the store keeps under the token's hash: never the token itself. */
interface TokenRecord {
  assetId: string;
  userId: string;
  /** Hash of the minting session: a session token lives only as long as it does. */
  sid: string;
}

/**
 * Session-mode tokens one session may mint (issue 35 finding 9): each lives as long as its session,
 * so without a cap one session could fill the store. 100 covers any page's downloads; more is 429.
 */
export const SESSION_TOKENS_PER_SESSION = 100;
/** A single-use token lives 60 s (CONTRACT section 6). */
export const SINGLE_USE_TTL = 60;
/**
 * Unused single-use tokens one session may hold at once (issue 52 item 12): a token is counted from its
 * minting until it is used or its session's last 60 s of minting have passed. More is 429.
 */
export const SINGLE_USE_TOKENS_PER_SESSION = 100;
/** 32 random bytes, base64url: like session ids, 256 bits nobody guesses. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const CONTENT_TYPE = /^[\w.+-]+\/[\w.+-]+(\s*;\s*[\w.+-]+=("[^"\\\r\n]*"|[\w.+-]+))*$/;

export const invalidToken = () => new AppError(404, 'asset_token_invalid', 'This download link is unknown, used or expired');


/**
 * Asset download tokens: plugins register resolvers by asset id prefix; a session mints a token for
 * an asset it may read; the token (in a URL) downloads it without a cookie. `single` tokens work once
 * within 60 s (atomic GETDEL: of parallel downloads exactly one wins) while the minting session lives;
 * `session` tokens work until the minting session ends. The store holds the SHA-256 of each token, never the token.
 */
export class AssetTokens {
  /** Longest prefix first, so `files:private:` wins over `files:`. */
  private resolvers: [string, AssetResolver][] = [];

  constructor(
    private readonly store: Store,
    private readonly prefix: string,
    private readonly sessions: SessionService,
  ) {}

  register(prefix: string, resolver: AssetResolver): void {
    if (typeof prefix !== 'string' || prefix === '') throw new Error('registerAssetResolver: the prefix must be a non-empty string');
    if (typeof resolver !== 'function') throw new Error(`registerAssetResolver("${prefix}"): the resolver must be a function`);
    if (this.resolvers.some(([p]) => p === prefix)) throw new Error(`registerAssetResolver: the prefix "${prefix}" is registered twice`);
    this.resolvers = [...this.resolvers, [prefix, resolver] as [string, AssetResolver]].sort((x, y) => y[0].length - x[0].length);
  }

  private async resolve(assetId: string, userId: string): Promise<Asset | null> {
    const resolver = this.resolvers.find(([p]) => assetId.startsWith(p))?.[1];
    return resolver ? resolver(assetId, { userId }) : null;
  }

  private key(mode: AssetTokenMode, hash: string) {
    return `${this.prefix}asset:${mode}:${hash}`;
  }

  private indexKey(sid: string) {
    return `${this.prefix}session-assets:${sid}`;
  }

  private countKey(sid: string) {
    return `${this.prefix}session-assets-count:${sid}`;
  }

  private singleCountKey(sid: string) {
    return `${this.prefix}single-assets-count:${sid}`;
  }

  /** A token for an asset the session's user may read; 404 when no resolver claims it or it says null. */
  async mint(session: Session, assetId: string, mode: AssetTokenMode): Promise<string> {
    const asset = await this.resolve(assetId, session.userId);
    if (!asset) throw notFound('No such asset');
    discard(asset.body); // minting only asks; the download asks again
    const token = randomBytes(32).toString('base64url');
    const hash = sha256hex(token);
    const record: TokenRecord = { assetId, userId: session.userId, sid: session.hash };
    if (mode === 'single') {
      // Counted before the token is written (DESIGN "Count before you check"); a refused one is not kept
      // in the count. Each mint pushes the count's end to 60 s later, so it outlives every token it counts.
      const count = this.singleCountKey(session.hash);
      if ((await this.store.incr(count, SINGLE_USE_TTL)) > SINGLE_USE_TOKENS_PER_SESSION) {
        await this.store.decr(count);
        throw new AppError(429, 'too_many_requests', `A session may hold at most ${SINGLE_USE_TOKENS_PER_SESSION} unused single-use download links; use them, or wait a minute`, undefined, { 'Retry-After': String(SINGLE_USE_TTL) });
      }
      await this.store.expire(count, SINGLE_USE_TTL);
      await this.store.set(this.key('single', hash), JSON.stringify(record), { ttl: SINGLE_USE_TTL });
      return token;
    }
    // Indexed under the session first (like sessions under their user), so its end finds the token.
    const ttl = Math.max(1, Math.ceil((this.sessions.hardEnd(session) - Date.now()) / 1000));
    // Counted before anything is written, in one atomic step on every instance (DESIGN "Count before you check").
    if ((await this.store.incr(this.countKey(session.hash), ttl)) > SESSION_TOKENS_PER_SESSION) {
      throw new AppError(429, 'too_many_requests', `A session may hold at most ${SESSION_TOKENS_PER_SESSION} session download links; log in again for more`);
    }
    await this.store.sAdd(this.indexKey(session.hash), [hash], ttl);
    await this.store.set(this.key('session', hash), JSON.stringify(record), { ttl });
    return token;
  }

  /**
   * Takes a single-use token (one caller gets it); `peek` only looks (HEAD must not use it up). A token
   * works only while the session that minted it lives: a logout, logout-all or expiry ends it too.
   */
  async single(token: string, peek = false): Promise<TokenRecord | null> {
    if (!TOKEN_PATTERN.test(token)) return null; // forged or truncated: no store round trip
    const key = this.key('single', sha256hex(token));
    const raw = peek ? await this.store.get(key) : await this.store.getDel(key);
    if (raw === null) return null;
    const record = JSON.parse(raw) as TokenRecord;
    if (!peek) await this.store.decr(this.singleCountKey(record.sid)); // no longer held
    return (await this.sessions.isLive(record.sid)) ? record : null;
  }

  /** A session token whose session still lives. */
  async session(token: string): Promise<TokenRecord | null> {
    if (!TOKEN_PATTERN.test(token)) return null;
    const key = this.key('session', sha256hex(token));
    const raw = await this.store.get(key);
    if (raw === null) return null;
    const record = JSON.parse(raw) as TokenRecord;
    if (await this.sessions.isLive(record.sid)) return record;
    await this.store.del(key); // the session ended without a logout (expired): so does its token
    return null;
  }

  /**
   * The download response for a token's record: the resolver is asked again, now. `head`: the same
   * headers (what a download manager or link checker looks at: type, file name), without the body.
   */
  async download(record: TokenRecord, head = false): Promise<Response> {
    const asset = await this.resolve(record.assetId, record.userId);
    if (!asset) throw notFound('This asset no longer exists');
    if (head) discard(asset.body);
    return new Response(head ? null : asWebBody(asset.body), { status: 200, headers: downloadHeaders(asset) });
  }

  /** Deletes the session tokens of a session that ended (logout, logout-all, ...); its single-use ones die at their download (`single`). */
  async endSession(sid: string): Promise<void> {
    const hashes = await this.store.sMembers(this.indexKey(sid));
    for (const hash of hashes) await this.store.del(this.key('session', hash));
    await this.store.del(this.indexKey(sid));
    await this.store.del(this.countKey(sid));
    await this.store.del(this.singleCountKey(sid));
  }
}

/** Headers of every download: never cached, never sniffed or run as a page of our origin. */
export function downloadHeaders(asset: Pick<Asset, 'contentType' | 'filename'>): Headers {
  const headers = new Headers({
    'Cache-Control': 'no-store',
    'Content-Type': asset.contentType && CONTENT_TYPE.test(asset.contentType) ? asset.contentType : 'application/octet-stream',
    'X-Content-Type-Options': 'nosniff',
    // A user's HTML or SVG served from svc's origin must not run there.
    'Content-Security-Policy': "default-src 'none'; sandbox",
  });
  const name = asset.filename === undefined ? '' : safeFilename(asset.filename);
  if (name) headers.set('Content-Disposition', attachment(name));
  return headers;
}

/** The last path segment, without control characters; what a browser would save anyway, minus surprises. */
export function safeFilename(name: string): string {
  const base = name.split(/[/\\]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex -- removing control characters is the point
  const clean = base.replace(/[\u0000-\u001f\u007f-\u009f]/g, '').trim();
  return clean === '.' || clean === '..' ? '' : clean.slice(0, 255);
}

/**
 * `attachment; filename="<ASCII>"`, plus `filename*=UTF-8''<percent-encoded>` (RFC 8187, the
 * library's encoder) when the name is not plain ASCII. Always quoted, as Express writes it.
 */
function attachment(name: string): string {
  const fallback = asciiFallback(name);
  return fallback === name ? `attachment; filename="${name}"` : `attachment; filename="${fallback}"; filename*=${encodeExtended(name)}`;
}

/** `filename=` for old clients: printable ASCII only (the UTF-8 name goes in `filename*=`). */
function asciiFallback(name: string): string {
  const ascii = name.normalize('NFKD').replace(/[^\x20-\x7e]/g, '').replace(/[%"\\]/g, '_').trim();
  return ascii.replace(/^\.+/, '') || 'download';
}

function asWebBody(body: Asset['body']): BodyInit {
  if (body instanceof Readable) return Readable.toWeb(body) as ReadableStream<Uint8Array>;
  return body as BodyInit;
}

function discard(body: Asset['body']): void {
  if (body instanceof Readable) body.destroy();
  else if (body instanceof ReadableStream) body.cancel().catch(() => {});
}
