// Provider URLs (CONTRACT 5; security review finding 15, OAuth issue item 5). svc's server calls the
// URLs an admin saves (token and user-info endpoints, a realm or base URL), so they must be https:,
// plain http: only to a loopback host (a local IdP in development and tests) or with
// SVC_ALLOW_INSECURE_PROVIDER_URLS=1, and never another scheme. Host-name keys (`domain`, `tenant`)
// are put into `https://<value>/...` by the provider classes: they must be bare host names, so they
// cannot smuggle a scheme, a path, a port or a user. Refused on POST and on PATCH with 400
// `validation_failed` naming the field, and nothing is saved; custom templates of the app config
// are held to the same rule at start-up.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { createTestApp, type TestApp, type TestClient } from '../support/app.ts';
import { stopAll, tempDir } from '../support/spawn.ts';

const HTTPS = {
  authorizationEndpoint: 'https://idp.example.com/authorize',
  tokenEndpoint: 'https://idp.example.com/token',
  userInfoEndpoint: 'https://idp.example.com/userinfo',
};

/** Values no provider URL may have without the env switch. */
const BAD_URLS: [string, string][] = [
  ['plain http to a remote host', 'http://idp.example.com/x'],
  ['plain http to a private address', 'http://10.0.0.5/x'],
  ['plain http to a name that only starts like localhost', 'http://localhost.evil.example/x'],
  ['file:', 'file:///etc/passwd'],
  ['gopher:', 'gopher://127.0.0.1:6379/_FLUSHALL'],
  ['javascript:', 'javascript:alert(1)'],
  ['data:', 'data:text/plain,hello'],
  ['ftp:', 'ftp://idp.example.com/x'],
  ['credentials in the URL', 'https://admin:pw@idp.example.com/x'],
];
/** Schemes that stay refused even with SVC_ALLOW_INSECURE_PROVIDER_URLS=1. */
const NEVER = BAD_URLS.filter(([, value]) => !value.startsWith('http://'));
const LOOPBACK = ['http://127.0.0.1:8080/x', 'http://localhost:8080/x', 'http://[::1]:8080/x'];

/** Each URL-valued field, and a provider body that carries `value` in it. */
const URL_FIELDS: [string, string, (value: string) => Record<string, unknown>][] = [
  ['config.authorizationEndpoint', 'acme', (value) => ({ type: 'custom', config: { ...HTTPS, authorizationEndpoint: value } })],
  ['config.tokenEndpoint', 'acme', (value) => ({ type: 'custom', config: { ...HTTPS, tokenEndpoint: value } })],
  ['config.userInfoEndpoint', 'acme', (value) => ({ type: 'custom', config: { ...HTTPS, userInfoEndpoint: value } })],
  ['config.realmURL', 'keycloak', (value) => ({ type: 'arctic', config: { realmURL: value } })],
  ['config.baseURL', 'gitea', (value) => ({ type: 'arctic', config: { baseURL: value } })],
];

/** Values of host-name keys that are not a bare host name. */
const BAD_HOSTS: [string, string][] = [
  ['a scheme', 'https://tenant.example.com'],
  ['a path', 'tenant.example.com/evil'],
  ['a query', 'evil.example?x='],
  ['a fragment', 'evil.example#'],
  ['a user', 'user@tenant.example.com'],
  ['a port', 'tenant.example.com:6379'],
  ['a space', 'tenant example.com'],
  ['a backslash', 'evil.example\\x'],
  ['an IPv4 address', '127.0.0.1'],
  ['an IPv6 address', '[::1]'],
  ['a label starting with a dash', '-bad.example.com'],
  ['an empty value', ''],
];
const HOST_FIELDS: [string, string, (value: string) => Record<string, unknown>][] = [
  ['config.domain', 'auth0', (value) => ({ type: 'arctic', config: { domain: value } })],
  ['config.domain', 'okta', (value) => ({ type: 'arctic', config: { domain: value } })],
  ['config.tenant', 'microsoft-entra-id', (value) => ({ type: 'arctic', config: { tenant: value } })],
];

interface Admin {
  t: TestApp;
  admin: TestClient;
}

async function adminApp(opts: Parameters<typeof createTestApp>[0] = {}): Promise<Admin> {
  const t = await createTestApp(opts);
  const admin = t.client();
  const user = await t.createUser({ admin: true });
  expect((await admin.login(user.email, user.password)).status).toBe(200);
  return { t, admin };
}

const post = (a: Admin, providerId: string, body: Record<string, unknown>) =>
  a.admin.fetch('/auth/providers', { method: 'POST', json: { providerId, clientId: 'client-1', clientSecret: 'secret-1', ...body } });
