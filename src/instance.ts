import type { Auth } from './auth/index.ts';
import type { Config } from './config/load.ts';
import type { Database } from './db/index.ts';
import type { EventListener } from './events.ts';
import type { Logger } from './logger.ts';
import type { Realtime } from './realtime/index.ts';
import type { Store, Stores } from './store/index.ts';

/**
 * The server instance: everything core routes and plugins receive. Nothing in svc reaches for
 * globals or `process.env`; it gets this.
 */
export interface ServerInstance {
  config: Config;
  logger: Logger;
  /** Store instance `cache`, the default for plugins. */
  store: Store;
  /** Every store instance and the role mapping (`stores.forRole('sessions')`). */
  stores: Stores;
  db: Database;
  /** Sessions, users and the middleware: `auth.authenticate()`, `auth.registerPermissionResolver()`... */
  auth: Auth;
  /** socket.io: `realtime.io` (rooms `user:<userId>` and `work-session:<sha256 of id>`: `realtime.rooms`; docs/realtime.md). */
  realtime: Realtime;
  on(name: string, listener: EventListener): void;
  emit(name: string, payload: unknown): void;
  /**
   * `fn` runs when svc shuts down, before the stores and the database close: stop what you started
   * (child processes, timers). One that throws is logged; the others still run.
   */
  onClose(fn: () => void | Promise<void>): void;
  /** Runs the `onClose` callbacks (svc's shutdown calls it once). */
  runCloseCallbacks(): Promise<void>;
}
