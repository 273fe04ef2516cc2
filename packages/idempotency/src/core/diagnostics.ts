/**
 * Each step of a key's life, published on `node:diagnostics_channel` for tracers, metrics and logs that want
 * more than `onEvent`: nothing is built or hashed unless someone subscribes (`hasSubscribers`), so an app that
 * listens to none pays for nothing. Messages name the key by its hash (`keyHash`, as in logs), never the key,
 * the payload or the principal.
 *
 * - `idem:request` is a TracingChannel (`start`, `end`, `asyncStart`, `asyncEnd`, `error`) around one keyed
 *   request; its context (`IdempotencyRequestTrace`) carries the outcome once known.
 * - The step channels (`IDEMPOTENCY_STEP_CHANNELS`) each receive an `IdempotencyStepMessage`, inside the
 *   request's trace (a store bound to `idem:request`'s start is visible to their subscribers).
 */
import { channel, tracingChannel } from 'node:diagnostics_channel';
import type { IdempotencyMode } from './config.ts';
import { logKeyHash } from './log-key-hash.ts';
import type { RequestOutcome } from './record.ts';
import type { IdempotentRequest } from './request.ts';

export const IDEMPOTENCY_REQUEST_CHANNEL = 'idem:request';

export const IdempotencyStep = {
  /** This request owns the key now (`takeover`: it replaced an expired key or a dead owner's lease). */
  claimed: 'claimed',
  /** The response is stored: completed (external mode) or committed with the procedure's writes (transactional). */
  stored: 'stored',
  /** The key was given up without a stored response (a failure that is not an outcome): a retry runs again. */
  released: 'released',
  /** A duplicate got the stored response. */
  replayed: 'replayed',
  /** A duplicate found the key still running: 409 with Retry-After. */
  inFlight: 'in-flight',
  /** The key came back with another payload: 422. */
  payloadMismatch: 'payload-mismatch',
  /** This request's lease was taken over before it could complete or release: its result is not stored. */
  leaseLost: 'lease-lost',
} as const;
export type IdempotencyStep = (typeof IdempotencyStep)[keyof typeof IdempotencyStep];

/** `idem:<step>` for every step. */
export const IDEMPOTENCY_STEP_CHANNELS = Object.fromEntries(
  Object.values(IdempotencyStep).map((step) => [step, `idem:${step}`]),
) as { readonly [S in IdempotencyStep]: `idem:${S}` };

export interface IdempotencyStepMessage {
  step: IdempotencyStep;
  procedure: string;
  mode: IdempotencyMode;
  keyHash: string;
  /** `claimed` only: true when the claim took over an expired key or a dead owner's lease. */
  takeover?: boolean;
}

/** The context of one `idem:request` trace. */
export interface IdempotencyRequestTrace {
  procedure: string;
  mode: IdempotencyMode;
  keyHash: string | null;
  /** Set before the traced promise settles, when the request has an outcome. */
  outcome?: RequestOutcome;
}

const stepChannels = Object.fromEntries(
  Object.entries(IDEMPOTENCY_STEP_CHANNELS).map(([step, name]) => [step, channel(name)]),
) as Record<IdempotencyStep, ReturnType<typeof channel>>;

export const requestTraceChannel = tracingChannel<object, IdempotencyRequestTrace>(
  IDEMPOTENCY_REQUEST_CHANNEL,
);

/** Publishes `step` of `request`'s key, when anyone listens. */
export function publishStep(
  step: IdempotencyStep,
  mode: IdempotencyMode,
  request: IdempotentRequest,
  detail: { takeover?: boolean } = {},
): void {
  const target = stepChannels[step];
  if (!target.hasSubscribers) return;
  const message: IdempotencyStepMessage = {
    step,
    procedure: request.procedure,
    mode,
    keyHash: logKeyHash(request.scope, request.key),
    ...detail,
  };
  target.publish(message);
}