const patch = (a: Admin, providerId: string, body: Record<string, unknown>) => a.admin.fetch(`/auth/providers/${providerId}`, { method: 'PATCH', json: body });
const list = async (a: Admin) => (await (await a.admin.fetch('/auth/providers')).json()) as { id: string; config: Record<string, unknown> }[];

async function expectRefused(res: Response, field: string, what: string): Promise<void> {
  expect(res.status, what).toBe(400);
  const body = (await res.json()) as { error: { code: string; message: string; details?: { path: string; message: string }[] } };
  expect(body.error.code, what).toBe('validation_failed');
  expect(body.error.details?.map((d) => d.path), what).toContain(field);
}

describe('provider URLs on the admin API', () => {
  let a: Admin;
  beforeAll(async () => {
    a = await adminApp();
  });
  afterAll(() => a?.t.close());

  it('POST: every URL field refuses http: to remote hosts and non-http schemes; nothing is saved', async () => {
    for (const [field, providerId, body] of URL_FIELDS) {
      for (const [what, value] of BAD_URLS) await expectRefused(await post(a, providerId, body(value)), field, `${field} = ${what}`);
    }
    expect(await list(a)).toEqual([]);
  });

  it('PATCH: the same values are refused and the saved config stays as it was', async () => {
    const saved: Record<string, Record<string, unknown>> = {};
    for (const [, providerId, body] of URL_FIELDS) {
      if (saved[providerId]) continue;
      const created = await post(a, providerId, body(providerId === 'acme' ? HTTPS.authorizationEndpoint : 'https://sso.example.com/realms/main'));
      expect(created.status, providerId).toBe(201);
      saved[providerId] = ((await created.json()) as { config: Record<string, unknown> }).config;
    }
    try {
      for (const [field, providerId] of URL_FIELDS) {
        const key = field.slice('config.'.length);
        for (const [what, value] of BAD_URLS) await expectRefused(await patch(a, providerId, { config: { [key]: value } }), field, `PATCH ${field} = ${what}`);
      }
      const after = await list(a);
      for (const [id, config] of Object.entries(saved)) expect(after.find((p) => p.id === id)?.config, id).toEqual(config);
    } finally {
      for (const id of Object.keys(saved)) await a.admin.fetch(`/auth/providers/${id}`, { method: 'DELETE' });
    }
  });

  it('plain http: to a loopback host and https: are accepted, on POST and on PATCH', async () => {
    for (const [field, providerId, body] of URL_FIELDS) {
      const key = field.slice('config.'.length);
      const [first, ...others] = LOOPBACK;
      const created = await post(a, providerId, body(first!));
      expect(created.status, `${field} = ${first}`).toBe(201);
      for (const value of [...others, 'https://idp.example.com/x']) {
        const res = await patch(a, providerId, { config: { [key]: value } });
        expect(res.status, `PATCH ${field} = ${value}`).toBe(200);
        expect(((await res.json()) as { config: Record<string, unknown> }).config[key]).toBe(value);
      }
      expect((await a.admin.fetch(`/auth/providers/${providerId}`, { method: 'DELETE' })).status).toBe(204);
    }
  });

  it('host-name keys refuse anything but a bare host name, on POST and on PATCH', async () => {
    for (const [field, providerId, body] of HOST_FIELDS) {
      for (const [what, value] of BAD_HOSTS) await expectRefused(await post(a, providerId, body(value)), field, `${providerId} ${field} with ${what}`);
    }
    expect(await list(a)).toEqual([]);

    const good: Record<string, string> = { auth0: 'tenant.eu.auth0.com', okta: 'dev-123456.okta.com', 'microsoft-entra-id': 'common' };
    for (const [field, providerId, body] of HOST_FIELDS) {
      expect((await post(a, providerId, body(good[providerId]!))).status, providerId).toBe(201);
      const key = field.slice('config.'.length);
      for (const [what, value] of BAD_HOSTS) await expectRefused(await patch(a, providerId, { config: { [key]: value } }), field, `PATCH ${providerId} ${field} with ${what}`);
    }
    const after = await list(a);
    for (const [field, providerId] of HOST_FIELDS) expect(after.find((p) => p.id === providerId)?.config[field.slice('config.'.length)]).toBe(good[providerId]);

    // What the real services use: tenant GUIDs and verified domains, regional Auth0 and Okta hosts.
    for (const tenant of ['organizations', '8eaef023-2b34-4da1-9baa-8bc8c9d6a490', 'contoso.onmicrosoft.com']) {
      expect((await patch(a, 'microsoft-entra-id', { config: { tenant } })).status, tenant).toBe(200);
    }
    expect((await patch(a, 'okta', { config: { domain: 'login.example-company.com', authorizationServerId: 'aus1a2b3c4d5e6f7g8h9' } })).status).toBe(200);
    await expectRefused(await patch(a, 'okta', { config: { authorizationServerId: 'default/../../x' } }), 'config.authorizationServerId', 'a path in the server id');
    for (const id of Object.keys(good)) await a.admin.fetch(`/auth/providers/${id}`, { method: 'DELETE' });
  });
});

