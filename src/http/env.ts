/** The identity attached to an authenticated request (SPEC.md "Session"). */
export interface AuthUser {
  userId: string;
  isAdmin: boolean;
  /** `password`, an OAuth provider id, ... or `api_key` for a request made with an API key. */
  provider: string;
  /** Present when an API key (`Authorization: Bearer svc_...`) authenticated the request (CONTRACT 15). */
  apiKey?: { id: string; scopes: string[] };
}

/** The API key behind a key request's `authUser` (CONTRACT 15): what `GET /auth/session` tells of it. Times are epoch ms. */
export interface ApiKeyCaller {
  id: string;
  userId: string;
  scopes: string[];
  createdAt: number;
  /** null: never expires. */
  expiresAt: number | null;
}

// The session record and the session a request sees are declared here, beside the Variables that carry
// them, so that this module imports nothing (auth/sessions.ts, which keeps them, re-exports them).

/** What the store keeps under `auth:session:<sha256hex>` (CONTRACT section 3). Times are epoch ms. */
export interface SessionRecord extends AuthUser {
  createdAt: number;
  expiresAt: number;
  /** Present (true) only when the user has TOTP on: `GET /auth/session` tells without a database read. */
  totp?: true;
}

export interface Session extends SessionRecord {
  /** SHA-256 hex of the id: the store key's suffix and the `sid` given to plugins. */
  hash: string;
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
  /** The API key behind `authUser` on a key request (never together with `session`). */
  apiKey?: ApiKeyCaller;
  /** A route layer that takes keys (`scopes`) let this key request through: `authenticate()` lets it pass too. */
  apiKeyAccepted?: boolean;
  /** `c.get('can')('permission')`: the permission resolver chain. */
  can: (permission: string) => Promise<boolean>;
  /** The session hook re-issued the session cookie on this response (sliding mode). */
  cookieRefreshed?: boolean;
}

export interface AppEnv {
  Variables: AppVariables;
}

/**
 * What the Bun and Deno doors (src/server-bun.ts, src/server-deno.ts) pass as the app's `env`: the
 * socket's address, which a Web-standard `Request` does not carry (the Node door passes Node's request).
 */
export interface RuntimeBindings {
  clientAddress?: string;
  /** Set by a Web-standard door: `GET /auth/session`'s lane keys what it looked up by the request (`laneKey`). */
  webDoor: true;
}
