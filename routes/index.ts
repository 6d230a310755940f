import type { RouteDefinition } from '../src/http/route.ts';
import type { ServerInstance } from '../src/instance.ts';
import { health } from './health.ts';

/** Every core route factory; `createApp` mounts what they return. */
export const coreRoutes = (instance: ServerInstance): RouteDefinition[] => [health(instance)] as RouteDefinition[];