describe('SVC_ALLOW_INSECURE_PROVIDER_URLS=1', () => {
  let a: Admin;
  beforeAll(async () => {
    a = await adminApp({ env: { SVC_ALLOW_INSECURE_PROVIDER_URLS: '1' } });
  });
  afterAll(() => a?.t.close());

  it('accepts http: to any host on POST and PATCH; other schemes stay refused', async () => {
    for (const [field, providerId, body] of URL_FIELDS) {
      const key = field.slice('config.'.length);
      const created = await post(a, providerId, body('http://idp.internal.example/x'));
      expect(created.status, field).toBe(201);
      const patched = await patch(a, providerId, { config: { [key]: 'http://10.0.0.5:8080/x' } });
      expect(patched.status, field).toBe(200);
      expect(((await patched.json()) as { config: Record<string, unknown> }).config[key]).toBe('http://10.0.0.5:8080/x');
      for (const [what, value] of NEVER) await expectRefused(await patch(a, providerId, { config: { [key]: value } }), field, `PATCH ${field} = ${what}`);
      expect((await a.admin.fetch(`/auth/providers/${providerId}`, { method: 'DELETE' })).status).toBe(204);
    }
  });
});

describe('custom templates of the app config (start-up)', () => {
  const template = (urls: Partial<typeof HTTPS>) => ({ id: 'acme', displayName: 'Acme', ...HTTPS, ...urls });
  // An app root of its own (an empty folder), never the checkout's: npm test reads none of its files (issue 53).
  const appRoot = tempDir('svc-app-');
  afterAll(stopAll);
  const load = (templates: unknown[], env: NodeJS.ProcessEnv = {}) => loadConfig({ SVC_APP_PATH: appRoot, ...env }, { raw: { auth: { providers: { custom: templates } } } });

  async function startupError(templates: unknown[], env: NodeJS.ProcessEnv = {}): Promise<string> {
    try {
      await load(templates, env);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error('loadConfig accepted these templates');
  }

  it('a template URL that breaks the rule stops start-up, naming each key', async () => {
    const message = await startupError([template({}), template({ authorizationEndpoint: 'http://idp.example.com/auth', userInfoEndpoint: 'file:///etc/passwd' })]);
    expect(message).toContain('auth.providers.custom.1.authorizationEndpoint');
    expect(message).toContain('auth.providers.custom.1.userInfoEndpoint');
    expect(message).not.toContain('tokenEndpoint');
    expect(message).not.toContain('custom.0');
  });

  it('loopback http: is accepted; with SVC_ALLOW_INSECURE_PROVIDER_URLS=1 any http: is, but not other schemes', async () => {
    await expect(load([template({ tokenEndpoint: 'http://127.0.0.1:9/token', userInfoEndpoint: 'http://localhost:9/me' })])).resolves.toBeDefined();
    const insecure = await load([template({ tokenEndpoint: 'http://idp.internal.example/token' })], { SVC_ALLOW_INSECURE_PROVIDER_URLS: '1' });
    expect(insecure.config.env.allowInsecureProviderUrls).toBe(true);
    expect(insecure.warnings.join('\n')).toContain('SVC_ALLOW_INSECURE_PROVIDER_URLS');
    const message = await startupError([template({ tokenEndpoint: 'gopher://idp.internal.example/token' })], { SVC_ALLOW_INSECURE_PROVIDER_URLS: '1' });
    expect(message).toContain('auth.providers.custom.0.tokenEndpoint');
  });

  it('SVC_ALLOW_INSECURE_PROVIDER_URLS takes 1/true or 0/false; anything else is named', async () => {
    expect((await load([])).config.env.allowInsecureProviderUrls).toBe(false);
    expect((await load([], { SVC_ALLOW_INSECURE_PROVIDER_URLS: 'true' })).config.env.allowInsecureProviderUrls).toBe(true);
    expect((await load([], { SVC_ALLOW_INSECURE_PROVIDER_URLS: '0' })).config.env.allowInsecureProviderUrls).toBe(false);
    await expect(load([], { SVC_ALLOW_INSECURE_PROVIDER_URLS: 'yes' })).rejects.toThrow(/SVC_ALLOW_INSECURE_PROVIDER_URLS/);
  });
});
