import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { DuplicateKeyError, type Database } from '../../src/db/db.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { MongoDatabase } from '../../src/db/mongo.ts';

const mongoUrl = inject('mongoUrl');

interface User {
  _id: string;
  email: string;
  name?: string;
  tags?: string[];
  n?: number;
  profile?: { city?: string };
}
interface Link {
  _id: string;
  provider: string;
  providerAccountId: string;
  userId: string;
}

/**
 * ONE suite for the Database interface, run against the embedded database (in memory and on disk)
 * and a MongoDB wire-protocol server. Each run uses fresh collection names.
 */
function databaseContract(name: string, open: () => Promise<Database>) {
  describe(`Database contract: ${name}`, () => {
    let db: Database;
    const ready = open().then((d) => (db = d));
    const suffix = randomUUID().slice(0, 8);
    const users = async () => (await ready).collection<User>(`users_${suffix}`, [{ fields: ['email'] }]);
    const links = async () => (await ready).collection<Link>(`links_${suffix}`, [{ fields: ['provider', 'providerAccountId'] }]);
    afterAll(async () => {
      await db?.close();
    });

    it('inserts and finds by equality, dotted paths and operators', async () => {
      const c = await users();
      await c.insertOne({ _id: 'u1', email: 'a@x', n: 1, tags: ['ADMIN'], profile: { city: 'Oslo' } });
      await c.insertOne({ _id: 'u2', email: 'b@x', n: 2, tags: [] });
      await c.insertOne({ _id: 'u3', email: 'c@x', n: 3 });
      expect(await c.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', email: 'a@x', n: 1, tags: ['ADMIN'], profile: { city: 'Oslo' } });
      expect(await c.findOne({ email: 'nobody' })).toBeNull();
      expect((await c.findOne({ 'profile.city': 'Oslo' }))?._id).toBe('u1');
      expect((await c.findOne({ tags: 'ADMIN' }))?._id).toBe('u1'); // equality matches an array element
      expect((await c.find({ n: { $gte: 2 } }, { sort: { n: 1 } })).map((u) => u._id)).toEqual(['u2', 'u3']);
      expect((await c.find({ _id: { $in: ['u1', 'u3'] } }, { sort: { _id: 1 } })).map((u) => u._id)).toEqual(['u1', 'u3']);
      expect((await c.find({ tags: { $exists: false } })).map((u) => u._id)).toEqual(['u3']);
      expect((await c.find({ $or: [{ n: 1 }, { n: 3 }] }, { sort: { n: -1 } })).map((u) => u._id)).toEqual(['u3', 'u1']);
      expect(await c.count({ n: { $ne: 2 } })).toBe(2);
    });

    it('sorts, skips and limits', async () => {
      const c = await users();
      const page = await c.find({}, { sort: { email: -1 }, skip: 1, limit: 1 });
      expect(page.map((u) => u.email)).toEqual(['b@x']);
      expect(await c.count({})).toBe(3);
    });

    it('updateOne applies operators and returns the document after the update', async () => {
      const c = await users();
      const after = await c.updateOne({ _id: 'u2' }, { $set: { name: 'Bea', 'profile.city': 'Rome' }, $inc: { n: 5 }, $push: { tags: 'X' } });
      expect(after).toEqual({ _id: 'u2', email: 'b@x', n: 7, tags: ['X'], name: 'Bea', profile: { city: 'Rome' } });
      const pulled = await c.updateOne({ _id: 'u2' }, { $pull: { tags: 'X' }, $unset: { name: true } });
      expect(pulled).toEqual({ _id: 'u2', email: 'b@x', n: 7, tags: [], profile: { city: 'Rome' } });
      const added = await c.updateOne({ _id: 'u2' }, { $addToSet: { tags: 'Y' } });
      await c.updateOne({ _id: 'u2' }, { $addToSet: { tags: 'Y' } });
      expect(added?.tags).toEqual(['Y']);
      expect((await c.findOne({ _id: 'u2' }))?.tags).toEqual(['Y']);
      expect(await c.updateOne({ _id: 'none' }, { $set: { n: 1 } })).toBeNull();
    });

    it('a unique index refuses a duplicate with DuplicateKeyError, on insert and on update', async () => {
      const c = await users();
      const dup = await c.insertOne({ _id: 'u9', email: 'a@x' }).catch((e: unknown) => e);
      expect(dup).toBeInstanceOf(DuplicateKeyError);
      expect((dup as DuplicateKeyError).status).toBe(409);
      const dupUpdate = await c.updateOne({ _id: 'u3' }, { $set: { email: 'a@x' } }).catch((e: unknown) => e);
      expect(dupUpdate).toBeInstanceOf(DuplicateKeyError);
      expect((await c.findOne({ _id: 'u3' }))?.email).toBe('c@x');
      const dupId = await c.insertOne({ _id: 'u1', email: 'new@x' }).catch((e: unknown) => e);
      expect(dupId).toBeInstanceOf(DuplicateKeyError);
    });

    it('insertMany writes several documents at once; a duplicate among them is DuplicateKeyError', async () => {
      const c = await users();
      await c.insertMany([
        { _id: 'm1', email: 'm1@x', n: 10 },
        { _id: 'm2', email: 'm2@x', n: 11 },
      ]);
      await c.insertMany([]);
      expect((await c.find({ n: { $gte: 10 } }, { sort: { n: 1 } })).map((u) => u._id)).toEqual(['m1', 'm2']);
      const dup = await c.insertMany([{ _id: 'm1', email: 'again@x' }]).catch((e: unknown) => e);
      expect(dup).toBeInstanceOf(DuplicateKeyError);
      expect((await c.findOne({ _id: 'm1' }))?.email).toBe('m1@x');
      await c.deleteMany({ n: { $gte: 10 } });
    });

    it('a compound unique index holds on the pair, not on each field', async () => {
      const c = await links();
      await c.insertOne({ _id: randomUUID(), provider: 'github', providerAccountId: '1', userId: 'u1' });
      await c.insertOne({ _id: randomUUID(), provider: 'github', providerAccountId: '2', userId: 'u1' });
      await c.insertOne({ _id: randomUUID(), provider: 'google', providerAccountId: '1', userId: 'u2' });
      const dup = await c.insertOne({ _id: randomUUID(), provider: 'github', providerAccountId: '1', userId: 'u2' }).catch((e: unknown) => e);
      expect(dup).toBeInstanceOf(DuplicateKeyError);
      expect(await c.count({ userId: 'u2' })).toBe(1);
    });

    it('concurrent inserts of one unique value: exactly one wins', async () => {
      const c = await users();
      const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => c.insertOne({ _id: `race${i}`, email: 'race@x' })));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(DuplicateKeyError);
    });

    it('upsert inserts, then replaces by _id', async () => {
      const c = await users();
      await c.upsert({ _id: 'seed', email: 'seed@x', n: 1 });
      await c.upsert({ _id: 'seed', email: 'seed@x', name: 'replaced' });
      expect(await c.findOne({ _id: 'seed' })).toEqual({ _id: 'seed', email: 'seed@x', name: 'replaced' });
    });

    it('deleteOne and deleteMany report what they removed', async () => {
      const c = await users();
      expect(await c.deleteOne({ _id: 'seed' })).toBe(true);
      expect(await c.deleteOne({ _id: 'seed' })).toBe(false);
      expect(await c.deleteMany({ _id: { $in: ['u1', 'u2', 'nope'] } })).toBe(2);
      expect(await c.findOne({ _id: 'u1' })).toBeNull();
    });

    it('collection() is idempotent: indexes are ensured again without error', async () => {
      const c = await users();
      await c.insertOne({ _id: 'again', email: 'again@x' });
      const again = await users();
      expect((await again.findOne({ _id: 'again' }))?.email).toBe('again@x');
    });

    it('ping answers', async () => {
      await ready;
      await expect(db.ping()).resolves.toBeUndefined();
    });
  });
}

