/**
 * Versioned data migrations (issue 53, "Upgrades between versions"). Each release that changes what
 * svc keeps in its database adds a migration here with the next data version; every migration that ran
 * is recorded in `svc__core-migration` (one document per version: its name, the svc that ran it, when).
 *
 * - Start-up (and `svc migrate`, for a deploy step before the new instances start) runs the pending ones
 *   in order. Instances started together run each migration once: the first to insert its record runs
 *   it, the others wait until that record says done (a migration that dies half-way is left `running`,
 *   named in the error, for an operator to look at; it is never run twice by itself).
 * - Data newer than this svc (a migration recorded that it does not know: someone ran a newer svc on
 *   this database) stops start-up, naming both versions: an older svc would misread what the newer one
 *   wrote. Roll back the database, or run the newer svc.
 * - A migration is idempotent where it can be (a rerun by hand must do no harm), and never reads
 *   collections through the services that expect the new shape.
 */
import type { Logger } from 'pino';
import { SVC_VERSION } from '../version.ts';
import { DuplicateKeyError, type Collection, type Database, type Doc } from './db.ts';

export interface Migration {
  /** The data version this migration brings the database to: 1, 2, 3, ... without gaps. */
  version: number;
  /** What it does, for the log and the record. */
  name: string;
  up(db: Database, logger: Logger): Promise<void>;
}

/** Every migration of svc, oldest first. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'baseline: the collections of svc 0.2 (nothing to change)',
    up: async () => {},
  },
];

export const MIGRATION_COLLECTION = 'svc__core-migration';

interface MigrationRecord extends Doc {
  _id: string;
  version: number;
  name: string;
  state: 'running' | 'done';
  svcVersion: string;
  startedAt: string;
  doneAt?: string;
}

export class DataVersionError extends Error {}

/** How long an instance waits for a migration another instance is running. */
const WAIT_MS = 10 * 60 * 1000;

/**
 * Brings the database to the newest data version this svc knows; returns the migrations it ran itself.
 * Throws `DataVersionError` for data newer than this svc, or a migration another run left unfinished.
 */
export async function migrate(db: Database, logger: Logger, migrations: readonly Migration[] = MIGRATIONS, { waitMs = WAIT_MS } = {}): Promise<Migration[]> {
  const records = await db.collection<MigrationRecord>(MIGRATION_COLLECTION);
  const known = migrations.at(-1)?.version ?? 0;
  const newer = (await records.find({ version: { $gt: known } }, { sort: { version: -1 }, limit: 1 }))[0];
  if (newer) {
    throw new DataVersionError(
      `the database holds data version ${newer.version} ("${newer.name}"), written by svc ${newer.svcVersion}; this is svc ${SVC_VERSION}, which knows data versions up to ${known}: run svc ${newer.svcVersion} or newer on it (or restore a copy from before that upgrade)`,
    );
  }
  const ran: Migration[] = [];
  for (const migration of migrations) {
    const id = String(migration.version);
    try {
      await records.insertOne({ _id: id, version: migration.version, name: migration.name, state: 'running', svcVersion: SVC_VERSION, startedAt: new Date().toISOString() });
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      await doneByOther(records, migration, waitMs);
      continue;
    }
    logger.info({ dataVersion: migration.version }, `data migration ${migration.version}: ${migration.name}`);
    await migration.up(db, logger);
    await records.updateOne({ _id: id }, { $set: { state: 'done', doneAt: new Date().toISOString() } });
    ran.push(migration);
  }
  return ran;
}

/** Waits for a migration another instance (or an earlier run) recorded: done, or an error naming it. */
async function doneByOther(records: Collection<MigrationRecord>, migration: Migration, waitMs: number): Promise<void> {
  const until = Date.now() + waitMs;
  for (;;) {
    const record = await records.findOne({ _id: String(migration.version) });
    if (record?.state === 'done') return;
    if (Date.now() > until) {
      throw new DataVersionError(
        `data migration ${migration.version} ("${migration.name}") was started by svc ${record?.svcVersion ?? '?'} at ${record?.startedAt ?? '?'} and has not finished: if no instance is running it, it died half-way; check the data, then delete its record (_id "${migration.version}") in ${MIGRATION_COLLECTION} to run it again`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
