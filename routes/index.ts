import type { RouteDefinition } from '../src/http/route.ts';
import type { ServerInstance } from '../src/instance.ts';
import { changeOwnPassword, disconnectAccount, endOwnSession, listConnectedAccounts, listOwnSessions, startConnect } from './auth/account.ts';
import { checkResetToken, forgotPassword, requestMagicLink, requestVerification, resetPassword, signup, useMagicLink, verifyEmail } from './auth/email.ts';
import { listAudit, ownActivity } from './auth/audit.ts';
import { createApiKey, deleteApiKey, deleteUserApiKey, listApiKeys, listUserApiKeys } from './auth/api-keys.ts';
import { approveDevice, denyDevice, deviceCode, devicePending, deviceToken } from './auth/device.ts';
import { downloadAsset, downloadSessionAsset, mintAssetToken } from './auth/assets.ts';
import { confirmLink, declineLink, getPendingLink } from './auth/link.ts';
import { confirmTotp, disableTotp, enrollTotp, loginTotp } from './auth/totp.ts';
import { deletePasskey, listPasskeys, loginPasskey, passkeyLoginOptions, passkeyRegistrationOptions, registerPasskey, renamePasskey } from './auth/passkeys.ts';
import { oauthCallback, oauthFormPostCallback, oauthProviders, oauthStart, returnTo, returnToCsrf } from './auth/oauth.ts';
import { availableProviders, createProvider, deleteProvider, listProviders, testProvider, updateProvider } from './auth/providers.ts';
import { login, logout, logoutAll, session } from './auth/session.ts';
import { reauthenticate } from './auth/reauthenticate.ts';
import { authConfig } from './auth/config.ts';
import { notMe } from './auth/not-me.ts';
import { diagnostics } from './auth/diagnostics.ts';
import { createUser, deleteUser, getUser, listUsers, updateUser } from './auth/users.ts';
import { endUserSession, endUserSessions, listUserSessions, userWaysIn } from './auth/user-access.ts';
import { createWebhook, deleteWebhook, listDeliveries, listWebhooks, resendDelivery, testWebhook, updateWebhook } from './auth/webhooks.ts';
import { createWorkSession, deleteWorkSession, getWorkSession, listWorkSessions, updateWorkSession } from './auth/work-sessions.ts';
import { health } from './health.ts';

// Order matters where paths overlap: `/auth/oauth/providers` before `/auth/oauth/:provider`.
const factories = [
  health,
  login,
  logout,
  logoutAll,
  session,
  authConfig,
  notMe,
  listOwnSessions,
  endOwnSession,
  changeOwnPassword,
  reauthenticate,
  listConnectedAccounts,
  ownActivity,
  disconnectAccount,
  startConnect,
  enrollTotp,
  confirmTotp,
  disableTotp,
  loginTotp,
  passkeyRegistrationOptions,
  registerPasskey,
  listPasskeys,
  renamePasskey,
  deletePasskey,
  passkeyLoginOptions,
  loginPasskey,
  forgotPassword,
  resetPassword,
  checkResetToken,
  signup,
  requestVerification,
  verifyEmail,
  requestMagicLink,
  useMagicLink,
  createUser,
  listUsers,
  getUser,
  updateUser,
  deleteUser,
  createApiKey,
  listApiKeys,
  deleteApiKey,
  listUserApiKeys,
  deleteUserApiKey,
  listUserSessions,
  endUserSession,
  endUserSessions,
  userWaysIn,
  deviceCode,
  deviceToken,
  devicePending,
  approveDevice,
  denyDevice,
  listAudit,
  diagnostics,
  createWebhook,
  listWebhooks,
  updateWebhook,
  deleteWebhook,
  testWebhook,
  listDeliveries,
  resendDelivery,
  oauthProviders,
  returnToCsrf,
  returnTo,
  oauthStart,
  oauthCallback,
  oauthFormPostCallback,
  getPendingLink,
  confirmLink,
  declineLink,
  availableProviders,
  listProviders,
  createProvider,
  updateProvider,
  deleteProvider,
  testProvider,
  createWorkSession,
  listWorkSessions,
  getWorkSession,
  updateWorkSession,
  deleteWorkSession,
  mintAssetToken,
  downloadAsset,
  downloadSessionAsset,
];

/** Every core route factory; `createApp` mounts what they return. */
export const coreRoutes = (instance: ServerInstance): RouteDefinition[] => factories.map((f) => f(instance) as RouteDefinition);