databaseContract('embedded (in memory)', async () => EmbeddedDatabase.inMemory());

const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-db-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
databaseContract('embedded (files)', async () => new EmbeddedDatabase(path.join(dataDir, 'contract')));

describe('embedded database on disk', () => {
  it('keeps documents and unique indexes across a close and a reopen', async () => {
    const dir = path.join(dataDir, 'persist');
    const first = new EmbeddedDatabase(dir);
    const c1 = await first.collection<User>('svc__core-user', [{ fields: ['email'] }]);
    await c1.insertOne({ _id: 'p1', email: 'keep@x' });
    await c1.updateOne({ _id: 'p1' }, { $set: { name: 'Kept' } });
    await first.close();

    const second = new EmbeddedDatabase(dir);
    const c2 = await second.collection<User>('svc__core-user', [{ fields: ['email'] }]);
    expect(await c2.findOne({ _id: 'p1' })).toEqual({ _id: 'p1', email: 'keep@x', name: 'Kept' });
    await expect(c2.insertOne({ _id: 'p2', email: 'keep@x' })).rejects.toBeInstanceOf(DuplicateKeyError);
    await second.close();
  });

  it('every write is in the file when it answers, before and after a compaction (no close: as after a crash)', async () => {
    const dir = path.join(dataDir, 'appends');
    const db = new EmbeddedDatabase(dir);
    const users = await db.collection<User>('svc__core-user', [{ fields: ['email'] }]);
    await users.insertOne({ _id: 'a1', email: 'a1@x' });
    await users.insertOne({ _id: 'a2', email: 'a2@x' });
    // nedb compacts by writing a new file and renaming it over the old one: later writes must reach the new file.
    await (users as unknown as { ds: { compactDatafileAsync(): Promise<void> } }).ds.compactDatafileAsync();
    await users.updateOne({ _id: 'a1' }, { $set: { name: 'After' } });
    await users.insertOne({ _id: 'a3', email: 'a3@x' });
    await users.deleteOne({ _id: 'a2' });
    // A copy of the folder as it is now, opened as a new database: what a restart after a crash would read.
    const copy = path.join(dataDir, 'appends-copy');
    cpSync(dir, copy, { recursive: true });
    rmSync(path.join(copy, 'LOCK'), { force: true });
    const reopened = new EmbeddedDatabase(copy);
    const again = await reopened.collection<User>('svc__core-user', [{ fields: ['email'] }]);
    expect(await again.find({}, { sort: { _id: 1 } })).toEqual([
      { _id: 'a1', email: 'a1@x', name: 'After' },
      { _id: 'a3', email: 'a3@x' },
    ]);
    await Promise.all([db.close(), reopened.close()]);
  });

  it('refuses a second process-level opener of the same folder while the first holds it', async () => {
    const dir = path.join(dataDir, 'locked');
    const first = new EmbeddedDatabase(dir);
    // Same pid: the lock is ours, so simulate another live process by writing a live foreign pid.
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path.join(dir, 'LOCK'), String(process.ppid));
    expect(() => new EmbeddedDatabase(dir)).toThrow(/in use by process/);
    await first.close();
  });
});

