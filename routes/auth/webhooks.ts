import * as v from 'valibot';
import { adminActor } from '../../src/audit/log.ts';
import { defineRoute } from '../../src/http/route.ts';
import { intQuery } from '../../src/http/schemas.ts';
import type { ServerInstance } from '../../src/instance.ts';
import { createWebhookSchema, patchWebhookSchema } from '../../src/webhooks/schemas.ts';
import { toPublicDelivery, toPublicWebhook } from '../../src/webhooks/index.ts';

const tags = ['webhooks'];
/** Any id up to a bound: one no endpoint has is simply not there, 404. */
const webhookParams = v.object({ id: v.pipe(v.string(), v.maxLength(200)) });
const deliveryParams = v.object({ id: v.pipe(v.string(), v.maxLength(200)), eventId: v.pipe(v.string(), v.maxLength(200)) });
const deliveriesQuery = v.strictObject({ limit: intQuery(50, 1, 200) });

/** `POST /auth/webhooks` (admin): the secret is in this answer only (CONTRACT 13). */
export const createWebhook = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/webhooks',
    // Step-up (CONTRACT 10): a new endpoint receives every event it names, and its secret is in the answer.
    onRequest: [auth.authenticate({ admin: true }), auth.requireFresh()],
    config: { type: 'dataCreate' },
    schema: {
      summary: 'Add a webhook endpoint (admin)',
      description:
        'Events: audit record types or prefixes ending in `.*` (docs/events.md). The URL must be https: and not a private or loopback address unless `SVC_ALLOW_INSECURE_WEBHOOK_URLS=1`. ' +
        'The answer holds `secret` (`whsec_...`), shown this once: receivers verify each delivery with it (Standard Webhooks). 403 `reauthentication_required` (step-up) for a session not authenticated within `auth.session.freshAge`.',
      tags,
      body: createWebhookSchema,
    },
    handler: async (c, { body }) => {
      const { doc, secret } = await auth.webhooks.endpoints.create(body);
      await auth.audit.record(c, { type: 'webhook.created', actor: adminActor(c), details: { webhookId: doc._id } });
      return c.json({ ...toPublicWebhook(doc), secret }, 201);
    },
  });

export const listWebhooks = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/webhooks',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataList' },
    schema: { summary: 'Webhook endpoints, without secrets (admin)', tags },
    handler: async (c) => c.json({ items: (await auth.webhooks.endpoints.list()).map(toPublicWebhook) }),
  });

export const updateWebhook = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'PATCH',
    path: '/auth/webhooks/:id',
    onRequest: [auth.authenticate({ admin: true }), auth.requireFresh()],
    config: { type: 'dataUpdate' },
    schema: {
      summary: 'Change a webhook endpoint (admin)',
      description: '`active: false` stops its deliveries (those still owed end as failed); `description: null` removes the note. The secret never changes. 403 `reauthentication_required` (step-up).',
      tags,
      params: webhookParams,
      body: patchWebhookSchema,
    },
    handler: async (c, { params, body }) => {
      const doc = await auth.webhooks.endpoints.patch(params.id, body);
      await auth.audit.record(c, { type: 'webhook.updated', actor: adminActor(c), details: { webhookId: doc._id } });
      return c.json(toPublicWebhook(doc));
    },
  });

export const deleteWebhook = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'DELETE',
    path: '/auth/webhooks/:id',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataDelete' },
    schema: { summary: 'Remove a webhook endpoint and its delivery records (admin)', tags, params: webhookParams },
    handler: async (c, { params }) => {
      await auth.webhooks.remove(params.id);
      await auth.audit.record(c, { type: 'webhook.deleted', actor: adminActor(c), details: { webhookId: params.id } });
      return c.body(null, 204);
    },
  });

export const testWebhook = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/webhooks/:id/test',
    onRequest: auth.authenticate({ admin: true }),
    schema: {
      summary: 'Send a webhook.test event to an endpoint (admin)',
      description: 'Queued like any event (202 before it is sent); `GET /auth/webhooks/:id/deliveries` shows how it went.',
      tags,
      params: webhookParams,
    },
    handler: async (c, { params }) => {
      const eventId = await auth.webhooks.sendTest(params.id, adminActor(c));
      return c.json({ eventId }, 202);
    },
  });

export const listDeliveries = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/webhooks/:id/deliveries',
    onRequest: auth.authenticate({ admin: true }),
    config: { type: 'dataList' },
    schema: {
      summary: "An endpoint's recent deliveries (admin)",
      description: 'Newest first; `limit` 1..200 (default 50). `status`: `pending` (`nextAttemptAt` says when the next attempt is due), `delivered` or `failed` (no attempts left).',
      tags,
      params: webhookParams,
      query: deliveriesQuery,
    },
    handler: async (c, { params, query }) => {
      await auth.webhooks.endpoints.get(params.id);
      return c.json({ items: (await auth.webhooks.listDeliveries(params.id, query.limit)).map(toPublicDelivery) });
    },
  });

export const resendDelivery = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/webhooks/:id/deliveries/:eventId/resend',
    // Guarded as the test route is: it sends an event the endpoint already subscribed to, to its own URL.
    onRequest: auth.authenticate({ admin: true }),
    schema: {
      summary: 'Send a failed delivery again (admin)',
      description:
        'Queues the event again to this endpoint (202 before it is sent), with the same body and `webhook-id` (receivers dedupe on it), a fresh timestamp and signature, and the retry schedule from its start; ' +
        'the delivery shows `pending` again, then its outcome. Only a `failed` delivery: 409 `delivery_pending` while it is attempted, 409 `delivery_delivered` once received, 409 `webhook_inactive` for an inactive endpoint; unknown endpoint or delivery: 404 `not_found`.',
      tags,
      params: deliveryParams,
    },
    handler: async (c, { params }) => {
      const eventId = await auth.webhooks.resend(params.id, params.eventId);
      return c.json({ eventId }, 202);
    },
  });
