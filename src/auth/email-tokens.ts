import { randomBytes } from 'node:crypto';
import type { Store } from '../store/store.ts';
import { sha256hex } from './hash.ts';

/** What a token in a mail is for, and how long it works (CONTRACT 12). */
export const TOKEN_TTL = { reset: 30 * 60, verify: 24 * 60 * 60, magicLink: 10 * 60 } as const;
export type TokenPurpose = keyof typeof TOKEN_TTL;

/** What the store keeps under `email-token:<purpose>:<sha256hex(token)>`. */
export interface TokenRecord {
  userId: string;
  /** The address the mail went to: a token proves only that mailbox. */
  email: string;
  /** The user's credentials epoch when the mail went out: a lifecycle event since (a password change, a claim) kills the token. */
  epoch: number;
  /** Magic links: SHA-256 of the `svc_magic` cookie of the browser that asked. */
  binding?: string;
  /** Milliseconds; checked against the injectable clock (the store's TTL only cleans up). */
  expiresAt: number;
}

/**
 * The tokens of mailed links: 32 random bytes, base64url, in the mail only; the store keeps their
 * SHA-256 (a store dump yields no usable link). Single use: `consume` is one GETDEL, so of two
 * parallel uses one gets the record. A GET of the frontend page never reaches here: only the POST
 * of its form does.
 */
export class EmailTokens {
  /** The clock expiry is judged by; tests replace it instead of sleeping. */
  now: () => number = Date.now;

  constructor(
    private readonly store: Store,
    private readonly prefix: string,
  ) {}

  private key(purpose: TokenPurpose, token: string) {
    return `${this.prefix}email-token:${purpose}:${sha256hex(token)}`;
  }

  async issue(purpose: TokenPurpose, record: Omit<TokenRecord, 'expiresAt'>): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    const full: TokenRecord = { ...record, expiresAt: this.now() + TOKEN_TTL[purpose] * 1000 };
    await this.store.set(this.key(purpose, token), JSON.stringify(full), { ttl: TOKEN_TTL[purpose] });
    return token;
  }

  /** The live record of a token without using it up (null: unknown, used or expired). */
  async peek(purpose: TokenPurpose, token: string): Promise<TokenRecord | null> {
    return this.live(await this.store.get(this.key(purpose, token)));
  }

  /** Uses the token up: the record for exactly one caller; null when unknown, used or expired. */
  async consume(purpose: TokenPurpose, token: string): Promise<TokenRecord | null> {
    return this.live(await this.store.getDel(this.key(purpose, token)));
  }

  private live(raw: string | null): TokenRecord | null {
    if (!raw) return null;
    const record = JSON.parse(raw) as TokenRecord;
    return record.expiresAt > this.now() ? record : null;
  }
}
