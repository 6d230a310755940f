// The routes the client calls (docs/api.md: sessions, OAuth, account and MFA, passkeys, sign-up and recovery) and the JSON each takes and gives.
// One table, so a test can hold it against the service's /openapi.json (test/e2e/client.test.ts): a route the
// service adds, renames or reshapes and the client misses fails `npm test`.

import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/browser';

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** Every route: method and path (`:name` is a path parameter). */
export const routes = {
  // 3. Sessions and password login
  login: ['POST', '/auth/login'],
  logout: ['POST', '/auth/logout'],
  logoutAll: ['POST', '/auth/logout-all'],
  session: ['GET', '/auth/session'],
  // 14. What the login page offers (captcha, sign-up, magic link, passkeys, providers)
  authConfig: ['GET', '/auth/config'],
  notMe: ['POST', '/auth/not-me'],
  // 3. Users (admin)
  createUser: ['POST', '/auth/users'],
  listUsers: ['GET', '/auth/users'],
  getUser: ['GET', '/auth/users/:id'],
  updateUser: ['PATCH', '/auth/users/:id'],
  deleteUser: ['DELETE', '/auth/users/:id'],
  userSessions: ['GET', '/auth/users/:id/sessions'],
  endUserSession: ['DELETE', '/auth/users/:id/sessions/:sessionId'],
  endUserSessions: ['DELETE', '/auth/users/:id/sessions'],
  userWaysIn: ['GET', '/auth/users/:id/ways-in'],
  // 5. OAuth
  oauthProviders: ['GET', '/auth/oauth/providers'],
  returnToCsrf: ['GET', '/auth/oauth/return-to/csrf'],
  returnTo: ['POST', '/auth/oauth/return-to'],
  oauthStart: ['GET', '/auth/oauth/:provider'], // a navigation, not a fetch: see `oauthLoginUrl`
  pendingLink: ['GET', '/auth/link/confirm'],
  confirmLink: ['POST', '/auth/link/confirm'],
  cancelLink: ['DELETE', '/auth/link/confirm'],
  // 5. Providers (admin)
  availableProviders: ['GET', '/auth/available-providers'],
  listProviders: ['GET', '/auth/providers'],
  createProvider: ['POST', '/auth/providers'],
  updateProvider: ['PATCH', '/auth/providers/:id'],
  deleteProvider: ['DELETE', '/auth/providers/:id'],
  testProvider: ['POST', '/auth/providers/:id/test'],
  // 6. Work sessions (admin)
  createWorkSession: ['POST', '/auth/work-sessions'],
  listWorkSessions: ['GET', '/auth/work-sessions'],
  getWorkSession: ['GET', '/auth/work-sessions/:id'],
  updateWorkSession: ['PATCH', '/auth/work-sessions/:id'],
  deleteWorkSession: ['DELETE', '/auth/work-sessions/:id'],
  // 13. Audit log
  audit: ['GET', '/auth/audit'],
  // 17. Deployment self-check
  diagnostics: ['GET', '/auth/diagnostics'],
  activity: ['GET', '/auth/account/activity'],
  // 15. API keys (your own, and a user's as admin)
  createApiKey: ['POST', '/auth/api-keys'],
  apiKeys: ['GET', '/auth/api-keys'],
  deleteApiKey: ['DELETE', '/auth/api-keys/:id'],
  userApiKeys: ['GET', '/auth/users/:id/api-keys'],
  deleteUserApiKey: ['DELETE', '/auth/users/:id/api-keys/:keyId'],
  // 15. Device login: the signed-in person's side (the tool's side, code and token, is RFC 8628's)
  pendingDevice: ['GET', '/auth/device'],
  approveDevice: ['POST', '/auth/device/approve'],
  denyDevice: ['POST', '/auth/device/deny'],
  // 13. Webhooks (admin)
  createWebhook: ['POST', '/auth/webhooks'],
  listWebhooks: ['GET', '/auth/webhooks'],
  updateWebhook: ['PATCH', '/auth/webhooks/:id'],
  deleteWebhook: ['DELETE', '/auth/webhooks/:id'],
  testWebhook: ['POST', '/auth/webhooks/:id/test'],
  webhookDeliveries: ['GET', '/auth/webhooks/:id/deliveries'],
  resendWebhookDelivery: ['POST', '/auth/webhooks/:id/deliveries/:eventId/resend'],
  // 10. Account self-service
  sessions: ['GET', '/auth/sessions'],
  endSession: ['DELETE', '/auth/sessions/:id'],
  changePassword: ['POST', '/auth/password'],
  totpEnroll: ['POST', '/auth/totp/enroll'],
  totpConfirm: ['POST', '/auth/totp/confirm'],
  totpDisable: ['DELETE', '/auth/totp'],
  loginTotp: ['POST', '/auth/login/totp'],
  reauthenticate: ['POST', '/auth/reauthenticate'],
  accountProviders: ['GET', '/auth/account/providers'],
  linkProvider: ['POST', '/auth/oauth/:provider/link'],
  unlinkProvider: ['DELETE', '/auth/account/providers/:provider/:providerAccountId'],
  // 11. Passkeys
  passkeyOptions: ['POST', '/auth/passkeys/options'],
  addPasskey: ['POST', '/auth/passkeys'],
  passkeys: ['GET', '/auth/passkeys'],
  renamePasskey: ['PATCH', '/auth/passkeys/:id'],
  deletePasskey: ['DELETE', '/auth/passkeys/:id'],
  passkeyLoginOptions: ['POST', '/auth/login/passkey/options'],
  loginPasskey: ['POST', '/auth/login/passkey'],
  // 12. Email
  forgotPassword: ['POST', '/auth/password/forgot'],
  resetPassword: ['POST', '/auth/password/reset'],
  checkResetToken: ['POST', '/auth/password/reset/check'],
  signup: ['POST', '/auth/signup'],
  requestVerification: ['POST', '/auth/email/verify/request'],
  verifyEmail: ['POST', '/auth/email/verify'],
  requestMagicLink: ['POST', '/auth/login/link'],
  verifyMagicLink: ['POST', '/auth/login/link/verify'],
} as const satisfies Record<string, readonly [HttpMethod, string]>;

