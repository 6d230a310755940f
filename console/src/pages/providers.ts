// Sign-in providers (SPEC "Settings > Authentication", CONTRACT 5, docs/oauth.md and docs/providers.md):
// the configured providers at `#/providers`, adding one from the catalog or an app template at
// `#/providers/new/<template>`, and one provider at `#/providers/<id>` (edit, enable/disable, test,
// delete). The client secret is write-only: the API never returns it, the field is a password field that
// is never filled in, and an empty one keeps the saved secret. "Test" asks svc's server to request the
// provider (POST /auth/providers/:id/test): the console itself only talks to svc.

import { SvcError, type AvailableProvider, type ProviderCheck, type ProviderDocument } from '@svc/client';
import { actionButton, confirmAction, field, form, fresh, h, href, page, say, svc, table } from '../ui.ts';

const TYPE_NAMES: Record<string, string> = { arctic: 'Built-in', oidc: 'OpenID Connect', custom: 'Custom OAuth2' };

/** What each `config` key asks for, in a person's words (keys not listed are shown as they are). */
const CONFIG_LABELS: Record<string, [label: string, hint?: string]> = {
  issuer: ['Issuer URL', 'The OpenID Provider\'s issuer, exactly as its discovery document says it (https://…)'],
  tenant: ['Tenant', 'A tenant id or domain, or common'],
  realmURL: ['Realm URL', 'The full realm URL, e.g. https://sso.example.com/realms/acme'],
  domain: ['Domain', 'A host name only, e.g. dev-123.okta.com'],
  baseURL: ['Base URL', 'The server\'s address, e.g. https://git.example.com'],
  authorizationServerId: ['Authorization server id'],
  teamId: ['Team id'],
  keyId: ['Key id'],
  authorizationEndpoint: ['Authorization endpoint', 'Leave empty to use the template\'s'],
  tokenEndpoint: ['Token endpoint', 'Leave empty to use the template\'s'],
  userInfoEndpoint: ['User-info endpoint', 'Leave empty to use the template\'s'],
  environment: ['Environment', 'sandbox or production'],
};

let boxes = 0;
/** A labelled checkbox (FormData carries `on` when it is ticked). */
function checkbox(label: string, name: string, checked: boolean, hint?: string): HTMLElement {
  const id = `cb${++boxes}-${name}`;
  return h(
    'div',
    {},
    h('div', { class: 'field check' }, h('input', { id, type: 'checkbox', name, checked, ...(hint ? { 'aria-describedby': `${id}-hint` } : {}) }), h('label', { for: id }, label)),
    hint ? h('p', { class: 'hint', id: `${id}-hint` }, hint) : null,
  );
}

/**
 * Goes to `address` and shows `render`'s page without a hashchange (main.ts's route() would clear the
 * announcement that follows).
 */
async function show(address: string, render: () => Promise<void>): Promise<void> {
  history.pushState(null, '', address);
  await render();
}

/** "openid  email,profile" -> ["openid", "email", "profile"]. */
const scopesOf = (text: string) => text.split(/[\s,]+/).filter(Boolean);

/** The fields of `config` a form shows: the template's keys, then any other saved key. */
function configFields(keys: string[], saved: Record<string, unknown> = {}): HTMLElement[] {
  const all = [...new Set([...keys, ...Object.keys(saved).filter((k) => typeof saved[k] === 'string' && k in CONFIG_LABELS)])];
  return all.map((key) => {
    const [label, hint] = CONFIG_LABELS[key] ?? [key];
    const value = typeof saved[key] === 'string' ? (saved[key] as string) : '';
    const isUrl = /(?:URL|Endpoint)$/.test(key) || key === 'issuer';
    return field(label, { name: `config:${key}`, type: isUrl ? 'url' : 'text', autocomplete: 'off', spellcheck: 'false', value, required: keys.includes(key) && !key.endsWith('Endpoint') }, hint);
  });
}

/**
 * The API names a refused `config` entry `config.<key>` (`config.issuer`: the discovery document cannot be
 * read); the form's field is `config:<key>`: renamed, the message goes beside that field.
 */
function configErrorsBeside(e: unknown): never {
  if (!(e instanceof SvcError) || !e.details.some((d) => d.path.startsWith('config.'))) throw e;
  throw new SvcError(e.status, e.code, e.message, e.details.map((d) => (d.path.startsWith('config.') ? { ...d, path: `config:${d.path.slice(7)}` } : d)));
}

