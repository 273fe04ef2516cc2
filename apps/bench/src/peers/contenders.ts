/**
 * What is measured. An *arm* is one route that gets timed (P1 latency, P2 throughput); a *variant* is one
 * protected route that gets the correctness probes (same-key burst, identical retry, mismatched payload).
 *
 * Every protected arm is compared twice: with its OWN framework's unprotected route (what the idempotency layer
 * costs on its own: tRPC for Idem, Express for express-idempotency, node:http for the others), and with plain
 * node:http `none` (what the whole stack costs end to end).
 */
import type { ServerName } from './server-names.ts';

export const armIds = [
  'none',
  'trpc',
  'trpc-noop',
  'trpc-one-more-statement',
  'idem-without-sql',
  'idem',
  'idem-replay-cache',
  'node-idempotency',
  'express',
  'express-idempotency',
  'powertools',
] as const;
export type ArmId = (typeof armIds)[number];

export interface Arm {
  id: ArmId;
  label: string;
  server: ServerName;
  path: string;
  /** The unprotected arm on the same framework; null for the unprotected arms themselves. */
  baseline: ArmId | null;
  /** Where the idempotency records live. */
  store: string;
}

export const arms: Record<ArmId, Arm> = {
  none: {
    id: 'none',
    label: 'none (node:http)',
    server: 'none',
    path: '/effect',
    baseline: null,
    store: '–',
  },
  trpc: {
    id: 'trpc',
    label: 'none (tRPC standalone)',
    server: 'idem',
    path: '/bench.unprotected',
    baseline: null,
    store: '–',
  },
  'trpc-noop': {
    id: 'trpc-noop',
    label: 'tRPC route with no work (the floor of any tRPC answer)',
    server: 'idem',
    path: '/bench.noop',
    baseline: null,
    store: '–',
  },
  'trpc-one-more-statement': {
    id: 'trpc-one-more-statement',
    label: 'tRPC route with one more round trip in its transaction (`select 1`)',
    server: 'idem',
    path: '/bench.oneMoreStatement',
    baseline: null,
    store: '–',
  },
  'idem-without-sql': {
    id: 'idem-without-sql',
    label:
      'Idem `transactional()` over a store that writes nothing (the library’s JavaScript alone; protects nothing)',
    server: 'idem',
    path: '/bench.protectedWithoutSql',
    baseline: null,
    store: '–',
  },
  idem: {
    id: 'idem',
    label: 'Idem `transactional()` (tRPC)',
    server: 'idem',
    path: '/bench.protected',
    baseline: 'trpc',
    store: 'Postgres, in the handler’s transaction',
  },
  'idem-replay-cache': {
    id: 'idem-replay-cache',
    label: 'Idem `transactional()` + `replayCache` (tRPC)',
    server: 'idem',
    path: '/bench.protectedReplayCache',
    baseline: 'trpc',
    store: 'Postgres; completed keys also in process memory (opt-in, `rememberCommitted`)',
  },
  'node-idempotency': {
    id: 'node-idempotency',
    label: '@node-idempotency/core (node:http)',
    server: 'node-idempotency',
    path: '/effect',
    baseline: 'none',
    store: 'Redis (storage-adapter-redis)',
  },
  express: {
    id: 'express',
    label: 'none (Express 5)',
    server: 'express-idempotency',
    path: '/unprotected',
    baseline: null,
    store: '–',
  },
  'express-idempotency': {
    id: 'express-idempotency',
    label: 'express-idempotency (Express 5)',
    server: 'express-idempotency',
    path: '/protected',
    baseline: 'express',
    store: 'process memory (its default adapter)',
  },
  powertools: {
    id: 'powertools',
    label: '@aws-lambda-powertools/idempotency (node:http)',
    server: 'powertools',
    path: '/effect',
    baseline: 'none',
    store: 'Redis (CachePersistenceLayer)',
  },
};

/**
 * Timed back to back as groups (each protected arm right next to its own baseline); the group order rotates and
 * the order inside a group flips every round, so no arm always runs first or on a warmer machine.
 */
export const armGroups: ArmId[][] = [
  ['none', 'node-idempotency', 'powertools'],
  ['trpc', 'idem', 'idem-replay-cache', 'trpc-noop', 'trpc-one-more-statement', 'idem-without-sql'],
  ['express', 'express-idempotency'],
];

export const protectedArmIds = armIds.filter((id) => arms[id].baseline !== null);

/** The peers that keep their records in Redis: the ones issue 32 measures Idem against. */
export const redisPeerIds = ['node-idempotency', 'powertools'] as const satisfies readonly ArmId[];

export const variantIds = [
  'idem',
  'node-idempotency',
  'express-idempotency',
  'powertools',
  'powertools-validated',
  'powertools-function-form',
] as const;
export type VariantId = (typeof variantIds)[number];

export interface Variant {
  id: VariantId;
  label: string;
  server: ServerName;
  path: string;
}

export const variants: Record<VariantId, Variant> = {
  idem: { ...arms.idem, id: 'idem' },
  'node-idempotency': { ...arms['node-idempotency'], id: 'node-idempotency' },
  'express-idempotency': { ...arms['express-idempotency'], id: 'express-idempotency' },
  powertools: { ...arms.powertools, id: 'powertools', label: 'powertools, Lambda handler (as timed)' },
  'powertools-validated': {
    id: 'powertools-validated',
    label: 'powertools + `payloadValidationJmesPath: "body"`',
    server: 'powertools',
    path: '/validated',
  },
  'powertools-function-form': {
    id: 'powertools-function-form',
    label: 'powertools, plain-function form (no Lambda context)',
    server: 'powertools',
    path: '/function-form',
  },
};

/** The servers that get a second process for the two-instance burst. */
export const protectedServers: ServerName[] = [
  'idem',
  'node-idempotency',
  'express-idempotency',
  'powertools',
];
