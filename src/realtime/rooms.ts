import { hashWorkSessionId } from '../auth/work-sessions.ts';

/**
 * Rooms core puts sockets in, for plugins to address them. A work session's id is its guests' credential,
 * and room names travel through the Redis stream of the adapter and the saved recovery state: the room
 * is named by the id's SHA-256, never the id.
 */
export const rooms = {
  user: (userId: string) => `user:${userId}`,
  workSession: (workSessionId: string) => `work-session:${hashWorkSessionId(workSessionId)}`,
};