/** The `config` entries of a form's data (`config:<key>`), empty ones left out. */
function configOf(data: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(data).flatMap(([k, v]) => (k.startsWith('config:') && v.trim() ? [[k.slice(7), v.trim()]] : [])));
}

const secretField = (editing: { hasClientSecret: boolean } | null) =>
  field(
    'Client secret',
    // Never filled in: the API does not return it, and the browser must not offer a saved password.
    { name: 'clientSecret', type: 'password', autocomplete: 'new-password', spellcheck: 'false', value: '' },
    editing ? (editing.hasClientSecret ? 'A secret is saved. Leave empty to keep it; type a new one to replace it.' : 'No secret is saved. Leave empty for a public client.') : 'Write-only: it is never shown again. Leave empty for a public client.',
  );

/** What a test found, for the page and for screen readers. */
function checkResult(label: string, r: ProviderCheck): HTMLElement {
  return h(
    'div',
    { class: 'check-result', role: 'group', 'aria-label': `Test of ${label}` },
    h('p', {}, h('span', { class: r.ok ? 'ok' : 'bad' }, r.ok ? 'Test passed' : 'Test failed'), `: ${r.message ?? ''}${r.status ? ` (HTTP ${r.status})` : ''}`),
    r.checked ? h('p', { class: 'hint' }, 'Requested: ', h('code', {}, r.checked)) : null,
  );
}

async function runTest(p: ProviderDocument, slot: HTMLElement): Promise<void> {
  say(`Testing ${p.label ?? p.providerId}…`);
  const result = await svc.admin.testProvider(p.providerId);
  slot.replaceChildren(checkResult(p.label ?? p.providerId, result));
  say(`${p.label ?? p.providerId}: ${result.ok ? 'test passed' : 'test failed'}. ${result.message ?? ''}`);
}

export async function providersPage(params: string[] = []): Promise<void> {
  if (params[0] === 'new' && params[1]) return addPage(params[1]);
  if (params[0]) return providerPage(params[0]);
  const list = h('div', {}, h('p', {}, 'Loading…'));
  const results = h('div', {});
  const picker = h('div', {}, h('p', {}, 'Loading…'));
  page(
    'Sign-in providers',
    h('p', {}, 'Where people sign in besides their password. A provider shows on the sign-in page only while it is enabled.'),
    h('section', { 'aria-labelledby': 'pv-list' }, h('h2', { id: 'pv-list' }, 'Configured providers'), results, list),
    h('section', { 'aria-labelledby': 'pv-add' }, h('h2', { id: 'pv-add' }, 'Add a provider'), picker),
  );

  async function refresh(): Promise<void> {
    const providers = await svc.admin.listProviders();
    list.replaceChildren(
      table(
        'Configured sign-in providers',
        ['Provider', 'Actions'],
        // Two columns, the actions free to wrap: readable on a 360 px screen.
        providers.map((p) => [
          h(
            'span',
            {},
            h('a', { href: href('providers', p.providerId) }, p.label ?? p.providerId),
            h('br'),
            h('strong', {}, p.enabled ? 'Enabled' : 'Disabled'),
            h('span', { class: 'hint' }, ` · secret ${p.hasClientSecret ? 'set' : 'none'} · `, h('code', {}, p.providerId), ` · ${TYPE_NAMES[p.type] ?? p.type}`),
          ),
          h('span', { class: 'actions' }, ...providerActions(p, results, refresh, refresh)),
        ]),
        'No providers yet: add one below.',
      ),
    );
  }

  const [, available] = await Promise.all([
    refresh().catch((e: unknown) => {
      list.replaceChildren(h('p', { class: 'empty' }, 'The providers could not be read.'));
      throw e;
    }),
    svc.admin.availableProviders().catch((e: unknown) => {
      picker.replaceChildren(h('p', { class: 'empty' }, 'The provider catalog could not be read.'));
      throw e;
    }),
  ]);
  picker.replaceChildren(templatePicker(available));
}

