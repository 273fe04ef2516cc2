/**
 * The retry link's final error when its retries end without an answer: every attempt failed retryably and at
 * least one may have reached the server (no response, a 5xx, or a 409 — the same key still in flight), so the
 * mutation may or may not have run. The remedy is the key: send the same input again with the SAME key, and the
 * server runs it at most once and replays its result; a new key could run it twice.
 *
 * It is the `cause` of the `TRPCClientError` the call fails with (a link surfaces TRPCClientError). That error
 * keeps the last attempt's `data`, `shape` and `meta`, so `error.data?.httpStatus` and `retryReasonOf(error)` read
 * what they read on the last attempt's error. A final answer of the server (400, 402, 422, …) is never wrapped:
 * its outcome is known. Nor is a run of 429s (refused before anything ran, nothing stored) or an abort.
 */
import type { TRPCClientError } from '@trpc/client';
import type { AnyTRPCRouter } from '@trpc/server';
import { property } from './context.ts';
import type { RetryReason } from './retry-policy.ts';

export interface OutcomeUnknownDetails {
  /** The Idempotency-Key every attempt carried: the one to send again. */
  key: string;
  /** The procedure, e.g. `checkout.placeOrder`. */
  path: string;
  /** How many attempts were sent. */
  attempts: number;
  /** Why the last attempt failed. */
  reason: RetryReason;
}

export class IdempotencyOutcomeUnknownError extends Error {
  override readonly name = 'IdempotencyOutcomeUnknownError';
  declare readonly key: string;
  declare readonly path: string;
  declare readonly attempts: number;
  declare readonly reason: RetryReason;

  /** `cause`: the last attempt's error. */
  constructor(details: OutcomeUnknownDetails, options: { cause: unknown }) {
    const { path, attempts } = details;
    const last = options.cause instanceof Error ? options.cause.message : String(options.cause);
    super(
      `Outcome unknown: ${path} got no answer in ${attempts} ${attempts === 1 ? 'attempt' : 'attempts'} ` +
        `(last: ${last}). Retry with the same idempotency key: the server runs it at most once.`,
      options,
    );
    Object.assign(this, details);
  }
}

/** The call's error when the retry link gave up without knowing the outcome; its `cause` holds the details. */
export type OutcomeUnknownClientError = TRPCClientError<AnyTRPCRouter> & {
  readonly cause: IdempotencyOutcomeUnknownError;
};

/**
 * Whether a call failed with an unknown outcome (the retry link's `IdempotencyOutcomeUnknownError` cause): then
 * retry with the same key. Also by name, for two copies of this package in one bundle (where instanceof fails).
 */
export function isIdempotencyOutcomeUnknown(error: unknown): error is OutcomeUnknownClientError {
  const cause = property(error, 'cause');
  return (
    property(error, 'name') === 'TRPCClientError' &&
    (cause instanceof IdempotencyOutcomeUnknownError ||
      (property(cause, 'name') === 'IdempotencyOutcomeUnknownError' &&
        typeof property(cause, 'key') === 'string'))
  );
}
