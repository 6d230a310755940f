import type * as v from 'valibot';
import type { configSchema } from './schema.ts';

/** What an app's `svc.config.ts` may hold: every key optional, as the schema's defaults fill them in. */
export type AppConfig = v.InferInput<typeof configSchema>;

/**
 * Types an app's `svc.config.ts` (or `.js`) against svc's config schema, so an editor and `tsc` catch a
 * misspelt key or a wrong type before start-up does:
 *
 * ```ts
 * import { defineConfig } from '@svc/core';
 * export default defineConfig({ plugins: ['@svc/plugin-cli-connector'], auth: { session: { ttl: 3600 } } });
 * ```
 *
 * It returns its argument: start-up validates the file as ever (CONTRACT 0: unknown keys stop it).
 */
export function defineConfig(config: AppConfig): AppConfig {
  return config;
}