/** A select of every template (OpenID Connect, the app's custom ones, the built-ins) and "Continue". */
function templatePicker(available: AvailableProvider[]): HTMLElement {
  const group = (label: string, type: string) => {
    const items = available.filter((a) => a.type === type);
    return items.length ? h('optgroup', { label }, ...items.map((a) => h('option', { value: a.providerId }, a.label))) : null;
  };
  const select = h('select', { id: 'pv-template', name: 'template', required: true }, group('OpenID Connect', 'oidc'), group('Custom OAuth2 (from the app)', 'custom'), group('Built-in', 'arctic'));
  const go = h('form', { 'aria-label': 'Choose a provider to add', novalidate: true },
    h('div', { class: 'field' }, h('label', { for: 'pv-template' }, 'Provider or template'), select, h('p', { class: 'hint', id: 'pv-template-hint' }, `${available.length} to choose from; OpenID Connect works with any provider that has an issuer URL.`)),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Continue')),
  );
  select.setAttribute('aria-describedby', 'pv-template-hint');
  go.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = href('providers', 'new', select.value);
  });
  return go;
}

/** Test, enable/disable, delete of one provider; `after` shows the new state, `gone` follows a delete. */
function providerActions(p: ProviderDocument, results: HTMLElement, after: () => Promise<void>, gone: () => void | Promise<void>): HTMLElement[] {
  const name = p.label ?? p.providerId;
  return [
    actionButton('Test', () => runTest(p, results), { class: 'secondary', 'aria-label': `Test ${name}` }),
    actionButton(
      p.enabled ? 'Disable' : 'Enable',
      async () => {
        await fresh(() => svc.admin.updateProvider(p.providerId, { enabled: !p.enabled }));
        await after();
        say(`${name} is ${p.enabled ? 'disabled: it no longer shows on the sign-in page' : 'enabled: it shows on the sign-in page'}.`);
      },
      { class: 'secondary', 'aria-label': `${p.enabled ? 'Disable' : 'Enable'} ${name}` },
    ),
    actionButton(
      'Delete',
      async () => {
        if (!(await confirmAction(`Delete ${name}? People who sign in with it can no longer do so (their accounts stay).`, 'Delete provider'))) return;
        await fresh(() => svc.admin.deleteProvider(p.providerId));
        await gone();
        say(`${name} is deleted.`);
      },
      { class: 'danger', 'aria-label': `Delete ${name}` },
    ),
  ];
}

/** `#/providers/new/<template>`: the template's fields, client id and secret. */
async function addPage(templateId: string): Promise<void> {
  const template = (await svc.admin.availableProviders()).find((a) => a.providerId === templateId);
  if (!template) {
    page('Add a provider', h('p', {}, `There is no provider or template "${templateId}".`), h('p', {}, h('a', { href: href('providers') }, 'All sign-in providers')));
    return;
  }
  const oidc = template.type === 'oidc';
  const add = form(
    {
      label: `Add ${template.label}`,
      submit: 'Add provider',
      action: async (data) => {
        const providerId = oidc ? (data.providerId ?? '').trim() : template.providerId;
        const created = await fresh(() =>
          svc.admin.createProvider({
            providerId,
            type: template.type as 'arctic' | 'custom' | 'oidc',
            clientId: (data.clientId ?? '').trim(),
            ...(data.label?.trim() ? { label: data.label.trim() } : {}),
            ...(data.clientSecret ? { clientSecret: data.clientSecret } : {}),
            ...(data.redirectUri?.trim() ? { redirectUri: data.redirectUri.trim() } : {}),
            scopes: scopesOf(data.scopes ?? ''),
            enabled: data.enabled === 'on',
            trustEmailVerified: data.trustEmailVerified === 'on',
            config: configOf(data),
          }),
        ).catch(configErrorsBeside);
        await show(href('providers', created.providerId), () => providerPage(created.providerId));
        say(`${created.label ?? created.providerId} is added${created.hasClientSecret ? ' with its client secret (write-only: it is not shown again)' : ''}.`);
      },
    },
    oidc
      ? field('Provider id', { name: 'providerId', required: true, autocomplete: 'off', spellcheck: 'false', pattern: '[a-z0-9][a-z0-9-]{0,63}', value: '' }, 'Lower case letters, digits and dashes, e.g. okta-corp: it is part of the callback URL')
      : null,
    field('Display name', { name: 'label', autocomplete: 'off', value: oidc ? '' : template.label }, 'What the sign-in button says'),
    ...configFields(template.configKeys),
    field('Client id', { name: 'clientId', required: true, autocomplete: 'off', spellcheck: 'false' }),
    secretField(null),
    field('Scopes', { name: 'scopes', autocomplete: 'off', spellcheck: 'false', value: template.defaultScopes.join(' ') }, 'Separated by spaces; an empty list sends no scope'),
    field('Redirect URI', { name: 'redirectUri', type: 'url', autocomplete: 'off', spellcheck: 'false', value: oidc ? '' : template.redirectUri }, oidc ? 'Leave empty for <svc>/api/auth/oauth/<provider id>/callback; register it at the provider' : 'Register exactly this URL at the provider'),
    checkbox('Enabled', 'enabled', true, 'Shown on the sign-in page'),
    checkbox('Trust the provider\'s verified emails', 'trustEmailVerified', template.trustEmailVerified, 'Only for providers that check email ownership'),
  );
  page(
    `Add ${template.label}`,
    h('p', {}, h('a', { href: href('providers') }, 'All sign-in providers')),
    h('p', {}, `${TYPE_NAMES[template.type] ?? template.type}${template.pkce ? ', with PKCE' : ''}.`),
    add,
  );
}

