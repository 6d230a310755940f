// Webhooks (CONTRACT 13, docs/events.md): the endpoints with their last delivery, adding one (its signing
// secret shown once), enable/disable, delete, "Send test event", and at `#/webhooks/<id>` an endpoint's
// deliveries and a form to change its URL, types or description. Adding and changing need a recent
// sign-in (step-up: `fresh`). A failed delivery has "Resend": the same event and webhook-id again, its
// retry schedule from the start (`POST /auth/webhooks/:id/deliveries/:eventId/resend`).

import type { WebhookDelivery, WebhookEndpoint } from '@svc/client';
import { actionButton, confirmAction, field, form, fresh, h, href, isNotFound, page, say, shownOnce, svc, table, when } from '../ui.ts';

/** "login.failed, session.*" (commas, spaces or lines between) -> the list the API takes. */
const typesOf = (text: string) => text.split(/[\s,]+/).filter(Boolean);

function statusOf(d: WebhookDelivery | undefined): Node | string {
  if (!d) return 'None yet';
  const cls = d.status === 'delivered' ? 'ok' : d.status === 'failed' ? 'bad' : '';
  return h('span', cls ? { class: cls } : {}, `${d.status}${d.lastStatusCode ? ` (HTTP ${d.lastStatusCode})` : ''}`);
}

/** What the last attempt got: the receiver's status code, or none (no answer, timed out, refused). */
function lastResponse(d: WebhookDelivery): string {
  if (d.attempts === 0) return 'Not tried yet';
  return d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : 'No answer (refused, timed out or unreachable)';
}

export async function webhooksPage(params: string[] = []): Promise<void> {
  if (params[0]) return endpointPage(params[0]);
  const secretSlot = h('div', {});
  const list = h('div', {}, h('p', {}, 'Loading…'));

  async function refresh(): Promise<void> {
    const { items } = await svc.admin.listWebhooks();
    // The last delivery of each, side by side (a few endpoints: a few requests).
    const last = await Promise.all(items.map((w) => svc.admin.webhookDeliveries(w.id, { limit: 1 }).then((d) => d.items[0], () => undefined)));
    list.replaceChildren(
      table(
        'Webhook endpoints',
        ['Endpoint', 'State', 'Actions'],
        items.map((w, i) => [
          h('div', {}, h('a', { href: href('webhooks', w.id) }, w.url), h('div', {}, `Types: ${w.events.join(', ')}`), w.description ? h('div', { class: 'hint' }, w.description) : null),
          h('div', {}, w.active ? 'Enabled' : 'Disabled', h('div', {}, 'Last delivery: ', statusOf(last[i]))),
          // A span: the table keeps a last <div> cell on one line, and three buttons need to wrap at 360 px.
          h('span', { class: 'actions' }, ...endpointActions(w, refresh)),
        ]),
        'No webhook endpoint yet: add one above.',
      ),
    );
  }

  const create = form(
    {
      label: 'Add a webhook endpoint',
      submit: 'Add endpoint',
      action: async ({ url = '', events = '', description = '' }, el) => {
        const created = await fresh(() => svc.admin.createWebhook({ url: url.trim(), events: typesOf(events), ...(description.trim() ? { description: description.trim() } : {}) }));
        el.reset();
        secretSlot.replaceChildren(
          h('p', {}, `Endpoint added: ${created.url}. Receivers verify each delivery with this secret (Standard Webhooks).`),
          shownOnce('Signing secret', created.secret),
        );
        say('Webhook endpoint added. Copy its signing secret now.');
        await refresh();
        secretSlot.querySelector('button')?.focus();
      },
    },
    field('URL', { name: 'url', type: 'url', required: true, autocomplete: 'url', placeholder: 'https://example.com/hooks/svc' }),
    field('Event types', { name: 'events', required: true, autocomplete: 'off', spellcheck: 'false', value: 'login.*' }, 'Audit record types or prefixes, separated by commas: login.failed, session.* (a test event reaches the endpoint whatever its types)'),
    field('Description', { name: 'description', autocomplete: 'off' }, 'Optional: what the endpoint is for'),
  );

  page(
    'Webhooks',
    h('p', {}, 'svc posts each audit record of the chosen types to these URLs, signed (Standard Webhooks), and retries until the receiver answers 2xx.'),
    secretSlot,
    h('section', { 'aria-labelledby': 'wh-add' }, h('h2', { id: 'wh-add' }, 'Add an endpoint'), create),
    h('section', { 'aria-labelledby': 'wh-list' }, h('h2', { id: 'wh-list' }, 'Endpoints'), list),
  );
  await refresh().catch((e: unknown) => {
    list.replaceChildren(h('p', { class: 'empty' }, 'The endpoints could not be read.'));
    throw e;
  });
}