export type RouteName = keyof typeof routes;

// ---------------------------------------------------------------------------------------------
// Shapes

export interface LoginUser {
  id: string;
  email: string;
  firstname?: string;
  lastname?: string;
  isAdmin: boolean;
}
/** A session was started (cookie set). `returnTo`: where an OAuth journey asked to go afterwards. */
export interface LoggedIn {
  user: LoginUser;
  expiresAt: string;
  returnTo?: string;
}
/** The password (or passkey, or magic link) was right; now `loginTotp` from this browser. */
export interface MfaRequired {
  mfaRequired: true;
}
export type LoginResult = LoggedIn | MfaRequired;

export interface User {
  id: string;
  email: string;
  firstname?: string;
  lastname?: string;
  email_verified: boolean;
  isAdmin: boolean;
  oauthAccounts: { provider: string; providerAccountId: string }[];
  lastLoginAt?: string | null;
  settings?: Record<string, unknown>;
}
export interface Session {
  userId: string;
  isAdmin: boolean;
  provider: string;
  createdAt: string;
  expiresAt: string;
  totp: boolean;
  user?: User;
}
/** `session({user: true})`, `currentSession({user: true})`: the user is there. */
export type SessionWithUser = Session & { user: User };
export interface OwnSession {
  id: string;
  createdAt: string;
  lastSeenAt: string;
  ip: string | null;
  device: string | null;
  current: boolean;
}
/** A user's session as an admin sees it (`userSessions`): `OwnSession` without `current`. */
export type UserSession = Omit<OwnSession, 'current'>;
/** `userWaysIn`: how a user can log in (no secret). */
export interface WaysIn {
  password: boolean;
  totp: boolean;
  passkeys: Passkey[];
  providers: ConnectedAccount[];
}
export interface OAuthProvider {
  providerId: string;
  label: string;
  type: string;
}
export interface ConnectedAccount {
  provider: string;
  providerAccountId: string;
  email: string | null;
  linkedAt: string;
}
export interface PendingLink {
  provider: string;
  email: string;
  expiresAt: string;
  providerAccountId?: string;
  name?: string | null;
}
export interface Passkey {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt?: string | null;
}
/** An API key as lists show it: never the key itself. */
export interface ApiKey {
  id: string;
  name: string;
  /** `svc_` and the key's first 8 characters, to tell keys apart. */
  prefix: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
}
/** `createApiKey`: the key (`svc_...`), shown this once. */
export interface CreatedApiKey {
  id: string;
  name: string;
  key: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
}
/** A device login waiting for the signed-in person's approval (`pendingDevice`). */
export interface PendingDevice {
  /** The name the tool gave (the API key will carry it). */
  name: string;
  scopes: string[];
  createdAt: string;
}
export interface TotpEnrollment {
  otpauthUri: string;
  /** A `data:image/...` URL of the QR code of `otpauthUri`. */
  qrCode: string;
}
export interface ProviderDocument {
  id: string;
  providerId: string;
  type: string;
  label?: string;
  clientId: string;
  hasClientSecret: boolean;
  redirectUri?: string;
  scopes?: string[];
  enabled: boolean;
  trustEmailVerified?: boolean;
  config?: Record<string, unknown>;
  createdAt?: string;
  updatedAt?: string;
}
export interface AvailableProvider {
  providerId: string;
  type: string;
  label: string;
  pkce: boolean;
  configKeys: string[];
  defaultScopes: string[];
  redirectUri: string;
  trustEmailVerified: boolean;
}
/** `testProvider`: what svc's server got from the provider (`checked`: the URL it requested). */
export interface ProviderCheck {
  ok: boolean;
  checked: string;
  status?: number;
  message?: string;
}
/** A work session (CONTRACT 6, docs/work-sessions.md): its `id` is what a guest link carries. */
export interface WorkSession {
  id: string;
  isActive: boolean;
  expiresAt: string | null;
  pluginData: Record<string, unknown>;
  composition: string | null;
  label: string | null;
  createdAt: string;
}
export interface Page<T> {
  items: T[];
  offset: number;
  limit: number;
  total: number;
}
export interface Items<T> {
  items: T[];
}
/** The deployment self-check (CONTRACT 17, docs/deployment-topologies.md) for the request that asked. */
export interface Diagnostics {
  seen: { scheme: string; host: string; clientIp: string; forwarded: boolean };
  cookie: { name: string; secure: boolean; sameSite: 'strict' | 'lax' | 'none'; domain: string | null; partitioned: boolean };
  frontendOrigins: string[];
  findings: { code: string; message: string }[];
}

