/**
 * The landing seeds' collections (SPEC.md "Landing seeds"): written by seeds.ts, read by the realtime
 * handshake (a socket's composition). Names only, so that a reader needs nothing else of the seeds.
 */
export const COMPOSITION_COLLECTION = 'svc__core-composition';
export const INTERACTION_LINK_COLLECTION = 'svc__core-interactionlink';
