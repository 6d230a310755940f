import type { Context } from 'hono';
import type { Config } from '../config/load.ts';
import type { Collection, Database, Filter } from '../db/index.ts';
import type { AppEnv } from '../http/env.ts';
import type { Logger } from '../logger.ts';
import { requestOrigin } from '../auth/origin.ts';
import { publicSessionId } from '../auth/sessions.ts';
import { uuidv7, type AuditActor, type AuditRecord, type AuditType, type LoginFailure } from './record.ts';

export const AUDIT_COLLECTION = 'svc__core-audit';

/** What a caller says about an event; the rest (id, time, IP, device, session) comes from the request. */
export interface AuditEntry {
  type: AuditType;
  /** Default: the request's user (`user`), or `anonymous` without one. */
  actor?: AuditActor;
  subject?: AuditRecord['subject'];
  /** A public session id; default: the request's own session. `null`: none (e.g. a login that failed). */
  sessionId?: string | null;
  details?: Record<string, unknown>;
}

/** The stored document: the record, keyed by its id, and the date MongoDB's TTL index reads. */
interface AuditDoc extends Omit<AuditRecord, 'id'> {
  _id: string;
  expiresAt: Date;
}

export interface AuditQuery {
  userId?: string;
  /** A type, or a prefix ending in `.*`. */
  type?: string;
  /** ISO 8601, inclusive. */
  since?: string;
  /** ISO 8601, exclusive. */
  until?: string;
  /** Continue after this record id (from `cursorId`). */
  after?: string;
  limit: number;
}

export interface AuditPage {
  items: AuditRecord[];
  nextCursor: string | null;
}

/** Called with each record written, after the write (webhooks queue their deliveries here). */
export type AuditListener = (record: AuditRecord) => Promise<void> | void;

const DAY_MS = 86_400_000;
/** The error codes of a login step that are `login.failed` reasons (CONTRACT 13). */
const LOGIN_FAILURES = new Set<string>(['invalid_credentials', 'invalid_code', 'invalid_passkey', 'too_many_attempts', 'email_not_verified'] satisfies LoginFailure[]);
const REFUSAL_RECORD_INTERVAL_MS = 60_000;
const MAX_REFUSALS_REMEMBERED = 10_000;
/** How often each instance removes records past retention (the embedded database has no TTL index). */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;

/** A cursor is the last record's id, opaque to callers. */
const encodeCursor = (id: string) => Buffer.from(id).toString('base64url');
const decodeCursor = (cursor: string) => Buffer.from(cursor, 'base64url').toString();

/**
 * The audit log (CONTRACT section 13): one writer for every security-relevant action, a query for
 * admins and for a user's own activity, and retention. A write that fails never fails the action it
 * records: it is logged as `audit_write_failed`, naming the type.
 */
export class AuditLog {
  private readonly listeners: AuditListener[] = [];
  /** When a `too_many_attempts` record was last written, per account and address (`firstRefusal`). */
  private readonly refusals = new Map<string, number>();
  private sweeper?: NodeJS.Timeout;

  private constructor(
    private readonly records: Collection<AuditDoc>,
    private readonly config: Config,
    private readonly logger: Logger,
  ) {}

  /** `sweep: false`: a one-shot command (`svc user create`) that writes and leaves. */
  static async open(db: Database, config: Config, logger: Logger, { sweep = true } = {}): Promise<AuditLog> {
    const records = await db.collection<AuditDoc>(AUDIT_COLLECTION, [
      { fields: ['subject.userId', '_id'], unique: false },
      { fields: ['type', '_id'], unique: false },
      { fields: ['at'], unique: false },
      // MongoDB removes a record by itself once `expiresAt` passed; the sweep does it everywhere else.
      { fields: ['expiresAt'], unique: false, expireAfterSeconds: 0 },
    ]);
    const log = new AuditLog(records, config, logger);
    if (sweep) {
      void log.sweep().catch((err: unknown) => logger.warn({ err }, 'audit sweep failed'));
      log.sweeper = setInterval(() => void log.sweep().catch((err: unknown) => logger.warn({ err }, 'audit sweep failed')), SWEEP_INTERVAL_MS).unref();
    }
    return log;
  }

  /** Runs `listener` with each record written (errors are logged, never the writer's). */
  onRecord(listener: AuditListener): void {
    this.listeners.push(listener);
  }

  /**
   * Writes one record. `c`: the request that caused it (IP, device, session, default actor); null for
   * svc's own actions (`svc user create`, the bootstrap admin). Never throws.
   */
  async record(c: Context<AppEnv> | null, entry: AuditEntry): Promise<void> {
    const record = this.build(c, entry);
    try {
      await this.records.insertOne(this.toDoc(record));
    } catch (err) {
      this.logger.error({ err, type: record.type, code: 'audit_write_failed' }, `audit_write_failed: the ${record.type} record was not written`);
      return;
    }
    for (const listener of this.listeners) {
      try {
        await listener(record);
      } catch (err) {
        this.logger.error({ err, type: record.type, eventId: record.id }, 'an audit listener failed');
      }
    }
  }

