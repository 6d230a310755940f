import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import type { Config } from '../../config/load.ts';
import type { CustomTemplate } from '../../config/schema.ts';
import type { Collection, Database } from '../../db/index.ts';
import { AppError, notFound, validationFailed, type ErrorDetail } from '../../http/errors.ts';
import { catalogEntry } from './catalog.ts';
import { IssuerError, OidcIssuers } from './oidc-issuers.ts';
import type { Profile } from './profile.ts';
import { isHostName, isProviderUrlKey, providerUrlProblem } from './provider-urls.ts';
import { SecretBox, sealedRecord } from './secrets.ts';

/** A provider id (`providerId`, the `:provider` and `:id` path segments): kebab-case, at most 64 characters. */
export const PROVIDER_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

export const PROVIDER_COLLECTION = 'svc__core-oauthprovider';

/** The scopes of an oidc provider created without a list. */
export const OIDC_DEFAULT_SCOPES = ['openid', 'email', 'profile'];

const url = v.pipe(v.string(), v.maxLength(2048), v.url('must be a URL'));
/** svc's own callback, where the IdP sends the browser: a web address (`javascript:` is a URL too). */
const callbackUrl = v.pipe(url, v.check((u) => !URL.canParse(u) || /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL'));
const short = v.pipe(v.string(), v.maxLength(512));
/** Keys that provider classes put into `https://<value>/...`: a bare host name, nothing that could steer the URL. */
const host = v.pipe(v.string(), v.check(isHostName, 'must be a host name only (no scheme, path, port, user or spaces), e.g. dev-123.okta.com'));

/** Provider `config` (SPEC.md): the known keys; built-ins may add their constructor's keys. */
export const providerConfigSchema = v.strictObject({
  tenant: v.optional(host),
  realmURL: v.optional(url),
  domain: v.optional(host),
  baseURL: v.optional(url),
  // A path segment of Okta's URLs.
  authorizationServerId: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{1,100}$/, 'must be an authorization server id (letters, digits, - and _)'))),
  teamId: v.optional(short),
  keyId: v.optional(short),
  authorizationEndpoint: v.optional(url),
  tokenEndpoint: v.optional(url),
  userInfoEndpoint: v.optional(url),
  // `type: "oidc"`: the issuer identifier; its discovery document is read on save.
  issuer: v.optional(url),
  // Intuit: its sandbox serves userinfo on another host.
  environment: v.optional(v.picklist(['sandbox', 'production'], 'must be "sandbox" or "production"')),
  pkce: v.optional(v.boolean()),
  trustEmailVerified: v.optional(v.boolean()),
  persistProviderTokens: v.optional(v.boolean()),
  providerTokenNamespace: v.optional(v.pipe(v.string(), v.regex(/^[a-z0-9_]+$/, 'must be a plugin key'))),
  providerTokenStoreInstance: v.optional(v.pipe(v.string(), v.regex(/^[a-zA-Z][a-zA-Z0-9]*$/))),
  userInfoAuthorizationScheme: v.optional(v.picklist(['Bearer', 'JWT'])),
});
export type ProviderConfig = v.InferOutput<typeof providerConfigSchema>;

const scopes = v.pipe(v.array(v.pipe(v.string(), v.minLength(1), v.maxLength(200), v.regex(/^\S+$/, 'must not contain spaces'))), v.maxLength(50));

export const createProviderSchema = v.strictObject({
  providerId: v.pipe(v.string(), v.regex(PROVIDER_ID, 'must be a kebab-case id')),
  type: v.picklist(['arctic', 'custom', 'oidc']),
  label: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(100))),
  clientId: v.pipe(v.string(), v.minLength(1), v.maxLength(512)),
  clientSecret: v.optional(v.pipe(v.string(), v.maxLength(4096))),
  redirectUri: v.optional(callbackUrl),
  scopes: v.optional(scopes),
  enabled: v.optional(v.boolean(), true),
  trustEmailVerified: v.optional(v.boolean()),
  config: v.optional(providerConfigSchema, {}),
});