/** A page of the audit log: newest first; `nextCursor` asks for the next page (null: none). */
export interface AuditPage {
  items: AuditRecord[];
  nextCursor: string | null;
}
/** One audit record (CONTRACT 13, docs/events.md). */
export interface AuditRecord {
  id: string;
  type: string;
  at: string;
  actor: { type: 'user' | 'admin' | 'api_key' | 'system' | 'anonymous'; id?: string };
  subject: { userId?: string; email?: string };
  sessionId?: string;
  ip?: string;
  device?: string;
  details: Record<string, unknown>;
}
/** A webhook endpoint (CONTRACT 13, docs/events.md); its secret only in `createWebhook`'s answer. */
export interface WebhookEndpoint {
  id: string;
  url: string;
  /** Audit record types, or prefixes ending in `.*`. */
  events: string[];
  description: string | null;
  active: boolean;
  createdAt: string;
  updatedAt: string;
}
/** `createWebhook`: the endpoint and its signing secret (`whsec_...`), shown this once. */
export type NewWebhookEndpoint = WebhookEndpoint & { secret: string };
/** One event owed to an endpoint: `pending` until delivered, or `failed` once no attempts are left. */
export interface WebhookDelivery {
  eventId: string;
  type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatusCode: number | null;
  nextAttemptAt: string | null;
  at: string;
}

// ---------------------------------------------------------------------------------------------
// Request bodies, by route (routes without a body are absent)

export type Email = { email: string };
/** The token of the captcha widget, sent once the service answered 400 `captcha_required`. */
export type CaptchaToken = { captchaToken?: string };
/** `GET /auth/config`: what the login page offers. */
export interface AuthConfig {
  captcha: { provider: 'turnstile' | 'hcaptcha' | 'recaptcha'; siteKey: string } | null;
  signup: boolean;
  magicLink: boolean;
  passkeys: boolean;
  providers: OAuthProvider[];
}
export type Token = { token: string };
export interface NewUser {
  email: string;
  password: string;
  firstname?: string;
  lastname?: string;
  isAdmin?: boolean;
}
export interface NewProvider {
  providerId: string;
  type: 'arctic' | 'custom' | 'oidc';
  label?: string;
  clientId: string;
  clientSecret?: string;
  redirectUri?: string;
  scopes?: string[];
  enabled?: boolean;
  trustEmailVerified?: boolean;
  config?: Record<string, unknown>;
}

export interface NewWorkSession {
  /** At least one plugin key (`svc__todo`, `@scope/name`), each with what that plugin needs. */
  pluginData: Record<string, unknown>;
  composition?: string | null;
  /** ISO 8601; null or absent: never expires. */
  expiresAt?: string | null;
  label?: string;
}

export interface NewWebhook {
  url: string;
  events: string[];
  description?: string;
}

