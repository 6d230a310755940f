// What every peer shares: its port, the bench Redis, the session TTL and the user it serves.
export const PORT = Number(process.env.PORT ?? 0);
export const HOST = '127.0.0.1';
export const REDIS_URL = process.env.REDIS_URL ?? '';
/** Session lifetime, seconds; every authenticated request slides it (except where a peer says otherwise). */
export const TTL = 86_400;
/** Cookie signing secret for the peers that sign (express-session, @fastify/session, better-auth). */
export const SECRET = 'bench-only-secret-0123456789abcdef0123456789abcdef';

if (!PORT) throw new Error('PORT is required');

/** The user a peer's session carries: the same shape svc's session record holds. */
export function benchUser() {
  return { userId: '6650f0c2a1b2c3d4e5f60718', email: 'bench@example.com', isAdmin: false, provider: 'password' };
}

// A clean exit on SIGTERM, so `--cpu-prof` profiles get written.
process.once('SIGTERM', () => process.exit(0));
