import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import type { Database } from './db.ts';
import { EmbeddedDatabase } from './embedded.ts';

export * from './db.ts';

/** MongoDB when `MONGODB_URL` is set, else the embedded database under `SVC_DATA_DIR`. */
export async function openDatabase(config: Config, logger: Logger): Promise<Database> {
  if (config.env.mongodbUrl) {
    // Loaded on demand: the driver is a sizeable part of an idle process that does not use it.
    const { MongoDatabase } = await import('./mongo.ts');
    return MongoDatabase.connect(config.env.mongodbUrl, logger);
  }
  logger.warn({ dataDir: config.env.dataDir }, 'MONGODB_URL is not set: using the embedded document database (one process only)');
  return new EmbeddedDatabase(config.env.dataDir);
}
