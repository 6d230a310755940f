import type { MiddlewareHandler } from 'hono';
import type { Collection, Database } from '../db/index.ts';
import type { AppEnv } from '../http/env.ts';
import { AppError } from '../http/errors.ts';

export const WORK_SESSION_COLLECTION = 'svc__core-worksession';

/** A work session (CONTRACT section 6): guest access to shared compositions. */
export interface WorkSessionDoc {
  _id: string;
  isActive: boolean;
  /** ISO time, or null for never. */
  expiresAt: string | null;
  pluginData: Record<string, unknown>;
  composition?: string | null;
  label?: string;
  createdAt: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Route hooks made by `authenticatedOrWorksession`: the global guard lets guests reach them. */
export const guestAwareHooks = new WeakSet<object>();

export class WorkSessions {
  private constructor(readonly docs: Collection<WorkSessionDoc>) {}

  static async open(db: Database): Promise<WorkSessions> {
    return new WorkSessions(await db.collection<WorkSessionDoc>(WORK_SESSION_COLLECTION));
  }

  /** The work session if it exists, is active, has not expired and grants `pluginKey`; else null. */
  async valid(id: string, pluginKey: string): Promise<WorkSessionDoc | null> {
    if (!UUID.test(id)) return null;
    const doc = await this.docs.findOne({ _id: id });
    if (!doc?.isActive) return null;
    if (doc.expiresAt !== null && !(Date.parse(doc.expiresAt) > Date.now())) return null;
    if (!Object.hasOwn(doc.pluginData ?? {}, pluginKey)) return null;
    return doc;
  }

  /**
   * Route hook (SPEC.md rule 4, CONTRACT section 4): a session, or a valid work session named by the
   * `x-work-session-id` header whose `pluginData` has `pluginKey`. Guests are read-only (403
   * `read_only_guest` on POST/PUT/PATCH/DELETE) and appear as `c.get('workSession')`, never `authUser`.
   */
  authenticatedOrWorksession(pluginKey: string): MiddlewareHandler<AppEnv> {
    const hook: MiddlewareHandler<AppEnv> = async (c, next) => {
      if (c.get('authUser')) return next();
      const id = c.req.header('x-work-session-id');
      const doc = id ? await this.valid(id, pluginKey) : null;
      if (!doc) throw new AppError(401, 'invalid_work_session', 'Log in, or use a valid work session for this plugin');
      if (MUTATING.has(c.req.method)) throw new AppError(403, 'read_only_guest', 'Work-session guests can only read');
      c.set('workSession', { id: doc._id, pluginData: doc.pluginData, composition: doc.composition ?? null });
      await next();
    };
    guestAwareHooks.add(hook);
    return hook;
  }
}