/** The buttons of an endpoint: test event, enable/disable, delete; `after` shows the result. */
function endpointActions(w: WebhookEndpoint, after: () => Promise<void>, gone: () => void = () => void after()): HTMLElement[] {
  return [
    actionButton(
      'Send test event',
      async () => {
        await svc.admin.testWebhook(w.id);
        say(`A webhook.test event is queued for ${w.url}.`);
        await after();
      },
      { class: 'secondary', 'aria-label': `Send test event to ${w.url}` },
    ),
    actionButton(
      w.active ? 'Disable' : 'Enable',
      async () => {
        await fresh(() => svc.admin.updateWebhook(w.id, { active: !w.active }));
        say(`${w.url} is ${w.active ? 'disabled: its deliveries stop' : 'enabled'}.`);
        await after();
      },
      { class: 'secondary', 'aria-label': `${w.active ? 'Disable' : 'Enable'} ${w.url}` },
    ),
    actionButton(
      'Delete',
      async () => {
        if (!(await confirmAction(`Delete the endpoint ${w.url} and its delivery records? Deliveries still owed to it are dropped.`, 'Delete endpoint'))) return;
        await fresh(() => svc.admin.deleteWebhook(w.id));
        say(`${w.url} is deleted.`);
        gone();
      },
      { class: 'danger', 'aria-label': `Delete ${w.url}` },
    ),
  ];
}

/** One endpoint: what it receives, its actions, and its recent deliveries (newest first). */
async function endpointPage(id: string): Promise<void> {
  let endpoint: WebhookEndpoint | undefined;
  try {
    endpoint = (await svc.admin.listWebhooks()).items.find((w) => w.id === id);
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
  if (!endpoint) {
    page('Webhook endpoint', h('p', {}, 'This endpoint does not exist (any more).'), h('p', {}, h('a', { href: href('webhooks') }, 'All webhook endpoints')));
    return;
  }
  const w = endpoint;
  const deliveries = h('div', {}, h('p', {}, 'Loading…'));
  /** Sends a failed delivery again; the list is read again after, whatever the answer (the API's message shown on error). */
  const resendButton = (d: WebhookDelivery) =>
    actionButton(
      'Resend',
      async () => {
        try {
          await fresh(() => svc.admin.resendWebhookDelivery(id, d.eventId));
          say(`The ${d.type} delivery ${d.eventId} is queued again for ${w.url}.`);
        } finally {
          await load().catch(() => {});
        }
      },
      { class: 'secondary', 'aria-label': `Resend the ${d.type} delivery ${d.eventId}` },
    );
  const load = async () => {
    const { items } = await svc.admin.webhookDeliveries(id, { limit: 50 });
    deliveries.replaceChildren(
      table(
        `Deliveries to ${w.url}, newest first`,
        ['Event', 'Delivery'],
        items.map((d) => [
          h('div', {}, h('code', {}, d.type), h('div', {}, when(d.at)), h('div', {}, 'Webhook id: ', h('code', {}, d.eventId))),
          // A span (lines by <br>): the table keeps a last <div> cell on one line.
          h(
            'span',
            {},
            statusOf(d),
            h('br'),
            `Attempts: ${d.attempts}`,
            h('br'),
            `Last response: ${lastResponse(d)}`,
            h('br'),
            `Next attempt: ${when(d.nextAttemptAt)}`,
            ...(d.status === 'failed' ? [h('br'), resendButton(d)] : []),
          ),
        ]),
        'No delivery yet: send a test event.',
      ),
    );
  };
  page(
    'Webhook endpoint',
    h('p', {}, h('a', { href: href('webhooks') }, 'All webhook endpoints')),
    h(
      'dl',
      {},
      h('dt', {}, 'URL'),
      h('dd', {}, w.url),
      h('dt', {}, 'Event types'),
      h('dd', {}, w.events.join(', ')),
      h('dt', {}, 'State'),
      h('dd', {}, w.active ? 'Enabled' : 'Disabled'),
      h('dt', {}, 'Description'),
      h('dd', {}, w.description ?? '—'),
      h('dt', {}, 'Added'),
      h('dd', {}, when(w.createdAt)),
    ),
    h(
      'div',
      { class: 'actions' },
      ...endpointActions(w, () => endpointPage(id), () => (location.hash = href('webhooks'))),
    ),
    h(
      'details',
      {},
      h('summary', {}, 'Change this endpoint'),
      form(
        {
          label: 'Change this endpoint',
          submit: 'Save changes',
          action: async ({ url = '', events = '', description = '' }) => {
            await fresh(() => svc.admin.updateWebhook(id, { url: url.trim(), events: typesOf(events), description: description.trim() || null }));
            await endpointPage(id);
            say('The endpoint is changed (its secret stays the same).');
          },
        },
        field('URL', { name: 'url', type: 'url', required: true, autocomplete: 'url', value: w.url }),
        field('Event types', { name: 'events', required: true, autocomplete: 'off', spellcheck: 'false', value: w.events.join(', ') }, 'Audit record types or prefixes, separated by commas'),
        field('Description', { name: 'description', autocomplete: 'off', value: w.description ?? '' }, 'Optional: what the endpoint is for'),
      ),
    ),
    h(
      'section',
      { 'aria-labelledby': 'wh-deliveries' },
      h('h2', { id: 'wh-deliveries' }, 'Deliveries'),
      h('p', { class: 'hint' }, 'The webhook id is the webhook-id header the receiver got (the same on every retry, and when a failed delivery is sent again with Resend).'),
      h('div', { class: 'actions' }, actionButton('Refresh deliveries', load, { class: 'secondary' })),
      deliveries,
    ),
  );
  await load().catch((e: unknown) => {
    deliveries.replaceChildren(h('p', { class: 'empty' }, 'The deliveries could not be read.'));
    throw e;
  });
}
