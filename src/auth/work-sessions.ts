import { randomUUID } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import type { Collection, Database } from '../db/index.ts';
import type { AppEnv } from '../http/env.ts';
import { AppError, notFound } from '../http/errors.ts';
import { sha256hex } from './hash.ts';

export const WORK_SESSION_COLLECTION = 'svc__core-worksession';

/** A work session (CONTRACT section 6): guest access to shared compositions. */
export interface WorkSessionDoc {
  _id: string;
  isActive: boolean;
  /** ISO time, or null for never. */
  expiresAt: string | null;
  pluginData: Record<string, unknown>;
  composition?: string | null;
  label?: string | null;
  createdAt: string;
  updatedAt?: string;
}

/** A work session as the admin API shows it (CONTRACT section 6). */
export interface PublicWorkSession {
  id: string;
  isActive: boolean;
  expiresAt: string | null;
  pluginData: Record<string, unknown>;
  composition: string | null;
  label: string | null;
  createdAt: string;
}

export interface WorkSessionInput {
  pluginData: Record<string, unknown>;
  composition?: string | null;
  expiresAt?: string | null;
  label?: string;
}

export interface WorkSessionPatch {
  isActive?: boolean;
  expiresAt?: string | null;
  pluginData?: Record<string, unknown>;
  label?: string;
}

export const toPublicWorkSession = (doc: WorkSessionDoc): PublicWorkSession => ({
  id: doc._id,
  isActive: doc.isActive,
  expiresAt: doc.expiresAt,
  pluginData: doc.pluginData,
  composition: doc.composition ?? null,
  label: doc.label ?? null,
  createdAt: doc.createdAt,
});

/**
 * What a work session id is called wherever it travels beyond the database (pub/sub messages,
 * in-memory indexes): the id is the guest's credential, like a session id.
 */
export const hashWorkSessionId = sha256hex;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Route hooks made by `authenticatedOrWorksession`: the global guard lets guests reach them. */
export const guestAwareHooks = new WeakSet<object>();

/** Whether a work session admits guests now: active and not expired (`expiresAt` null = never). */
export function isUsable(doc: WorkSessionDoc, now = Date.now()): boolean {
  return doc.isActive === true && (doc.expiresAt === null || Date.parse(doc.expiresAt) > now);
}

/**
 * Work sessions: the documents, the admin operations on them, and the route hook that admits their
 * guests. Changes that may end a guest's access (deactivation, a new expiry, other plugin data,
 * deletion) are announced through `onChange`, so realtime can disconnect the guest's sockets.
 */
export class WorkSessions {
  private readonly changeListeners: ((id: string) => Promise<void>)[] = [];

  private constructor(readonly docs: Collection<WorkSessionDoc>) {}

  static async open(db: Database): Promise<WorkSessions> {
    return new WorkSessions(await db.collection<WorkSessionDoc>(WORK_SESSION_COLLECTION));
  }

  /**
   * The work session if it exists, is active and has not expired, and (when `pluginKey` is given)
   * grants that plugin; else null. Sockets have no plugin: any usable work session opens one.
   */
  async valid(id: string, pluginKey?: string): Promise<WorkSessionDoc | null> {
    if (!UUID.test(id)) return null;
    const doc = await this.docs.findOne({ _id: id });
    if (!doc || !isUsable(doc)) return null;
    if (pluginKey !== undefined && !Object.hasOwn(doc.pluginData ?? {}, pluginKey)) return null;
    return doc;
  }

  async create(input: WorkSessionInput): Promise<WorkSessionDoc> {
    const now = new Date().toISOString();
    return this.docs.insertOne({
      _id: randomUUID(),
      isActive: true,
      expiresAt: input.expiresAt ?? null,
      pluginData: input.pluginData,
      composition: input.composition ?? null,
      label: input.label ?? null,
      createdAt: now,
      updatedAt: now,
    });
  }

  async list(opts: { offset: number; limit: number }): Promise<{ items: WorkSessionDoc[]; total: number }> {
    const [items, total] = await Promise.all([this.docs.find({}, { sort: { createdAt: 1, _id: 1 }, skip: opts.offset, limit: opts.limit }), this.docs.count({})]);
    return { items, total };
  }

  async get(id: string): Promise<WorkSessionDoc> {
    const doc = await this.docs.findOne({ _id: id });
    if (!doc) throw notFound('No work session with this id');
    return doc;
  }

  async update(id: string, patch: WorkSessionPatch): Promise<WorkSessionDoc> {
    const $set: Record<string, unknown> = { updatedAt: new Date().toISOString() };
    for (const key of ['isActive', 'expiresAt', 'pluginData', 'label'] as const) if (patch[key] !== undefined) $set[key] = patch[key];
    const doc = await this.docs.updateOne({ _id: id }, { $set });
    if (!doc) throw notFound('No work session with this id');
    await this.changed(id);
    return doc;
  }

  async delete(id: string): Promise<void> {
    if (!(await this.docs.deleteOne({ _id: id }))) throw notFound('No work session with this id');
    await this.changed(id);
  }

  /** Runs after a work session changed or was deleted (gets its id). */
  onChange(listener: (id: string) => Promise<void>): void {
    this.changeListeners.push(listener);
  }

  private async changed(id: string): Promise<void> {
    for (const listener of this.changeListeners) await listener(id);
  }

  /**
   * Route hook (SPEC.md rule 4, CONTRACT section 4): a session, or a valid work session named by the
   * `x-work-session-id` header whose `pluginData` has `pluginKey`. A caller with neither is a plain
   * anonymous caller (401 `unauthenticated`, the code that sends a frontend to its login page); a
   * header that names no such work session is 401 `invalid_work_session` (the guest link is dead).
   * Guests are read-only (403 `read_only_guest` on POST/PUT/PATCH/DELETE) and appear as
   * `c.get('workSession')`, never `authUser`.
   */
  authenticatedOrWorksession(pluginKey: string, anonymous: (c: Context) => AppError): MiddlewareHandler<AppEnv> {
    const hook: MiddlewareHandler<AppEnv> = async (c, next) => {
      if (c.get('authUser')) return next();
      const id = c.req.header('x-work-session-id');
      if (id === undefined) throw anonymous(c);
      const doc = await this.valid(id, pluginKey);
      if (!doc) throw new AppError(401, 'invalid_work_session', 'This work session does not exist, has ended, or does not grant this plugin');
      if (MUTATING.has(c.req.method)) throw new AppError(403, 'read_only_guest', 'Work-session guests can only read');
      c.set('workSession', { id: doc._id, pluginData: doc.pluginData, composition: doc.composition ?? null });
      await next();
    };
    guestAwareHooks.add(hook);
    return hook;
  }
}
