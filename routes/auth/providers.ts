import * as v from 'valibot';
import { loadArctic } from '../../src/auth/oauth/arctic.ts';
import { catalog, discoverArcticProviders } from '../../src/auth/oauth/catalog.ts';
import { createProviderSchema, defaultTrustEmailVerified, OIDC_DEFAULT_SCOPES, patchProviderSchema, toPublicProvider } from '../../src/auth/oauth/providers.ts';
import { checkProvider } from '../../src/auth/oauth/provider-check.ts';
import { adminActor } from '../../src/audit/log.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

const tags = ['oauth admin'];
/** Any id up to a bound: one no provider can have (`No_Such`) is simply not there, 404 (CONTRACT 5). */
const providerParams = v.object({ id: v.pipe(v.string(), v.maxLength(200)) });

/** `GET /auth/available-providers`: every built-in provider arctic exports (found at run time), the OpenID template, custom templates. */
export const availableProviders = ({ auth, config }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/available-providers',
    onRequest: auth.authenticate({ admin: true }),
    schema: { summary: 'Providers that can be configured (admin)', tags },
    handler: async (c) => {
      const byClass = new Map(catalog.map((e) => [e.className, e]));
      const builtins = discoverArcticProviders((await loadArctic()) as unknown as Record<string, unknown>)
        .map((className) => byClass.get(className))
        .filter((e) => e !== undefined)
        .map((e) => ({ providerId: e.id, type: 'arctic' as const, label: e.label, pkce: e.pkce !== 'none', configKeys: e.configKeys, defaultScopes: e.defaultScopes }));
      // CONTRACT 5: any OpenID Provider by its issuer URL; create it under any providerId (`okta-corp`, ...).
      const oidc = { providerId: 'oidc', type: 'oidc' as const, label: 'OpenID Connect (any provider, by issuer URL)', pkce: true, configKeys: ['issuer'], defaultScopes: OIDC_DEFAULT_SCOPES };
      const custom = config.auth.providers.custom.map((t) => ({
        providerId: t.id,
        type: 'custom' as const,
        label: t.displayName,
        pkce: t.pkce,
        configKeys: ['authorizationEndpoint', 'tokenEndpoint', 'userInfoEndpoint'],
        defaultScopes: t.scopes,
      }));
      return c.json(
        [...builtins, oidc, ...custom].map((p) => ({
          ...p,
          trustEmailVerified: defaultTrustEmailVerified(p.type, p.providerId),
          redirectUri: auth.providers.defaultRedirectUri(p.providerId),
        })),
      );
    },
  });

export const listProviders = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/providers',
    onRequest: auth.authenticate({ admin: true }),
    schema: { summary: 'Configured providers, without secrets (admin)', tags },
    handler: async (c) => c.json((await auth.providers.list()).map(toPublicProvider)),
  });

export const createProvider = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/providers',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataCreate' },
    schema: {
      summary: 'Configure a provider (admin)',
      description: '`clientSecret` is write-only. Without `redirectUri`, the default callback URL is used.',
      tags,
      body: createProviderSchema,
    },
    handler: async (c, { body }) => {
      const provider = await auth.providers.create(body);
      await auth.audit.record(c, { type: 'provider.created', actor: adminActor(c), details: { providerId: provider.providerId } });
      return c.json(toPublicProvider(provider), 201);
    },
  });

export const updateProvider = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'PATCH',
    path: '/auth/providers/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataUpdate' },
    schema: { summary: 'Change a provider (admin)', description: 'An empty `clientSecret` removes it.', tags, params: providerParams, body: patchProviderSchema },
    handler: async (c, { params, body }) => {
      const provider = await auth.providers.patch(params.id, body);
      await auth.audit.record(c, { type: 'provider.updated', actor: adminActor(c), details: { providerId: provider.providerId, fields: Object.keys(body).filter((k) => body[k as keyof typeof body] !== undefined) } });
      return c.json(toPublicProvider(provider));
    },
  });

export const deleteProvider = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/providers/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataDelete' },
    schema: { summary: 'Remove a provider (admin)', tags, params: providerParams },
    handler: async (c, { params }) => {
      await auth.providers.delete(params.id);
      await auth.audit.record(c, { type: 'provider.deleted', actor: adminActor(c), details: { providerId: params.id } });
      return c.body(null, 204);
    },
  });

/**
 * `POST /auth/providers/:id/test`: svc's server requests the provider once (the OpenID discovery document,
 * or the authorization URL of an OAuth provider) and says how it went; the console's "Test" button.
 */
export const testProvider = ({ auth, config }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/providers/:id/test',
    onRequest: auth.authenticate({ admin: true }),
    schema: {
      summary: 'Check that a provider answers (admin)',
      description:
        'For `type: "oidc"` reads `<issuer>/.well-known/openid-configuration` and checks it as a save does; for OAuth providers requests the authorization URL a login would use (2xx or 3xx: ok). ' +
        'No redirect is followed; 5 s and 256 KiB at most; the provider URL rule applies. 200 `{"ok","checked","status"?,"message"?}` whatever the provider answered.',
      tags,
      params: providerParams,
    },
    handler: async (c, { params }) => {
      const doc = await auth.providers.get(params.id);
      return c.json(await checkProvider(doc, auth.providers.clientSecret(doc), auth.providers.issuers, config.env.allowInsecureProviderUrls));
    },
  });
