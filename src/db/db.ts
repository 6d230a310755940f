import { AppError } from '../http/errors.ts';

/** Every stored document has a string `_id` (UUID v4 unless a caller chooses one). */
export interface Doc {
  _id: string;
}

/**
 * A query: field equality (dotted paths allowed) and the operators `$in`, `$nin`, `$ne`, `$exists`,
 * `$lt`, `$lte`, `$gt`, `$gte`, `$or`. Both backends understand exactly this subset.
 */
export type Filter = Record<string, unknown>;

/** Update operators both backends apply the same way. */
export interface Update {
  $set?: Record<string, unknown>;
  $unset?: Record<string, true | 1 | ''>;
  $push?: Record<string, unknown>;
  $pull?: Record<string, unknown>;
  $addToSet?: Record<string, unknown>;
  $inc?: Record<string, number>;
}

export interface FindOptions {
  sort?: Record<string, 1 | -1>;
  skip?: number;
  limit?: number;
}

/**
 * An index over one or several fields, unique unless `unique: false` (uniqueness that matters must be
 * a plain unique index). `expireAfterSeconds` makes MongoDB remove a document that long after the date
 * in its (single) field; the embedded database ignores it, so a caller that relies on expiry sweeps too.
 */
export interface UniqueIndex {
  fields: string[];
  unique?: boolean;
  expireAfterSeconds?: number;
}

/** The few operations svc needs of a document collection. */
export interface Collection<T extends Doc> {
  /** Throws DuplicateKeyError when a unique index (or `_id`) is violated. */
  insertOne(doc: T): Promise<T>;
  /**
   * Inserts several documents in one write (one append to the embedded file, one MongoDB round trip).
   * Throws DuplicateKeyError when one violates a unique index; which of the others were inserted then
   * is the backend's (none on the embedded database, those before it on MongoDB).
   */
  insertMany(docs: T[]): Promise<void>;
  findOne(filter: Filter): Promise<T | null>;
  find(filter: Filter, opts?: FindOptions): Promise<T[]>;
  count(filter: Filter): Promise<number>;
  /** Applies the update to the first match and returns the document after it; null when none matched. */
  updateOne(filter: Filter, update: Update): Promise<T | null>;
  /** Replaces the document with this `_id`, inserting it when missing. */
  upsert(doc: T): Promise<void>;
  deleteOne(filter: Filter): Promise<boolean>;
  deleteMany(filter: Filter): Promise<number>;
}

export interface Database {
  /** Which backend, for health and log lines. */
  readonly kind: 'mongodb' | 'embedded';
  /** Opens a collection and ensures its indexes (idempotent). */
  collection<T extends Doc>(name: string, indexes?: UniqueIndex[]): Promise<Collection<T>>;
  /** Throws UnavailableError when the database is down. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A unique index was violated: the same error whatever the backend. */
export class DuplicateKeyError extends AppError {
  constructor(
    readonly collection: string,
    cause?: unknown,
  ) {
    super(409, 'already_exists', 'An entry with these values already exists');
    this.cause = cause;
  }
}