  /**
   * Runs a login step and, when it fails for a reason CONTRACT 13 lists, writes `login.failed` before
   * the error goes on: every way in names its failures here, not one by one.
   */
  async loginAttempt<T>(c: Context<AppEnv>, subject: () => AuditRecord['subject'], attempt: () => Promise<T>): Promise<T> {
    try {
      return await attempt();
    } catch (err) {
      const reason = (err as { code?: unknown }).code;
      if (typeof reason === 'string' && LOGIN_FAILURES.has(reason)) {
        const about = subject();
        if (reason !== 'too_many_attempts' || this.firstRefusal(c, about)) {
          await this.record(c, { type: 'login.failed', actor: { type: 'anonymous' }, subject: about, sessionId: null, details: { reason } });
        }
      }
      throw err;
    }
  }

  /**
   * A locked-out caller is refused at the cost of a store read, so recording each refusal would let
   * anyone write to the database at will: one `too_many_attempts` record per minute per account and
   * address on each instance is the record (the wrong passwords before it are each recorded).
   */
  private firstRefusal(c: Context<AppEnv>, subject: AuditRecord['subject']): boolean {
    const key = `${subject.userId ?? subject.email ?? ''}|${requestOrigin(c, this.config.server.trustProxy).ip}`;
    const now = Date.now();
    if ((this.refusals.get(key) ?? 0) > now - REFUSAL_RECORD_INTERVAL_MS) return false;
    this.refusals.delete(key); // re-inserted last: the Map's order is the age order the cap drops by
    this.refusals.set(key, now);
    if (this.refusals.size > MAX_REFUSALS_REMEMBERED) this.refusals.delete(this.refusals.keys().next().value!);
    return true;
  }

  private build(c: Context<AppEnv> | null, entry: AuditEntry): AuditRecord {
    const record: AuditRecord = {
      id: uuidv7(),
      type: entry.type,
      at: new Date().toISOString(),
      actor: entry.actor ?? actorOf(c),
      subject: entry.subject ?? {},
      details: entry.details ?? {},
    };
    if (c) {
      const session = c.get('session');
      const sessionId = entry.sessionId === undefined ? session && publicSessionId(session.hash) : entry.sessionId;
      if (sessionId) record.sessionId = sessionId;
      const { ip, device } = requestOrigin(c, this.config.server.trustProxy);
      if (ip) record.ip = ip;
      record.device = device;
    } else if (entry.sessionId) {
      record.sessionId = entry.sessionId;
    }
    return record;
  }

  private toDoc(record: AuditRecord): AuditDoc {
    const { id, ...rest } = record;
    return { _id: id, ...rest, expiresAt: new Date(Date.parse(record.at) + this.config.auth.audit.retentionDays * DAY_MS) };
  }

  /** Newest first, `limit` at most; `nextCursor` continues after the last item. */
  async query(q: AuditQuery): Promise<AuditPage> {
    const filter: Filter = {};
    if (q.userId !== undefined) filter['subject.userId'] = q.userId;
    if (q.type !== undefined) {
      // A prefix `login.*` is the range of strings starting `login.` ('/' sorts right after '.').
      filter.type = q.type.endsWith('.*') ? { $gte: q.type.slice(0, -1), $lt: `${q.type.slice(0, -2)}/` } : q.type;
    }
    if (q.since !== undefined || q.until !== undefined) {
      filter.at = { ...(q.since !== undefined ? { $gte: q.since } : {}), ...(q.until !== undefined ? { $lt: q.until } : {}) };
    }
    if (q.after !== undefined) filter._id = { $lt: q.after };
    const docs = await this.records.find(filter, { sort: { _id: -1 }, limit: q.limit + 1 });
    const items = docs.slice(0, q.limit).map(toRecord);
    return { items, nextCursor: docs.length > q.limit ? encodeCursor(items[items.length - 1]!.id) : null };
  }

  /** The record id a cursor names, or null when it names none (bad or unknown cursor). */
  async cursorId(cursor: string): Promise<string | null> {
    const id = decodeCursor(cursor);
    if (encodeCursor(id) !== cursor) return null;
    return (await this.records.findOne({ _id: id })) ? id : null;
  }

  /** Removes records older than `auth.audit.retentionDays`; returns how many went. */
  async sweep(now = Date.now()): Promise<number> {
    const cutoff = new Date(now - this.config.auth.audit.retentionDays * DAY_MS).toISOString();
    return this.records.deleteMany({ at: { $lt: cutoff } });
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}

/** An admin acting on something not their own (admin routes), or their key; svc itself without a request. */
export function adminActor(c: Context<AppEnv> | null): AuditActor {
  const user = c?.get('authUser');
  if (user?.apiKey) return { type: 'api_key', id: user.apiKey.id };
  return user ? { type: 'admin', id: user.userId } : { type: 'system' };
}

/** The request's user acting on their own account (or their key), or nobody known. */
function actorOf(c: Context<AppEnv> | null): AuditActor {
  if (!c) return { type: 'system' };
  const user = c.get('authUser');
  if (user?.apiKey) return { type: 'api_key', id: user.apiKey.id };
  return user ? { type: 'user', id: user.userId } : { type: 'anonymous' };
}

function toRecord(doc: AuditDoc): AuditRecord {
  const { _id, expiresAt: _expiresAt, ...rest } = doc;
  return { id: _id, ...rest } as AuditRecord;
}
