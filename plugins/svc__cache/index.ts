import { Hono } from 'hono';
import { mountRoutes, type AppEnv, type PluginInstance, type RouteDefinition } from '../../src/index.ts';
import { cacheRoutes } from './routes.ts';

export { seeds } from './seeds.ts';
export { SECRET_KEY_PATTERNS } from './redact.ts';

/**
 * The cache list (`svc__cache`, mounted at `/svc__cache`): a read-only admin view of the store
 * instances, with secret-looking JSON values redacted. It reads them through the stores' read-only
 * inspection interface (`Store.inspect`), opened per request, never through a store adapter itself.
 */
export default function cachePlugin(instance: PluginInstance): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  mountRoutes(app, cacheRoutes(instance) as RouteDefinition[]);
  return app;
}
