import { defaultClientConditions, defaultServerConditions } from 'vite';

/**
 * Inside svc's own workspace, tests import the packages' TypeScript sources: their `exports` name them
 * under the `svc-source` condition (an app that installed them gets their compiled dist/ instead).
 */
export const workspaceSources = {
  resolve: { conditions: ['svc-source', ...defaultClientConditions] },
  ssr: { resolve: { conditions: ['svc-source', ...defaultServerConditions], externalConditions: ['svc-source'] } },
};
