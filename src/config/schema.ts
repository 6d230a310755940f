import * as v from 'valibot';

/** Custom OAuth2 provider template (SPEC.md "Custom provider template"). */
export const customTemplateSchema = v.strictObject({
  id: v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9-]*$/, 'must be kebab-case: lowercase letters, digits, dashes')),
  displayName: v.string(),
  authorizationEndpoint: v.pipe(v.string(), v.url()),
  tokenEndpoint: v.pipe(v.string(), v.url()),
  userInfoEndpoint: v.pipe(v.string(), v.url()),
  scopes: v.optional(v.array(v.string()), []),
  pkce: v.optional(v.boolean(), true),
});

const positiveSeconds = v.pipe(v.number(), v.integer(), v.minValue(1));
const storeRole = v.picklist(['sessions', 'oauthState', 'providerTokens']);
const instanceId = v.pipe(v.string(), v.regex(/^[a-zA-Z][a-zA-Z0-9]*$/, 'must be a camelCase store instance id'));
/** A path of the frontend: starts with one `/`, no query or fragment (the token is appended as `?token=`). */
const linkPath = v.pipe(v.string(), v.regex(/^\/(?!\/)[^?#\s]*$/, 'must be a path starting with / (no query, no fragment)'));
/** A mail subject: one line (a line break would start a new mail header). */
const subject = v.pipe(v.string(), v.minLength(1), v.maxLength(200), v.regex(/^[^\r\n]*$/, 'must be one line'));
const redisDb = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(15));

/**
 * The app config file (`svc.config.{ts,js,json}`), with SPEC.md's defaults. Strict objects: an
 * unknown key stops start-up with a message that names it.
 */
export const configSchema = v.strictObject({
  /**
   * The app's own name and address (issue 53): `name` is the TOTP issuer and the passkey relying party's
   * name users see in their apps (default `svc`), and leads every mail's subject and text when set;
   * `url`, the frontend's address, is where mailed links go unless `auth.email.linkBaseUrl` says otherwise.
   */
  app: v.optional(
    v.strictObject({
      name: v.optional(v.pipe(v.string(), v.trim(), v.minLength(1), v.maxLength(64), v.regex(/^[^\r\n<>]*$/, 'must be one line without < or >'))),
      url: v.optional(v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//, 'must be an http(s) URL'))),
    }),
    {},
  ),
  auth: v.optional(
    v.strictObject({
      session: v.optional(
        v.strictObject({
          ttl: v.optional(positiveSeconds, 86400),
          ttlMode: v.optional(v.picklist(['sliding', 'absolute']), 'sliding'),
          cleanupInterval: v.optional(positiveSeconds, 900),
          maxLifetime: v.optional(positiveSeconds, 2592000),
          /** In-process session records kept exact by Redis key tracking (docs/scaling.md "Local session cache"). */
          localCache: v.optional(v.boolean(), false),
          /** Most records one instance keeps (when full, the oldest one not used since the last sweep goes). */
          localCacheSize: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(10_000_000)), 100_000),
          /** Seconds a cached record is served before it is read again, whatever Redis says. */
          localCacheMaxAge: v.optional(positiveSeconds, 10),
          /** With the local cache: seconds between two pushes of a sliding TTL by one instance. */
          touchInterval: v.optional(positiveSeconds, 60),
          /** Step-up (CONTRACT 10): seconds after a login or reauthentication in which a session may add a way in. */
          freshAge: v.optional(positiveSeconds, 900),
        }),
        {},
      ),
      cookie: v.optional(
        v.strictObject({
          name: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.-]+$/, 'must be a valid cookie name')), 'sid_app'),
          secure: v.optional(v.boolean(), true),
          sameSite: v.optional(v.picklist(['strict', 'lax', 'none']), 'strict'),
          domain: v.optional(v.string()),
          /** `__Host-<name>`: the browser binds the cookie to this host, Secure, Path=/ (docs/configuration.md: trade-off). */
          hostPrefix: v.optional(v.boolean(), false),
          /** `Partitioned` (CHIPS): a cross-site frontend's cookie kept per top-level site; needs sameSite "none" and secure (docs/deployment-topologies.md). */
          partitioned: v.optional(v.boolean(), false),
        }),
        {},
      ),
      // Default chosen in load.ts from the cookie name (`defaultKeyPrefix`).
      store: v.optional(v.strictObject({ keyPrefix: v.optional(v.pipe(v.string(), v.minLength(1))) }), {}),
      storeInstances: v.optional(
        v.strictObject({
          sessions: v.optional(instanceId, 'cache'),
          oauthState: v.optional(instanceId, 'cache'),
          providerTokens: v.optional(instanceId, 'cache'),
        }),
        {},
      ),
      /** TOTP: `oauth` makes OAuth logins of a user with TOTP on ask for the code too. */
      totp: v.optional(v.strictObject({ oauth: v.optional(v.boolean(), true) }), {}),
      /** WebAuthn relying party (docs/account.md "Passkeys"): defaults from SVC_SERVER_BASE_URL and SVC_FRONTEND_URLS. */
      passkeys: v.optional(
        v.strictObject({
          rpId: v.optional(v.pipe(v.string(), v.regex(/^[a-z0-9.-]+$/i, 'must be a host name'))),
          /** Unset: `app.name`, else `svc`. */
          rpName: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(64))),
          origins: v.optional(v.array(v.pipe(v.string(), v.url()))),
        }),
        {},
      ),
      providers: v.optional(v.strictObject({ custom: v.optional(v.array(customTemplateSchema), []) }), {}),
      /** Self-service sign-up (CONTRACT 12): `POST /auth/signup`; needs SVC_SMTP_URL. */
      signup: v.optional(
        v.strictObject({
          enabled: v.optional(v.boolean(), false),
          /** A self-signed-up user logs in with a password only once the email is verified. */
          requireVerifiedEmail: v.optional(v.boolean(), true),
        }),
        {},
      ),
      /** Breached passwords (CONTRACT 14, docs/security.md): passwords being set are checked by k-anonymity against a range API. */
      passwords: v.optional(
        v.strictObject({
          breachCheck: v.optional(
            v.strictObject({
              enabled: v.optional(v.boolean(), false),
              /** `GET <rangeUrl><5 hex>`: the Pwned Passwords range API, or an operator's mirror of it. */
              rangeUrl: v.optional(v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//, 'must be an http(s) URL')), 'https://api.pwnedpasswords.com/range/'),
              timeoutMs: v.optional(v.pipe(v.number(), v.integer(), v.minValue(50), v.maxValue(30_000)), 1500),
              /** The range service down or slow: true accepts the password (warn log), false answers 503. */
              failOpen: v.optional(v.boolean(), true),
            }),
            {},
          ),
        }),
        {},
      ),
      /** Security notices (CONTRACT 14): `newDevice` unset means on when SVC_SMTP_URL is set. */
      notices: v.optional(v.strictObject({ newDevice: v.optional(v.boolean()) }), {}),
      /** Captcha on risk (CONTRACT 14, docs/security.md): unset, never asked. The secret is read from the variable `secretEnv` names. */
      captcha: v.optional(
        v.strictObject({
          provider: v.picklist(['turnstile', 'hcaptcha', 'recaptcha']),
          siteKey: v.pipe(v.string(), v.minLength(1), v.maxLength(200), v.regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces')),
          secretEnv: v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')),
          /** Unset: the provider's siteverify endpoint. */
          verifyUrl: v.optional(v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//, 'must be an http(s) URL'))),
        }),
      ),
      /** The audit log (CONTRACT 13, docs/events.md): records older than this many days go. */
      audit: v.optional(v.strictObject({ retentionDays: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(3650)), 90) }), {}),
      /** Webhook delivery (CONTRACT 13): retry n comes `retrySchedule[n-1]` seconds after attempt n, then `failed`. */
      webhooks: v.optional(
        v.strictObject({
          retrySchedule: v.optional(v.pipe(v.array(v.pipe(v.number(), v.minValue(0), v.maxValue(7 * 86400))), v.maxLength(20)), [5, 30, 120, 600, 3600, 21600, 86400]),
        }),
        {},
      ),
      /** API keys (CONTRACT 15, docs/api-keys.md): live keys per user, and requests per key per minute (all instances together). */
      apiKeys: v.optional(
        v.strictObject({
          maxPerUser: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000)), 20),
          rateLimit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1_000_000)), 600),
        }),
        {},
      ),
      /** Device login (CONTRACT 15, RFC 8628): seconds a device code lives. */
      deviceFlow: v.optional(v.strictObject({ ttl: v.optional(v.pipe(v.number(), v.integer(), v.minValue(60), v.maxValue(3600)), 600) }), {}),
      /** Login by a link sent by mail (CONTRACT 12): `POST /auth/login/link`; needs SVC_SMTP_URL. */
      magicLink: v.optional(v.strictObject({ enabled: v.optional(v.boolean(), false) }), {}),
      /** Mails with links (CONTRACT 12): where the links point, and the subjects. */
      email: v.optional(
        v.strictObject({
          /** Unset: the first SVC_FRONTEND_URLS entry. */
          linkBaseUrl: v.optional(v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//, 'must be an http(s) URL'))),
          paths: v.optional(
            v.strictObject({
              verify: v.optional(linkPath, '/verify-email'),
              reset: v.optional(linkPath, '/reset-password'),
              magicLink: v.optional(linkPath, '/login/link'),
              /** The device login page (CONTRACT 15): `verification_uri`. */
              device: v.optional(linkPath, '/device'),
              /** The "this wasn't me" page of new-device notices (CONTRACT 14). */
              notMe: v.optional(linkPath, '/not-me'),
            }),
            {},
          ),
          /**
           * Seconds nodemailer waits on the relay: for the connection, for its greeting (and STARTTLS, AUTH),
           * and of silence on the socket later. A hung relay holds a mail job no longer than these.
           */
          timeouts: v.optional(
            v.strictObject({ connect: v.optional(positiveSeconds, 10), greeting: v.optional(positiveSeconds, 10), socket: v.optional(positiveSeconds, 20) }),
            {},
          ),
          /** Subject of each kind of mail (docs/email.md); unset: the default. */
          subjects: v.optional(
            v.strictObject({
              verify: v.optional(subject),
              reset: v.optional(subject),
              magicLink: v.optional(subject),
              signupExisting: v.optional(subject),
              passwordChanged: v.optional(subject),
              totpDisabled: v.optional(subject),
              newDevice: v.optional(subject),
            }),
            {},
          ),
        }),
        {},
      ),
    }),
    {},
  ),
  global: v.optional(v.strictObject({ requireAuthentication: v.optional(v.boolean(), true) }), {}),
  cache: v.optional(
    v.strictObject({
      /** Redis db index for every role; unset: the URL's own (`redis://host/2`), else 0. */
      db: v.optional(redisDb),
      dbs: v.optional(v.record(storeRole, redisDb), {}),
    }),
    {},
  ),
  /** The admin console at `/admin` (CONTRACT 16, docs/console.md): on unless `enabled` is false (then 404). */
  admin: v.optional(
    v.strictObject({
      console: v.optional(v.strictObject({ enabled: v.optional(v.boolean(), true) }), {}),
    }),
    {},
  ),
  server: v.optional(
    v.strictObject({
      /** Request body limit in bytes (CONTRACT section 2: 1 MiB). */
      bodyLimit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1024)), 1024 * 1024),
      /**
       * How many reverse proxies stand in front (0: none). With N > 0, the client address is read
       * from `X-Forwarded-For` N hops back, and the public origin from `X-Forwarded-Proto/Host`.
       */
      trustProxy: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(10)), 0),
    }),
    {},
  ),
  plugins: v.optional(v.array(v.string()), []),
  pluginOptions: v.optional(v.record(v.string(), v.unknown()), {}),
});

export type FileConfig = v.InferOutput<typeof configSchema>;
export type StoreRole = v.InferOutput<typeof storeRole>;
export type CustomTemplate = v.InferOutput<typeof customTemplateSchema>;
