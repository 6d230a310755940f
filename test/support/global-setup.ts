import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { startMongoTestServer } from './mongo.ts';
import { ensureRedis } from './redis.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    mongoUrl: string;
    mongoKind: string;
  }
}

const loud = (line: string) => process.stderr.write(`\n${'!'.repeat(8)} ${line} ${'!'.repeat(8)}\n\n`);

/**
 * Finds or starts the real servers once for the whole run: Redis (REDIS_TEST_URL, a usable one at
 * 6379, or one of its own), and the MongoDB wire-protocol server (MONGODB_TEST_URL or
 * mongo-java-server). Outside CI a missing server skips its suites with a loud line; with CI=true it
 * fails the run.
 */
export default async function setup(project: TestProject) {
  // `/docs/scalar.js`, served from the sources' `vendor/scalar/` (npm's cache has it after the first run).
  const bundle = spawnSync(process.execPath, [fileURLToPath(new URL('../../bin/docs-bundle.js', import.meta.url))], { encoding: 'utf8' });
  if (bundle.status !== 0) throw new Error(bundle.stderr);
  const [redis, mongo] = await Promise.all([ensureRedis(), startMongoTestServer()]);
  const missing: string[] = [];
  if (!redis) missing.push('Redis');
  if (!mongo) missing.push('MongoDB wire-protocol server');
  if (missing.length && process.env.CI === 'true') throw new Error(`CI=true but these test servers are unavailable: ${missing.join(', ')}`);
  for (const m of missing) loud(`SKIPPED: suites that need ${m} (not available; set CI=true to make this a failure)`);
  if (redis) process.stderr.write(`Redis suites run against ${redis.how} at ${redis.url}\n`);
  if (mongo) process.stderr.write(`MongoDB suites run against ${mongo.kind} at ${mongo.url}\n`);
  project.provide('redisUrl', redis?.url ?? '');
  project.provide('mongoUrl', mongo?.url ?? '');
  project.provide('mongoKind', mongo?.kind ?? '');
  // What the run started, it stops (a Redis or MongoDB it found is left alone).
  return async () => {
    await Promise.all([redis?.stop(), mongo?.stop()]);
  };
}
