// Versioned data migrations (issue 53): recorded in svc__core-migration, run once however many instances
// start together, and a start-up that refuses data newer than itself, naming both versions. On the
// embedded database and on MongoDB (the wire-protocol test server, two connections: two instances).

import { randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Database } from '../../src/db/db.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { DataVersionError, migrate, MIGRATION_COLLECTION, MIGRATIONS, type Migration } from '../../src/db/migrations.ts';
import { MongoDatabase } from '../../src/db/mongo.ts';
import { createLogger } from '../../src/logger.ts';
import { SVC_VERSION } from '../../src/version.ts';
import { PROJECT_DIR, startSvc, stopAll, tempDir } from '../support/spawn.ts';

const mongoUrl = inject('mongoUrl');
const logger = createLogger('silent');
const opened: Database[] = [];
afterAll(async () => {
  await Promise.allSettled(opened.map((db) => db.close()));
  await stopAll();
});

/** Two handles on one fresh database: two instances of svc. */
async function twoHandles(kind: 'embedded' | 'mongodb'): Promise<[Database, Database]> {
  if (kind === 'embedded') {
    const shared = EmbeddedDatabase.inMemory();
    opened.push(shared);
    return [shared, shared];
  }
  const url = mongoUrl!.replace(/\/[^/?]*(\?|$)/, `/migrations_${randomUUID().slice(0, 8)}$1`);
  const pair = [await MongoDatabase.connect(url), await MongoDatabase.connect(url)] as [Database, Database];
  opened.push(...pair);
  return pair;
}

const SVC_VERSION_PATTERN = /^\d+\.\d+\.\d+/;

const KINDS: ('embedded' | 'mongodb')[] = mongoUrl ? ['embedded', 'mongodb'] : ['embedded'];

describe.each(KINDS)('data migrations on %s', (kind) => {
  it('a fresh database is brought to the newest data version, recorded; a second run has nothing to do', async () => {
    const [db] = await twoHandles(kind);
    expect((await migrate(db, logger)).map((m) => m.version)).toEqual(MIGRATIONS.map((m) => m.version));
    const records = await (await db.collection(MIGRATION_COLLECTION)).find({});
    expect(records).toEqual(MIGRATIONS.map((m) => expect.objectContaining({ _id: String(m.version), version: m.version, name: m.name, state: 'done', svcVersion: SVC_VERSION })));
    expect(SVC_VERSION).toMatch(SVC_VERSION_PATTERN);
    expect(await migrate(db, logger)).toEqual([]);
  });

  it('instances starting together: 6 parallel runs over two connections run each migration once, and none returns before it is done', async () => {
    const [a, b] = await twoHandles(kind);
    let runs = 0;
    let finished = false;
    const slow: Migration[] = [
      ...MIGRATIONS,
      {
        version: MIGRATIONS.length + 1,
        name: 'a test migration that takes a while',
        up: async () => {
          runs++;
          await new Promise((r) => setTimeout(r, 300));
          finished = true;
        },
      },
    ];
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => migrate(i % 2 ? b : a, logger, slow).then((ran) => ({ ran, finishedWhenReturned: finished }))));
    expect(runs).toBe(1);
    expect(results.filter((r) => r.ran.some((m) => m.version === MIGRATIONS.length + 1))).toHaveLength(1);
    expect(results.every((r) => r.finishedWhenReturned)).toBe(true);
  });

  it('data newer than this svc stops it, naming both versions; a migration left half-way is named, never run again by itself', async () => {
    const [db] = await twoHandles(kind);
    const records = await db.collection<Record<string, unknown> & { _id: string }>(MIGRATION_COLLECTION);
    await migrate(db, logger);
    await records.insertOne({ _id: '99', version: 99, name: 'from the future', state: 'done', svcVersion: '9.1.0', startedAt: new Date().toISOString() });
    const newer = await migrate(db, logger).catch((e: unknown) => e);
    expect(newer).toBeInstanceOf(DataVersionError);
    expect((newer as Error).message).toContain('data version 99');
    expect((newer as Error).message).toContain('written by svc 9.1.0');
    expect((newer as Error).message).toContain(`this is svc ${SVC_VERSION}, which knows data versions up to ${MIGRATIONS.at(-1)!.version}`);

    const [other] = await twoHandles(kind);
    let ran = false;
    const next: Migration[] = [...MIGRATIONS, { version: MIGRATIONS.length + 1, name: 'interrupted', up: async () => void (ran = true) }];
    await (await other.collection<Record<string, unknown> & { _id: string }>(MIGRATION_COLLECTION)).insertOne({ _id: String(MIGRATIONS.length + 1), version: MIGRATIONS.length + 1, name: 'interrupted', state: 'running', svcVersion: SVC_VERSION, startedAt: new Date().toISOString() });
    const stuck = await migrate(other, logger, next, { waitMs: 300 }).catch((e: unknown) => e);
    expect(stuck).toBeInstanceOf(DataVersionError);
    expect((stuck as Error).message).toMatch(/data migration \d+ \("interrupted"\) was started by svc .* and has not finished/);
    expect(ran).toBe(false);
  });
});

describe('a real svc process and `svc migrate`', () => {
  it('svc migrate brings a data folder to the current version; a start on newer data exits non-zero, naming both versions', async () => {
    const dataDir = tempDir('svc-migrate-data-');
    const appRoot = tempDir('svc-migrate-app-');
    const env = { ...process.env, SVC_APP_PATH: appRoot, SVC_DATA_DIR: dataDir, CACHE_URL: '', MONGODB_URL: '' };
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(PROJECT_DIR, 'bin/svc.js'), 'migrate'], { cwd: appRoot, env });
    expect(stdout).toContain(`migrated to data version 1: ${MIGRATIONS[0]!.name}`);
    expect(stdout).toContain(`data version ${MIGRATIONS.at(-1)!.version} (svc ${SVC_VERSION})`);

    const db = new EmbeddedDatabase(dataDir);
    await (await db.collection<Record<string, unknown> & { _id: string }>(MIGRATION_COLLECTION)).insertOne({ _id: '99', version: 99, name: 'from the future', state: 'done', svcVersion: '9.1.0', startedAt: new Date().toISOString() });
    await db.close();
    const svc = await startSvc({ appRoot, dataDir });
    expect(svc.ready).toBe(false);
    expect(await svc.exited).not.toBe(0);
    expect(svc.stderr()).toContain('data version 99');
    expect(svc.stderr()).toContain(`this is svc ${SVC_VERSION}`);
  }, 60_000);
});
