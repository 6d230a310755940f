/**
 * `@svc/core`: what plugin authors import. Plugins import `hono` and `valibot` themselves.
 */
export { defineRoute, mountRoutes, type RouteDefinition, type RouteSchema } from './http/route.ts';
export { AppError, forbidden, notFound, unauthenticated, UnavailableError, validationFailed } from './http/errors.ts';
export type { AppEnv, AppVariables, AuthUser, WorkSessionGuest } from './http/env.ts';
export type { ServerInstance } from './instance.ts';
export type { PluginInstance, PluginModule, PluginSeeds } from './plugins/loader.ts';
export type { Collection, Database, Doc, Filter, Update } from './db/db.ts';
export { DuplicateKeyError } from './db/db.ts';
export type { Store } from './store/store.ts';
export type { InspectedEntry, InspectedKey, ScanQuery, StoreInspector } from './store/inspect.ts';
export type { AuthenticateOptions, PermissionResolver } from './auth/index.ts';
export type { OAuthLoginContext, OAuthLoginHandler, ProviderTokenBlob } from './auth/oauth/flow.ts';
export type { Asset, AssetResolver } from './auth/assets.ts';
export type { RealtimeServer, RealtimeSocket, SocketData } from './realtime/index.ts';
export { defineConfig, type AppConfig } from './config/define.ts';
