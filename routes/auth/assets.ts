import * as v from 'valibot';
import { invalidToken } from '../../src/auth/assets.ts';
import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

const tags = ['assets'];
/** Any string: a malformed token is answered like an unknown one (404), not as bad input. */
const tokenParams = v.object({ token: v.string() });

/** `POST /auth/asset-token`: a download token for an asset the caller may read (CONTRACT section 6). */
export const mintAssetToken = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'POST',
    path: '/auth/asset-token',
    onRequest: auth.authenticate(),
    config: { type: 'dataCreate' },
    schema: {
      summary: 'Mint an asset download token',
      description:
        '`single`: one download within 60 s while this session lives (`GET /auth/asset/:token`). `session`: any number of downloads while this session lives (`GET /auth/session-asset/:token`). 404 when no plugin resolver knows the asset for this user. 429 `too_many_requests` past 100 unused single-use or 100 session tokens of one session.',
      tags,
      body: v.strictObject({
        assetId: v.pipe(v.string(), v.minLength(1), v.maxLength(1024)),
        mode: v.picklist(['single', 'session'], 'must be "single" or "session"'),
      }),
    },
    handler: async (c, { body }) => {
      const token = await auth.assets.mint(c.get('session')!, body.assetId, body.mode);
      // The /api form works from a browser behind the frontend's proxy and against svc directly.
      const url = `/api/auth/${body.mode === 'single' ? 'asset' : 'session-asset'}/${token}`;
      return c.json({ token, url }, 201);
    },
  });

/** `GET /auth/asset/:token`: a single-use download; of parallel requests exactly one gets the asset. */
export const downloadAsset = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/asset/:token',
    config: { public: true, type: 'dataRead' },
    schema: { summary: 'Download with a single-use asset token', description: 'Streams the asset; `Cache-Control: no-store`. 404 `asset_token_invalid` for an unknown, used or expired token, or one whose minting session has ended.', tags, params: tokenParams },
    handler: async (c, { params }) => {
      // HEAD asks whether a link works without using it up (link checkers, download managers).
      const head = c.req.method === 'HEAD';
      const record = await auth.assets.single(params.token, head);
      if (!record) throw invalidToken();
      return auth.assets.download(record, head);
    },
  });

/** `GET /auth/session-asset/:token`: downloads while the minting session lives. */
export const downloadSessionAsset = ({ auth }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/session-asset/:token',
    config: { public: true, type: 'dataRead' },
    schema: { summary: 'Download with a session asset token', description: 'Streams the asset; `Cache-Control: no-store`. 404 `asset_token_invalid` once the minting session has ended.', tags, params: tokenParams },
    handler: async (c, { params }) => {
      const record = await auth.assets.session(params.token);
      if (!record) throw invalidToken();
      return auth.assets.download(record, c.req.method === 'HEAD');
    },
  });