export const patchProviderSchema = v.strictObject({
  label: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(100))),
  clientId: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(512))),
  clientSecret: v.optional(v.pipe(v.string(), v.maxLength(4096))),
  redirectUri: v.optional(callbackUrl),
  scopes: v.optional(scopes),
  enabled: v.optional(v.boolean()),
  trustEmailVerified: v.optional(v.boolean()),
  config: v.optional(providerConfigSchema),
});

/** A provider document in `svc__core-oauthprovider`. `clientSecret` is sealed (see SecretBox). */
export interface ProviderDoc {
  _id: string;
  providerId: string;
  /** `arctic`: built-in (catalog); `custom`: endpoints configured; `oidc`: endpoints discovered from `config.issuer`. */
  type: 'arctic' | 'custom' | 'oidc';
  label: string;
  clientId: string;
  clientSecret?: string;
  redirectUri: string;
  scopes: string[];
  enabled: boolean;
  /** False: the provider's email counts as unverified whatever it claims (see `emailVerifiedBy`). */
  trustEmailVerified: boolean;
  config: ProviderConfig;
  createdAt: string;
  updatedAt: string;
}

/** As stored: documents saved before `trustEmailVerified` existed lack it. */
type StoredProviderDoc = Omit<ProviderDoc, 'trustEmailVerified'> & { trustEmailVerified?: boolean };

/** CONTRACT 5: true, except built-ins whose "verified" flag is known to be unreliable (authentik, synology). */
export function defaultTrustEmailVerified(type: ProviderDoc['type'], providerId: string): boolean {
  // Only a built-in's id names a known provider: an oidc or custom provider may be called anything.
  return type !== 'arctic' || catalogEntry(providerId)?.trustEmailVerified !== false;
}

/** Whether svc believes this provider's verified flag at all; a document without the field gets the default. */
export function trustsEmailOf(doc: Pick<StoredProviderDoc, 'type' | 'providerId' | 'trustEmailVerified'>): boolean {
  return doc.trustEmailVerified ?? defaultTrustEmailVerified(doc.type, doc.providerId);
}

/**
 * Whether a login's email counts as verified (SPEC.md "Account resolution order", CONTRACT 5): the
 * provider asserts it, or `config.trustEmailVerified` forces it for a provider that says nothing;
 * but an untrusted provider (`trustEmailVerified: false`) never verifies an email, whatever either says.
 */
export function emailVerifiedBy(doc: Pick<StoredProviderDoc, 'type' | 'providerId' | 'trustEmailVerified' | 'config'>, profile: Pick<Profile, 'emailVerified'>): boolean {
  return trustsEmailOf(doc) && (profile.emailVerified || doc.config.trustEmailVerified === true);
}

const withDefaults = (doc: StoredProviderDoc): ProviderDoc => ({ ...doc, trustEmailVerified: trustsEmailOf(doc) });

/** What admins see: never the secret, only whether one is set. */
export function toPublicProvider({ _id, clientSecret, ...doc }: ProviderDoc) {
  return { ...doc, id: doc.providerId, hasClientSecret: Boolean(clientSecret) };
}

/** Provider documents: create/patch rules, template defaults, secret sealing. */
export class ProviderService {
  readonly secrets: SecretBox;
  /** Discovery documents and key sets of the `oidc` providers' issuers. */
  readonly issuers: OidcIssuers;

  private constructor(
    private readonly docs: Collection<StoredProviderDoc>,
    private readonly config: Config,
  ) {
    this.secrets = new SecretBox(config.env.secretEncryptionKey);
    this.issuers = new OidcIssuers({ allowInsecure: config.env.allowInsecureProviderUrls });
  }

  static async open(db: Database, config: Config): Promise<ProviderService> {
    return new ProviderService(await db.collection<StoredProviderDoc>(PROVIDER_COLLECTION, [{ fields: ['providerId'] }]), config);
  }

  /** `<SVC_SERVER_BASE_URL or AUTH_CALLBACK_BASE_URL>/api/auth/oauth/<providerId>/callback`. */
  defaultRedirectUri(providerId: string): string {
    return `${this.config.env.serverBaseUrl ?? this.config.env.callbackBaseUrl}/api/auth/oauth/${providerId}/callback`;
  }

