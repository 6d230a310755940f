import type { Session } from '../auth/sessions.ts';

/** The identity attached to an authenticated request (SPEC.md "Session"). */
export interface AuthUser {
  userId: string;
  isAdmin: boolean;
  provider: string;
}

/** A work-session guest (CONTRACT section 4): never an `authUser`. */
export interface WorkSessionGuest {
  id: string;
  pluginData: Record<string, unknown>;
  composition?: string | null;
}

/** Hono `Variables`, typed once for core and plugins. */
export interface AppVariables {
  requestId: string;
  authUser?: AuthUser;
  /** The session behind `authUser` (its `hash` is the `sid` of provider token blobs). */
  session?: Session;
  workSession?: WorkSessionGuest;
  /** `c.get('can')('permission')`: the permission resolver chain. */
  can: (permission: string) => Promise<boolean>;
  /** The session hook re-issued the session cookie on this response (sliding mode). */
  cookieRefreshed?: boolean;
}

export interface AppEnv {
  Variables: AppVariables;
}