describe.skipIf(!mongoUrl)('MongoDB', () => {
  databaseContract(`MongoDB (${inject('mongoKind')})`, () => MongoDatabase.connect(mongoUrl));

  // Two instances write one user at once (a magic link's conditional write, a logout-all moving the
  // epoch). MongoDB applies each write and answers it atomically; the answer of a write that matched
  // `epoch: {$exists: false}` can never carry the other's epoch. mongo-java-server with netty's default
  // thread pool did (round ~25), and a login then passed an epoch check it should have failed.
  it('an updateOne is answered with the document its own write left, while another connection writes it too (300 rounds)', async () => {
    const suffix = randomUUID().slice(0, 8);
    const [a, b] = await Promise.all([MongoDatabase.connect(mongoUrl), MongoDatabase.connect(mongoUrl)]);
    try {
      type Doc = User & { epoch?: number; ok?: boolean };
      const [ca, cb] = await Promise.all([a.collection<Doc>(`torn_${suffix}`), b.collection<Doc>(`torn_${suffix}`)]);
      const seen: number[] = [];
      for (let round = 0; round < 300; round++) {
        const _id = `u${round}`;
        await ca.insertOne({ _id, email: `${_id}@x`, tags: Array.from({ length: 50 }, (_, k) => `tag${k}`) });
        const [matched, moved] = await Promise.all([ca.updateOne({ _id, epoch: { $exists: false } }, { $set: { ok: true } }), cb.updateOne({ _id }, { $inc: { epoch: 1 } })]);
        expect(moved?.epoch).toBe(1);
        if (matched && matched.epoch !== undefined) seen.push(round);
      }
      expect(seen, 'rounds whose conditional write was answered with the other write in it').toEqual([]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('an unreachable MongoDB fails fast with a clear message and hides the password', async () => {
    const started = Date.now();
    const err = (await MongoDatabase.connect('mongodb://u:hunter2@127.0.0.1:1/x').catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/cannot reach MongoDB at mongodb:\/\/u:\*\*\*@127\.0\.0\.1:1\/x \(server selection timeout 1\.2 s\): .*ECONNREFUSED/);
    expect(err.message).not.toContain('hunter2');
    // Fast by its cause (the timeout above); the clock only tells it from the driver's 30 s default,
    // with room for a busy machine (quiet: ~1.25 s).
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
