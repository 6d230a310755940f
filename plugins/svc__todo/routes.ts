import type { Context } from 'hono';
import { defineRoute, type AppEnv, type AuthUser, type PluginInstance } from '../../src/index.ts';
import { createTodoSchema, todoParams, updateTodoSchema } from './schemas.ts';
import type { TodoService } from './service.ts';

const tags = ['svc__todo'];
/** What an API key needs here (CONTRACT 15): reading, or changing. Sessions and guests need none. */
const read = ['svc__todo:read'];
const write = ['svc__todo:write'];

/**
 * Who is asking: the logged-in user, or a work-session guest, who reads as the user named in
 * `pluginData.svc__todo.owner` of the work session (never as an admin). Guests cannot write:
 * `authenticatedOrWorksession` answers their writes with 403 `read_only_guest`.
 */
function viewer(c: Context<AppEnv>): AuthUser {
  const user = c.get('authUser');
  if (user) return user;
  const shared = c.get('workSession')?.pluginData.svc__todo as { owner?: unknown } | undefined;
  return { userId: typeof shared?.owner === 'string' ? shared.owner : '', isAdmin: false, provider: 'work-session' };
}

/**
 * The routes of the reference plugin: one factory each (SPEC.md "Reference plugin routes"). Every
 * route needs a session, a work session, or an API key with the route's scope (`svc__todo:read` or
 * `svc__todo:write`); data goes out in the `{ data }` wrapper (CONTRACT section 2).
 */
export function todoRoutes(instance: PluginInstance, todos: TodoService) {
  const authenticate = instance.auth.authenticatedOrWorksession(instance.plugin.key);
  return [
    defineRoute({
      method: 'GET',
      path: '/all',
      onRequest: authenticate,
      scopes: read,
      config: { type: 'dataList' },
      schema: { summary: 'List todos', description: 'Your items; an admin sees every user\'s items.', tags },
      handler: async (c) => {
        const items = await todos.list(viewer(c));
        return c.json({ data: items, meta: { total: items.length } });
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/todo/:_id',
      onRequest: authenticate,
      scopes: read,
      config: { type: 'dataRead' },
      schema: { summary: 'Read a todo', tags, params: todoParams },
      handler: async (c, { params }) => c.json({ data: await todos.get(viewer(c), params._id) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/todo',
      onRequest: authenticate,
      scopes: write,
      config: { type: 'dataCreate' },
      schema: { summary: 'Create a todo', description: 'With `broadcast: true`, emits `coreTodoCreated`.', tags, body: createTodoSchema },
      handler: async (c, { body }) => {
        const payload = { data: await todos.create(viewer(c), body) };
        if (body.broadcast) instance.emit('coreTodoCreated', payload);
        return c.json(payload, 201);
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/todo/:_id',
      onRequest: authenticate,
      scopes: write,
      config: { type: 'dataUpdate' },
      schema: { summary: 'Change a todo', tags, params: todoParams, body: updateTodoSchema },
      handler: async (c, { params, body }) => c.json({ data: await todos.update(viewer(c), params._id, body) }),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/todo/:_id',
      onRequest: authenticate,
      scopes: write,
      config: { type: 'dataDelete' },
      schema: { summary: 'Delete a todo (soft: the record is kept, flagged)', tags, params: todoParams },
      handler: async (c, { params }) => c.json({ data: await todos.remove(viewer(c), params._id) }),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/todo/:_id/hard',
      onRequest: authenticate,
      scopes: write,
      config: { type: 'dataDelete' },
      schema: { summary: 'Delete a todo for good', tags, params: todoParams },
      handler: async (c, { params }) => c.json({ data: await todos.removeHard(viewer(c), params._id) }),
    }),
  ];
}
