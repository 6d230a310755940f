import type { PluginSeeds } from '../../src/index.ts';

/**
 * SPEC.md rule 8: the default composition `cacheList` at `/cache-list` with the `CacheList` widget,
 * and its navigation link (never the landing page: the app decides that). Upserted by `_id` at
 * start-up, so the fixed widget uuid keeps the widget's saved layout across restarts.
 */
export const seeds: PluginSeeds = {
  compositions: [
    {
      _id: 'cacheList',
      pathname: { default: 'cache-list' },
      widgetsLayout: [[{ column: 12, widget: { uuid: '5f0c7d2e-3b1a-4c8e-9d6f-2a7b8c9d0e1f', name: 'CacheList', pluginKey: 'svc__cache' } }]],
    },
  ],
  interactionLinks: [
    {
      _id: 'cacheList',
      composition: 'cacheList',
      slotType: 'page',
      triggers: [
        {
          type: 'page-navigation',
          settings: { icon: 'mdi-database', title: { default: 'Cache list' }, sortOrder: 900, navigationBarType: 'main' },
        },
      ],
      isLandingPage: false,
    },
  ],
};
