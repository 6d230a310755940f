import { defineRoute } from '../../src/http/route.ts';
import type { ServerInstance } from '../../src/instance.ts';

/**
 * `GET /auth/config` (public, CONTRACT 14): what a login page needs to know before it draws itself —
 * the captcha it may be asked for (provider and site key; null when off), whether sign-up, magic links
 * and passkeys are on, and the OAuth providers as `GET /auth/oauth/providers` lists them.
 */
export const authConfig = ({ auth, config }: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/auth/config',
    config: { public: true },
    schema: {
      summary: 'What the login page offers',
      description: '`{"captcha":{"provider","siteKey"}|null,"signup":bool,"magicLink":bool,"passkeys":bool,"providers":[{"providerId","label","type"}]}`. A captcha is asked for (400 `captcha_required`) only after failed logins; `captcha` tells the page which widget to load then.',
      tags: ['auth'],
    },
    handler: async (c) =>
      c.json({
        captcha: auth.captcha.publicConfig(),
        signup: config.auth.signup.enabled,
        magicLink: config.auth.magicLink.enabled,
        passkeys: true,
        providers: (await auth.providers.listEnabled()).map(({ providerId, label, type }) => ({ providerId, label, type })),
      }),
  });