  template(id: string): CustomTemplate | undefined {
    return this.config.auth.providers.custom.find((t) => t.id === id);
  }

  async list(): Promise<ProviderDoc[]> {
    return (await this.docs.find({}, { sort: { providerId: 1 } })).map(withDefaults);
  }

  async listEnabled(): Promise<ProviderDoc[]> {
    return (await this.docs.find({ enabled: true }, { sort: { label: 1 } })).map(withDefaults);
  }

  async find(providerId: string): Promise<ProviderDoc | null> {
    const doc = await this.docs.findOne({ providerId });
    return doc && withDefaults(doc);
  }

  async get(providerId: string): Promise<ProviderDoc> {
    const doc = await this.find(providerId);
    if (!doc) throw notFound('No provider with this id');
    return doc;
  }

  /** The client secret in clear, for the code exchange only. */
  clientSecret(doc: ProviderDoc): string {
    return doc.clientSecret ? this.secrets.open(doc.clientSecret, sealedRecord.providerSecret(doc.providerId)) : '';
  }

  /**
   * Seals again every client secret not sealed the current way (plaintext from before the key was
   * set, or `enc:v1:`); returns their providerIds. Called at start-up (reseal.ts).
   */
  async resealClientSecrets(): Promise<string[]> {
    const done: string[] = [];
    for (const doc of await this.docs.find({ clientSecret: { $exists: true } })) {
      if (!doc.clientSecret || !this.secrets.needsResealing(doc.clientSecret)) continue;
      const sealed = this.secrets.reseal(doc.clientSecret, sealedRecord.providerSecret(doc.providerId));
      // Only if unchanged meanwhile (another instance starting, an admin's PATCH).
      if (await this.docs.updateOne({ providerId: doc.providerId, clientSecret: doc.clientSecret }, { $set: { clientSecret: sealed } })) done.push(doc.providerId);
    }
    return done;
  }

  async create(input: v.InferOutput<typeof createProviderSchema>): Promise<ProviderDoc> {
    let label = input.label;
    let scopes = input.scopes;
    const config: ProviderConfig = { ...input.config };
    if (input.type === 'arctic') {
      const entry = catalogEntry(input.providerId);
      if (!entry) throw validationFailed([{ path: 'providerId', message: 'is not a built-in provider (see GET /auth/available-providers)' }]);
      if (entry.clientSecretRequired && !input.clientSecret) throw validationFailed([{ path: 'clientSecret', message: `is required: ${entry.clientSecretRequired}` }]);
      const secretProblem = input.clientSecret ? entry.checkClientSecret?.(input.clientSecret) : undefined;
      if (secretProblem) throw validationFailed([{ path: 'clientSecret', message: secretProblem }]);
      label ??= entry.label;
      scopes ??= entry.defaultScopes;
    } else if (input.type === 'oidc') {
      label ??= input.providerId;
      scopes ??= OIDC_DEFAULT_SCOPES;
    } else {
      // Template defaults apply at creation only, never over values saved later.
      const template = this.template(input.providerId);
      label ??= template?.displayName ?? input.providerId;
      scopes ??= template?.scopes ?? [];
      config.authorizationEndpoint ??= template?.authorizationEndpoint;
      config.tokenEndpoint ??= template?.tokenEndpoint;
      config.userInfoEndpoint ??= template?.userInfoEndpoint;
      config.pkce ??= template?.pkce ?? true;
    }
    this.checkConfig(input.type, input.providerId, config);
    if (input.type === 'oidc') await this.checkIssuer(config.issuer!);
    const now = new Date().toISOString();
    const doc: ProviderDoc = {
      _id: randomUUID(),
      providerId: input.providerId,
      type: input.type,
      label,
      clientId: input.clientId,
      ...(input.clientSecret ? { clientSecret: this.secrets.seal(input.clientSecret, sealedRecord.providerSecret(input.providerId)) } : {}),
      redirectUri: input.redirectUri ?? this.defaultRedirectUri(input.providerId),
      scopes,
      enabled: input.enabled,
      trustEmailVerified: input.trustEmailVerified ?? defaultTrustEmailVerified(input.type, input.providerId),
      config,
      createdAt: now,
      updatedAt: now,
    };
    try {
      return withDefaults(await this.docs.insertOne(doc));
    } catch (err) {
      if ((err as AppError).code === 'already_exists') throw new AppError(409, 'provider_exists', 'A provider with this providerId already exists');
      throw err;
    }
  }