export interface Bodies {
  /** `captchaToken`: only after a `captcha_required` answer (see `authConfig().captcha`). */
  login: { email: string; password: string; captchaToken?: string };
  /** `scopes`: `<pluginKey>:<action>` as routes declare them, `auth:admin` for admins; `expiresAt`: ISO time, null or absent: never. */
  createApiKey: { name: string; scopes: string[]; expiresAt?: string | null };
  /** The user code as shown by the tool (any case, hyphen optional). */
  approveDevice: { user_code: string };
  denyDevice: { user_code: string };
  createUser: NewUser;
  updateUser: { firstname?: string; lastname?: string; password?: string; isAdmin?: boolean };
  returnTo: { returnTo: string };
  createProvider: NewProvider;
  updateProvider: Partial<Omit<NewProvider, 'providerId' | 'type'>>;
  createWorkSession: NewWorkSession;
  updateWorkSession: { isActive?: boolean; expiresAt?: string | null; pluginData?: Record<string, unknown>; label?: string };
  createWebhook: NewWebhook;
  updateWebhook: { url?: string; events?: string[]; description?: string | null; active?: boolean };
  changePassword: { currentPassword: string; newPassword: string };
  totpConfirm: { code: string };
  totpDisable: { code: string } | { password: string };
  loginTotp: { code: string } | { recoveryCode: string };
  reauthenticate: { password: string } | { code: string } | { response: AuthenticationResponseJSON };
  passkeyOptions: Record<string, never>;
  addPasskey: { response: RegistrationResponseJSON; name?: string };
  renamePasskey: { name: string };
  passkeyLoginOptions: Record<string, never>;
  loginPasskey: { response: AuthenticationResponseJSON };
  forgotPassword: Email & CaptchaToken;
  resetPassword: { token: string; newPassword: string };
  checkResetToken: Token;
  signup: { email: string; password: string; firstname?: string; lastname?: string; captchaToken?: string };
  requestVerification: Email;
  verifyEmail: Token & { password?: string };
  requestMagicLink: Email & CaptchaToken;
  notMe: Token;
  verifyMagicLink: Token;
}

/** What each route answers on success (`void`: 204 or 202 with an empty object). */
export interface Responses {
  login: LoginResult;
  createApiKey: CreatedApiKey;
  apiKeys: Items<ApiKey>;
  deleteApiKey: void;
  userApiKeys: Items<ApiKey>;
  deleteUserApiKey: void;
  pendingDevice: PendingDevice;
  approveDevice: void;
  denyDevice: void;
  logout: void;
  logoutAll: void;
  session: Session;
  createUser: User;
  listUsers: Page<User>;
  getUser: User;
  updateUser: User;
  deleteUser: void;
  userSessions: Items<UserSession>;
  endUserSession: void;
  endUserSessions: void;
  userWaysIn: WaysIn;
  oauthProviders: OAuthProvider[];
  authConfig: AuthConfig;
  notMe: void;
  returnToCsrf: { csrfToken: string };
  returnTo: void;
  oauthStart: never;
  pendingLink: PendingLink;
  confirmLink: { linked: { provider: string; providerAccountId: string } };
  cancelLink: void;
  availableProviders: AvailableProvider[];
  listProviders: ProviderDocument[];
  createProvider: ProviderDocument;
  updateProvider: ProviderDocument;
  deleteProvider: void;
  testProvider: ProviderCheck;
  createWorkSession: WorkSession;
  listWorkSessions: Page<WorkSession>;
  getWorkSession: WorkSession;
  updateWorkSession: WorkSession;
  deleteWorkSession: void;
  audit: AuditPage;
  diagnostics: Diagnostics;
  activity: AuditPage;
  createWebhook: NewWebhookEndpoint;
  listWebhooks: Items<WebhookEndpoint>;
  updateWebhook: WebhookEndpoint;
  deleteWebhook: void;
  /** 202: queued (the service's answer names its `eventId`; `webhookDeliveries` lists it first). */
  testWebhook: void;
  webhookDeliveries: Items<WebhookDelivery>;
  /** 202: a failed delivery queued again, with the same `webhook-id` (its `eventId`). */
  resendWebhookDelivery: { eventId: string };
  sessions: Items<OwnSession>;
  endSession: void;
  changePassword: void;
  totpEnroll: TotpEnrollment;
  totpConfirm: { recoveryCodes: string[] };
  totpDisable: void;
  loginTotp: LoggedIn;
  reauthenticate: void;
  accountProviders: Items<ConnectedAccount>;
  linkProvider: { authorizationUrl: string };
  unlinkProvider: void;
  passkeyOptions: PublicKeyCredentialCreationOptionsJSON;
  addPasskey: Passkey;
  passkeys: Items<Passkey>;
  renamePasskey: Passkey;
  deletePasskey: void;
  passkeyLoginOptions: PublicKeyCredentialRequestOptionsJSON;
  loginPasskey: LoginResult;
  forgotPassword: void;
  resetPassword: void;
  /** 204: the reset token still works (and stays unused); else 400 `invalid_token`. */
  checkResetToken: void;
  signup: void;
  requestVerification: void;
  /** `passwordResetToken`: the verification was a claim (a sign-up verified elsewhere): ask for a new password (`resetPassword`). */
  verifyEmail: { email: string; emailVerified: true; passwordResetToken?: string };
  requestMagicLink: void;
  verifyMagicLink: LoginResult;
}