/** `#/providers/<id>`: edit one provider, test, enable/disable, delete. */
async function providerPage(id: string): Promise<void> {
  const [providers, available] = await Promise.all([svc.admin.listProviders(), svc.admin.availableProviders().catch(() => [] as AvailableProvider[])]);
  const p = providers.find((x) => x.providerId === id);
  if (!p) {
    page('Sign-in provider', h('p', {}, 'This provider does not exist (any more).'), h('p', {}, h('a', { href: href('providers') }, 'All sign-in providers')));
    return;
  }
  const name = p.label ?? p.providerId;
  const keys = p.type === 'oidc' ? ['issuer'] : (available.find((a) => a.providerId === p.providerId && a.type === p.type)?.configKeys ?? []);
  const results = h('div', {});
  const edit = form(
    {
      label: `Edit ${name}`,
      submit: 'Save changes',
      action: async (data) => {
        // Only what changed: an unchanged issuer sent again is read again, and an admin must be able to
        // rename or disable a provider while its IdP is down.
        const config = Object.fromEntries(Object.entries(configOf(data)).filter(([k, v]) => p.config?.[k] !== v));
        const saved = await fresh(() =>
          svc.admin.updateProvider(p.providerId, {
            label: (data.label ?? '').trim() || p.providerId,
            clientId: (data.clientId ?? '').trim(),
            // Empty: the saved secret stays (an empty string would remove it: "Remove the saved secret").
            ...(data.removeSecret === 'on' ? { clientSecret: '' } : data.clientSecret ? { clientSecret: data.clientSecret } : {}),
            scopes: scopesOf(data.scopes ?? ''),
            ...(data.redirectUri?.trim() ? { redirectUri: data.redirectUri.trim() } : {}),
            trustEmailVerified: data.trustEmailVerified === 'on',
            ...(Object.keys(config).length ? { config } : {}),
          }),
        ).catch(configErrorsBeside);
        await providerPage(saved.providerId);
        say(`${saved.label ?? saved.providerId} is saved.${saved.hasClientSecret ? ' Its client secret is kept (write-only).' : ''}`);
      },
    },
    field('Display name', { name: 'label', autocomplete: 'off', value: p.label ?? '' }, 'What the sign-in button says'),
    ...configFields(keys, p.config),
    field('Client id', { name: 'clientId', required: true, autocomplete: 'off', spellcheck: 'false', value: p.clientId }),
    secretField(p),
    p.hasClientSecret ? checkbox('Remove the saved secret', 'removeSecret', false) : null,
    field('Scopes', { name: 'scopes', autocomplete: 'off', spellcheck: 'false', value: (p.scopes ?? []).join(' ') }, 'Separated by spaces; an empty list sends no scope'),
    field('Redirect URI', { name: 'redirectUri', type: 'url', autocomplete: 'off', spellcheck: 'false', value: p.redirectUri ?? '' }, 'Register exactly this URL at the provider'),
    checkbox('Trust the provider\'s verified emails', 'trustEmailVerified', p.trustEmailVerified ?? true, 'Only for providers that check email ownership'),
  );
  page(
    name,
    h('p', {}, h('a', { href: href('providers') }, 'All sign-in providers')),
    h('p', {}, `${TYPE_NAMES[p.type] ?? p.type} provider `, h('code', {}, p.providerId), `: ${p.enabled ? 'enabled' : 'disabled'}; client secret ${p.hasClientSecret ? 'set' : 'none'}.`),
    h('div', { class: 'actions' }, ...providerActions(p, results, () => providerPage(id), () => show(href('providers'), () => providersPage()))),
    results,
    h('section', { 'aria-labelledby': 'pv-edit' }, h('h2', { id: 'pv-edit' }, 'Settings'), edit),
  );
}
