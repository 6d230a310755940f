import { Hono } from 'hono';
import { mountRoutes, type AppEnv, type PluginInstance, type RouteDefinition } from '../../src/index.ts';
import type { Todo } from './schemas.ts';
import { todoRoutes } from './routes.ts';
import { TodoService } from './service.ts';

/**
 * The todo reference plugin (`svc__todo`, mounted at `/svc__todo`): the pattern to copy.
 * schemas.ts (valibot) -> service.ts (rules, no HTTP) -> routes.ts (one factory per route) -> here.
 */
export default async function todoPlugin(instance: PluginInstance): Promise<Hono<AppEnv>> {
  const todos = new TodoService(await instance.db.collection<Todo>('svc__todo-todo'));
  const app = new Hono<AppEnv>();
  mountRoutes(app, todoRoutes(instance, todos) as RouteDefinition[]);
  return app;
}
