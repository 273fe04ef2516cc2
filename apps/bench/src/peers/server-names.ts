/** The server processes of the peers section: one per contender (baselines share their contender's process). */
export const serverNames = ['none', 'idem', 'node-idempotency', 'express-idempotency', 'powertools'] as const;
export type ServerName = (typeof serverNames)[number];
