import type { ServerInstance } from '../src/instance.ts';
import { defineRoute } from '../src/http/route.ts';

/** Resolves to "ok", or "down" when the check throws or takes longer than `ms`. */
async function probe(check: () => Promise<void>, ms = 1500): Promise<'ok' | 'down'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'down'>((resolve) => {
    timer = setTimeout(() => resolve('down'), ms);
  });
  try {
    return await Promise.race([check().then(() => 'ok' as const), timeout]);
  } catch {
    return 'down';
  } finally {
    clearTimeout(timer);
  }
}

/** `GET /health`: 200 when the store and the database answer, else 503 naming the part that is down. */
export const health = (instance: ServerInstance) =>
  defineRoute({
    method: 'GET',
    path: '/health',
    config: { public: true },
    schema: { summary: 'Health of the service, its store and its database', tags: ['core'] },
    handler: async (c) => {
      const [store, db] = await Promise.all([
        probe(async () => {
          await Promise.all(instance.stores.all().map((s) => s.ping()));
        }),
        probe(() => instance.db.ping()),
      ]);
      const ok = store === 'ok' && db === 'ok';
      c.header('Cache-Control', 'no-store');
      return c.json({ status: ok ? 'ok' : 'down', store, db }, ok ? 200 : 503);
    },
  });
