/**
 * The embedded database's writes through one open file per collection. nedb appends each insert, update
 * and removal to its file with `fs.appendFile`, which opens, writes and closes the file every time: in a
 * CPU profile of svc answering requests that each write an audit record and webhook delivery records,
 * those opens and closes were a sixth of all the CPU svc spent (bench/webhooks-cpu.ts, issue 54).
 * Here the file stays open between writes; each write is still handed to the system before the operation
 * answers, as before (no fsync then or now).
 *
 * nedb rewrites the file elsewhere and renames it over the old one when it loads and when it compacts
 * (`persistCachedDatabaseAsync`), and deletes it on drop: the handle, which would go on writing to the
 * replaced file, is closed before each and opened again by the next write. nedb runs a datastore's
 * operations one at a time (its executor), so no write runs beside a compaction of the same file.
 */
import { open, type FileHandle } from 'node:fs/promises';
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
  let handle: Promise<FileHandle> | null = null;

  const closeFile = async () => {
    const closing = handle;
    handle = null;
    if (closing) await (await closing.catch(() => null))?.close();
  };

  persistence.persistNewStateAsync = async (docs) => {
    let lines = '';
    for (const doc of docs) lines += serialize(doc) + '\n';
    if (lines.length === 0) return;
    handle ??= open(persistence.filename, 'a', persistence.modes.fileMode);
    let file: FileHandle;
    try {
      file = await handle;
    } catch (err) {
      handle = null; // the next write tries again
      throw err;
    }
    await file.appendFile(lines, 'utf8');
  };

  for (const method of ['persistCachedDatabaseAsync', 'dropDatabaseAsync'] as const) {
    const original = persistence[method].bind(persistence);
    persistence[method] = async () => {
      await closeFile();
      return original();
    };
  }
}
