import type { RouteDefinition } from '../src/http/route.ts';
import type { ServerInstance } from '../src/instance.ts';
import { login, logout, logoutAll, session } from './auth/session.ts';
import { createUser, deleteUser, getUser, listUsers, updateUser } from './auth/users.ts';
import { health } from './health.ts';

const factories = [health, login, logout, logoutAll, session, createUser, listUsers, getUser, updateUser, deleteUser];

/** Every core route factory; `createApp` mounts what they return. */
export const coreRoutes = (instance: ServerInstance): RouteDefinition[] => factories.map((f) => f(instance) as RouteDefinition);