  async patch(providerId: string, patch: v.InferOutput<typeof patchProviderSchema>): Promise<ProviderDoc> {
    const doc = await this.get(providerId);
    const entry = doc.type === 'arctic' ? catalogEntry(providerId) : undefined;
    if (entry?.clientSecretRequired && patch.clientSecret === '') throw validationFailed([{ path: 'clientSecret', message: `cannot be removed: ${entry.clientSecretRequired}` }]);
    const secretProblem = patch.clientSecret ? entry?.checkClientSecret?.(patch.clientSecret) : undefined;
    if (secretProblem) throw validationFailed([{ path: 'clientSecret', message: secretProblem }]);
    const $set: Record<string, unknown> = { updatedAt: new Date().toISOString() };
    for (const key of ['label', 'clientId', 'redirectUri', 'scopes', 'enabled', 'trustEmailVerified'] as const) {
      if (patch[key] !== undefined) $set[key] = patch[key];
    }
    if (patch.config) {
      // `config` keys merge into the saved ones: a PATCH names only what changes.
      const config = { ...doc.config, ...patch.config };
      this.checkConfig(doc.type, providerId, config);
      // Read again whenever the issuer is sent (changed or not), never for unrelated changes: an admin
      // can still disable a provider while its IdP is down.
      if (doc.type === 'oidc' && patch.config.issuer !== undefined) await this.checkIssuer(config.issuer!);
      $set.config = config;
    }
    const update = patch.clientSecret === '' ? { $set, $unset: { clientSecret: true as const } } : { $set };
    if (patch.clientSecret) $set.clientSecret = this.secrets.seal(patch.clientSecret, sealedRecord.providerSecret(providerId));
    const after = await this.docs.updateOne({ providerId }, update);
    if (!after) throw notFound('No provider with this id');
    return withDefaults(after);
  }

  async delete(providerId: string): Promise<void> {
    if (!(await this.docs.deleteOne({ providerId }))) throw notFound('No provider with this id');
  }

  /** Rules valibot cannot see: required constructor keys, custom endpoints, the URL rule (it depends on the env), token persistence. */
  private checkConfig(type: ProviderDoc['type'], providerId: string, config: ProviderConfig): void {
    const details: ErrorDetail[] = [];
    for (const [key, value] of Object.entries(config)) {
      const problem = isProviderUrlKey(key) && typeof value === 'string' ? providerUrlProblem(value, this.config.env.allowInsecureProviderUrls) : undefined;
      if (problem) details.push({ path: `config.${key}`, message: problem });
    }
    const required = type === 'arctic' ? (catalogEntry(providerId)?.configKeys ?? []) : type === 'oidc' ? ['issuer'] : ['authorizationEndpoint', 'tokenEndpoint', 'userInfoEndpoint'];
    for (const key of required) if (!config[key as keyof ProviderConfig]) details.push({ path: `config.${key}`, message: 'is required for this provider' });
    if (config.persistProviderTokens && !config.providerTokenNamespace) {
      details.push({ path: 'config.providerTokenNamespace', message: 'is required when persistProviderTokens is true (the plugin key)' });
    }
    const instance = config.providerTokenStoreInstance;
    if (instance && instance !== 'cache' && !this.config.env.storeUrls[instance]) {
      details.push({ path: 'config.providerTokenStoreInstance', message: `store instance "${instance}" is not configured` });
    }
    if (details.length) throw validationFailed(details);
  }

  /** CONTRACT 5: the issuer's discovery document must be readable, JSON, and name exactly this issuer. */
  private async checkIssuer(issuer: string): Promise<void> {
    try {
      await this.issuers.discover(issuer);
    } catch (err) {
      if (err instanceof IssuerError) throw validationFailed([{ path: 'config.issuer', message: err.message }], 'The OpenID provider cannot be used');
      throw err;
    }
  }
}
