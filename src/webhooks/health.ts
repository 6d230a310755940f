import type { Database } from '../db/index.ts';
import { DELIVERY_COLLECTION, type DeliveryDoc } from './deliveries.ts';
import { WEBHOOK_COLLECTION, type WebhookDoc } from './endpoints.ts';

/** `svc doctor` flags an endpoint whose last this many deliveries all failed. */
export const FAILING_AFTER = 5;

export interface FailingEndpoint {
  id: string;
  url: string;
  /** The newest of those deliveries: its last status code (null: no answer) and why it failed. */
  lastStatusCode: number | null;
  lastError?: string;
  /** When the oldest of them was queued (the receiver has been failing at least since). */
  since: string;
}

/**
 * Active endpoints whose last `last` deliveries that had an attempt all failed: `failed` (no attempts
 * left) or still `pending` after a failed attempt, none `delivered`. A receiver that is down shows here
 * long before its deliveries run out of retries (the default schedule lasts about a day).
 */
export async function failingEndpoints(db: Database, last = FAILING_AFTER): Promise<FailingEndpoint[]> {
  const endpoints = await db.collection<WebhookDoc>(WEBHOOK_COLLECTION);
  const deliveries = await db.collection<DeliveryDoc>(DELIVERY_COLLECTION);
  const failing: FailingEndpoint[] = [];
  for (const endpoint of await endpoints.find({ active: true })) {
    const recent = await deliveries.find({ webhookId: endpoint._id, attempts: { $gte: 1 } }, { sort: { eventId: -1 }, limit: last });
    if (recent.length < last || recent.some((d) => d.status === 'delivered')) continue;
    const newest = recent[0]!;
    failing.push({ id: endpoint._id, url: endpoint.url, lastStatusCode: newest.lastStatusCode, ...(newest.lastError ? { lastError: newest.lastError } : {}), since: recent.at(-1)!.at });
  }
  return failing;
}
