/**
 * The embedded database's writes through one open file per collection, each written at once. nedb
 * appends each insert, update and removal to its file with `fs.appendFile`, which opens, writes and
 * closes the file every time, each step a trip through libuv's thread pool. Here the file stays open
 * between writes and each write is one `write(2)` from this thread: appending a few hundred bytes to the
 * page cache takes microseconds, while handing it to the pool cost about 40 µs of CPU (a thread woken,
 * the result posted back; `fh.appendFile` 43 µs against `writeSync` 4 µs a line in a loop), and on a
 * busy 2-core machine the woken thread competes with the event loop and the password hashes. Each write
 * is still handed to the system before the operation answers, as before (no fsync then or now). What
 * it costs: a disk whose writes block (a full page cache being flushed, a network filesystem) blocks
 * the event loop for that time; the embedded database is for one process on a local disk
 * (docs/operations.md), MongoDB for the rest.
 *
 * nedb rewrites the file elsewhere and renames it over the old one when it loads and when it compacts
 * (`persistCachedDatabaseAsync`), and deletes it on drop: the descriptor, which would go on writing to
 * the replaced file, is closed before each and opened again by the next write. nedb runs a datastore's
 * operations one at a time (its executor), so no write runs beside a compaction of the same file.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';

/** nedb's own serializer (lib/model.js): the lines it writes, byte for byte. */
const { serialize } = createRequire(import.meta.url)('@seald-io/nedb/lib/model.js') as { serialize(doc: unknown): string };

/** What this module replaces and wraps of a datastore's `persistence` (nedb 4, lib/persistence.js). */
interface Persistence {
  filename: string;
  inMemoryOnly: boolean;
  modes: { fileMode: number };
  persistNewStateAsync(docs: unknown[]): Promise<void>;
  persistCachedDatabaseAsync(): Promise<void>;
  dropDatabaseAsync(): Promise<void>;
}

export function appendThroughOpenFile(datastore: unknown): void {
  const persistence = (datastore as { persistence: Persistence }).persistence;
  if (persistence.inMemoryOnly) return;
  let fd: number | null = null;

  const closeFile = () => {
    if (fd === null) return;
    const closing = fd;
    fd = null;
    try {
      closeSync(closing);
    } catch {
      // Already unusable: the next write opens the file again.
    }
  };

  // async: a failed open or write rejects the operation, as nedb's own append did.
  persistence.persistNewStateAsync = async (docs) => {
    let lines = '';
    for (const doc of docs) lines += serialize(doc) + '\n';
    if (lines.length === 0) return;
    fd ??= openSync(persistence.filename, 'a', persistence.modes.fileMode);
    const bytes = Buffer.from(lines, 'utf8');
    try {
      // A regular file takes the whole write but when the disk fills: the rest is tried (and then throws).
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
    } catch (err) {
      closeFile(); // a descriptor in a bad state is not kept; the next write opens the file again
      throw err;
    }
  };

  for (const method of ['persistCachedDatabaseAsync', 'dropDatabaseAsync'] as const) {
    const original = persistence[method].bind(persistence);
    persistence[method] = async () => {
      closeFile();
      return original();
    };
  }
}
