// The login limit's give-back (src/auth/rate-limit.ts) against instances sharing one store.
import { describe, expect, it } from 'vitest';
import { giveBack, LoginRateLimit } from '../../src/auth/rate-limit.ts';
import { MemoryStore } from '../../src/store/memory.ts';

describe('login limit: giving an attempt back', () => {
  // Another instance's increment landing right after this one's decrement. A give-back that removed a
  // counter at zero in a second command (DECR, then DEL) removed that increment with it: a password it
  // checked went uncounted. Attempts the email+IP lock refuses give back to the IP, so anyone could
  // drive this (no account needed).
  it('an increment from another instance between the decrement and the removal is kept', async () => {
    const store = new MemoryStore();
    const decr = store.decr.bind(store);
    store.decr = async (key) => {
      const left = await decr(key);
      await store.incr(key, 900); // the other instance, at the worst moment
      return left;
    };
    await store.incr('k', 900);
    await giveBack(store, 'k');
    expect(await store.get('k')).toBe('1');
  });

  it('tries at a locked email do not use up the IP', async () => {
    const store = new MemoryStore();
    const limit = new LoginRateLimit(store, 't:');
    for (let i = 0; i < 5; i++) await limit.check('a@example.com', '192.0.2.1');
    for (let i = 0; i < 10; i++) await expect(limit.check('a@example.com', '192.0.2.1')).rejects.toMatchObject({ status: 429 });
    expect(await store.get('t:login-fail-ip:192.0.2.1')).toBe('5');
  });
});
