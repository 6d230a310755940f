import { diagnose } from '../../src/diagnostics.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

/**
 * `GET /auth/diagnostics` (admin; an `auth:admin` key too): the deployment self-check of CONTRACT 17 for
 * the request that asks, as it arrived through the proxies in front (docs/deployment-topologies.md).
 */
export const diagnostics = ({ auth, config }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/diagnostics',
    onRequest: auth.authenticate({ admin: true }),
    schema: {
      summary: 'Deployment self-check (admin)',
      description:
        'What svc sees of this request (scheme, host, client IP through `server.trustProxy`), the session cookie it sets, the frontend origins it trusts, and named findings: `cookie_secure_over_http`, `cookie_domain_mismatch`, `samesite_none_without_secure`, `cross_site_without_none`, `proxy_not_trusted`, `redirect_uri_origin_mismatch`.',
      tags: ['operations'],
    },
    handler: async (c) => {
      const providers = await auth.providers.list();
      return c.json(diagnose(c, config, auth.cookieName, providers.map((p) => ({ providerId: p.providerId, redirectUri: p.redirectUri }))));
    },
  });
