import { randomBytes, randomUUID } from 'node:crypto';
import { matchesType } from '../audit/record.ts';
import type { SecretBox } from '../auth/oauth/secrets.ts';
import type { Collection, Database } from '../db/index.ts';
import { notFound, validationFailed } from '../http/errors.ts';
import type { CreateWebhook, PatchWebhook } from './schemas.ts';
import { webhookUrlProblem } from './url-rule.ts';

export const WEBHOOK_COLLECTION = 'svc__core-webhook';

/** How long an instance trusts its copy of the endpoint list: a change made on another instance is seen this soon. */
export const ENDPOINT_CACHE_MS = 2000;

/** A webhook endpoint in `svc__core-webhook`. `secret` is sealed like OAuth client secrets (SecretBox). */
export interface WebhookDoc {
  _id: string;
  url: string;
  events: string[];
  description: string | null;
  active: boolean;
  secret: string;
  createdAt: string;
  updatedAt: string;
}

/** What admins see: never the secret. */
export function toPublicWebhook({ _id, secret: _secret, ...doc }: WebhookDoc) {
  return { id: _id, ...doc };
}

/** The `aad` of a sealed webhook secret: it opens in this endpoint's document only. */
const sealedAs = (id: string) => `webhook:${id}`;

/** `whsec_` + base64 of 32 random bytes: the Standard Webhooks form, which its libraries read as is. */
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/**
 * Webhook endpoints (CONTRACT 13): admin CRUD, the URL rule, secrets sealed at rest, and the list the
 * event path reads, kept in memory: reloaded after a change made through this instance, and at most
 * every ENDPOINT_CACHE_MS otherwise, so an event costs no database read.
 */
export class WebhookEndpoints {
  private cached?: { docs: WebhookDoc[]; at: number };
  private loading?: { promise: Promise<WebhookDoc[]>; generation: number };
  /** Moves on each local change: a load that started before it is not kept. */
  private generation = 0;
  /** Secrets opened, by endpoint id and sealed value (a sealed value opens under its own endpoint's id only). */
  private readonly opened = new Map<string, string>();

  private constructor(
    private readonly docs: Collection<WebhookDoc>,
    private readonly secrets: SecretBox,
    private readonly allowInsecure: boolean,
  ) {}

  static async open(db: Database, secrets: SecretBox, allowInsecure: boolean): Promise<WebhookEndpoints> {
    return new WebhookEndpoints(await db.collection<WebhookDoc>(WEBHOOK_COLLECTION), secrets, allowInsecure);
  }

  /** Creates an endpoint; the secret is returned this once, in clear. */
  async create(input: CreateWebhook): Promise<{ doc: WebhookDoc; secret: string }> {
    this.checkUrl(input.url);
    const id = randomUUID();
    const secret = newSecret();
    const now = new Date().toISOString();
    const doc: WebhookDoc = {
      _id: id,
      url: input.url,
      events: input.events,
      description: input.description || null,
      active: true,
      secret: this.secrets.seal(secret, sealedAs(id)),
      createdAt: now,
      updatedAt: now,
    };
    await this.docs.insertOne(doc);
    this.changed();
    return { doc, secret };
  }

  async list(): Promise<WebhookDoc[]> {
    return this.docs.find({}, { sort: { createdAt: 1, _id: 1 } });
  }

  /** From the database, never the cache (admin routes, a job for an endpoint this instance has not seen yet). */
  find(id: string): Promise<WebhookDoc | null> {
    return this.docs.findOne({ _id: id });
  }

  async get(id: string): Promise<WebhookDoc> {
    const doc = await this.find(id);
    if (!doc) throw notFound('No webhook with this id');
    return doc;
  }

  async patch(id: string, patch: PatchWebhook): Promise<WebhookDoc> {
    if (patch.url !== undefined) this.checkUrl(patch.url);
    const $set: Record<string, unknown> = { updatedAt: new Date().toISOString() };
    if (patch.url !== undefined) $set.url = patch.url;
    if (patch.events !== undefined) $set.events = patch.events;
    if (patch.description !== undefined) $set.description = patch.description || null;
    if (patch.active !== undefined) $set.active = patch.active;
    const after = await this.docs.updateOne({ _id: id }, { $set });
    if (!after) throw notFound('No webhook with this id');
    this.changed();
    return after;
  }

  async delete(id: string): Promise<void> {
    if (!(await this.docs.deleteOne({ _id: id }))) throw notFound('No webhook with this id');
    this.changed();
  }

  /** The secret in clear, to sign a delivery (opened once per sealed value, not per delivery). */
  secretOf(doc: WebhookDoc): string {
    const key = `${doc._id} ${doc.secret}`;
    let secret = this.opened.get(key);
    if (secret === undefined) {
      secret = this.secrets.open(doc.secret, sealedAs(doc._id));
      if (this.opened.size >= 1000) this.opened.clear();
      this.opened.set(key, secret);
    }
    return secret;
  }

  /** The active endpoints subscribed to `type` (from memory; see ENDPOINT_CACHE_MS). */
  async subscribedTo(type: string): Promise<WebhookDoc[]> {
    return (await this.all()).filter((doc) => doc.active && doc.events.some((pattern) => matchesType(type, pattern)));
  }

  /** An endpoint from memory when this instance has it, else from the database. */
  async current(id: string): Promise<WebhookDoc | null> {
    return (await this.all()).find((doc) => doc._id === id) ?? this.find(id);
  }

  /**
   * Seals again every secret not sealed the current way (saved before SVC_SECRET_ENCRYPTION_KEY was
   * set, or under an older seal); returns the endpoint ids. Start-up, like the other secrets at rest.
   */
  async resealSecrets(): Promise<string[]> {
    if (!this.secrets.encrypts) return [];
    const done: string[] = [];
    for (const doc of await this.docs.find({})) {
      if (!this.secrets.needsResealing(doc.secret)) continue;
      // Only if unchanged meanwhile (another instance starting).
      const sealed = this.secrets.reseal(doc.secret, sealedAs(doc._id));
      if (await this.docs.updateOne({ _id: doc._id, secret: doc.secret }, { $set: { secret: sealed } })) done.push(doc._id);
    }
    if (done.length) this.changed();
    return done;
  }

  private async all(): Promise<WebhookDoc[]> {
    if (this.cached && Date.now() - this.cached.at < ENDPOINT_CACHE_MS) return this.cached.docs;
    if (this.loading?.generation === this.generation) return this.loading.promise;
    const generation = this.generation;
    const promise = this.docs.find({}).then((docs) => {
      if (generation === this.generation) this.cached = { docs, at: Date.now() };
      return docs;
    });
    this.loading = { promise, generation };
    try {
      return await promise;
    } finally {
      if (this.loading?.promise === promise) this.loading = undefined;
    }
  }

  /** A change through this instance: the next event reads the list again. */
  private changed(): void {
    this.generation++;
    this.cached = undefined;
  }

  private checkUrl(url: string): void {
    const problem = webhookUrlProblem(url, this.allowInsecure);
    if (problem) throw validationFailed([{ path: 'url', message: problem }]);
  }
}
