/**
 * `idempotentRetryLink()`: re-sends a keyed mutation — the same operation, so the same Idempotency-Key — when
 * the failure is retryable (see `retry-policy.ts`), waiting a jittered backoff in between, or the server's
 * `Retry-After` when that is longer.
 *
 * Place it before the terminating link, e.g.
 * `links: [loggerLink(…), idempotentRetryLink(), splitLink({ condition: (op) => op.type === 'mutation',
 *   true: httpLink({ …, headers: ({ op }) => idempotencyHeaders(op) }), false: httpBatchLink(…) })]`.
 * Queries, subscriptions and mutations without `context.idempotencyKey` pass through untouched: they are
 * never retried here (re-sending a mutation without a key could run it twice) — except the router's
 * idempotent mutations named in `requireKeyFor`, which fail without a key before the request leaves.
 */
import { type OperationResultEnvelope, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyTRPCRouter } from '@trpc/server';
import { observable, type Unsubscribable } from '@trpc/server/observable';
import type { IdempotentProcedurePath } from '../idempotent-procedure.ts';
import { isValidIdempotencyKey, RETRY_AFTER_HEADER } from '../protocol.ts';
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_RETRY_AFTER_MS } from './constants.ts';
import {
  errorResponseOf,
  getIdempotencyObserver,
  isReplayedResponse,
  mutationKeyOf,
  type RetryLinkEvent,
  readResponseHeader,
  responseOf,
  responseStatus,
} from './context.ts';
import { MissingIdempotencyKeyError } from './missing-key-error.ts';
import { IdempotencyOutcomeUnknownError, type OutcomeUnknownDetails } from './outcome-unknown-error.ts';
import {
  type BackoffOptions,
  backoffDelayMs,
  httpStatusOf,
  isAbortError,
  parseRetryAfter,
  type RetryReason,
  retryReasonOf,
} from './retry-policy.ts';

export interface IdempotentRetryLinkOptions<TRouter extends AnyTRPCRouter = AnyTRPCRouter>
  extends BackoffOptions {
  /**
   * The router's idempotent mutations, `{ 'checkout.placeOrder': true }`. One of them called without a usable
   * `context.idempotencyKey` (a plain `useMutation`, a `mutate()` without context) fails at once with a
   * `MissingIdempotencyKeyError` cause, and nothing is sent. Typed from the router
   * (`idempotentRetryLink<AppRouter>(…)`): every procedure built with `.transactional()` / `.external()` must
   * be listed, and no other.
   */
  requireKeyFor?: Readonly<Record<IdempotentProcedurePath<TRouter>, true>>;
  /** Total attempts, the first one included. Default 8: waits of 11.25–22.5 s in all (`constants.ts`). */
  maxAttempts?: number;
  /** A server's `Retry-After` is honoured up to this long. Default 30 000 ms. */
  maxRetryAfterMs?: number;
  /** Waits `ms`; rejects (or resolves early) when `signal` aborts. Default: a `setTimeout`. For tests. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** The clock `Retry-After` dates are measured against. Default `Date.now`. */
  now?: () => number;
}

/**
 * Why a wait ended early, as an error every caller recognises as an abort (`isAbortError`, so never retried):
 * the signal's reason itself when it is one already (`controller.abort()`, `AbortSignal.timeout`), else an
 * AbortError with the reason's message that carries an Error reason as its `cause`.
 */
function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && isAbortError(reason)) return reason;
  const error = reason instanceof Error ? new Error(reason.message, { cause: reason }) : new Error('Aborted');
  error.name = 'AbortError';
  return error;
}

/**
 * The call's error when the retries end without an answer: a TRPCClientError whose cause says so, with the last
 * attempt's error shape and meta (its status, its Response) so that what reads them reads the same.
 */
function outcomeUnknownError<TRouter extends AnyTRPCRouter>(
  last: TRPCClientError<TRouter>,
  details: OutcomeUnknownDetails,
): TRPCClientError<TRouter> {
  const cause = new IdempotencyOutcomeUnknownError(details, { cause: last });
  const shape = last.shape;
  return new TRPCClientError<TRouter>(cause.message, {
    cause,
    meta: last.meta,
    result: shape == null ? undefined : { error: shape },
  });
}

/** The default sleep: a timer cleared when the signal aborts. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

export function idempotentRetryLink<TRouter extends AnyTRPCRouter = AnyTRPCRouter>(
  options: IdempotentRetryLinkOptions<TRouter> = {},
): TRPCLink<TRouter> {
  const keyRequired: Readonly<Record<string, true>> = options.requireKeyFor ?? {};
  const maxAttempts = Math.max(1, Math.floor(options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS));
  const maxRetryAfterMs = options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
  const wait = options.sleep ?? abortableSleep;
  const now = options.now ?? Date.now;

  return () =>
    ({ op, next }) => {
      const key = mutationKeyOf(op);
      if (key === undefined || !isValidIdempotencyKey(key)) {
        // An idempotent mutation without a usable key: refused here, before it leaves.
        if (op.type === 'mutation' && Object.hasOwn(keyRequired, op.path)) {
          return observable<never, TRPCClientError<TRouter>>((observer) => {
            observer.error(TRPCClientError.from(new MissingIdempotencyKeyError(op.path)));
          });
        }
        // Not a keyed mutation: left alone. A key no header can carry would fail in fetch with a TypeError,
        // which would look like a network error.
        return next(op);
      }
      const observe = getIdempotencyObserver(op.context);
      const notify = (event: RetryLinkEvent) => {
        try {
          observe?.(event);
        } catch (error) {
          // An observer's bug must not change the request's outcome.
          console.error('idempotentRetryLink: idempotencyObserver threw', error);
        }
      };
      const notifyResponse = (ok: boolean, response: ReturnType<typeof responseOf>, status?: number) =>
        notify({ type: 'response', ok, replayed: isReplayedResponse(response), status });

      return observable<OperationResultEnvelope<unknown, TRPCClientError<TRouter>>, TRPCClientError<TRouter>>(
        (observer) => {
          const { signal } = op;
          let attempt = 0;
          /** An attempt failed in a way that may have reached the server (not a 429: refused before running). */
          let mayHaveRun = false;
          let done = false;
          let current: Unsubscribable | undefined;
          // Aborted when the caller's signal aborts or the consumer unsubscribes: ends a pending wait.
          const waiting = new AbortController();
          const onAbort = () => waiting.abort(signal?.reason);
          signal?.addEventListener('abort', onAbort, { once: true });

          const finish = () => {
            done = true;
            signal?.removeEventListener('abort', onAbort);
          };
          const fail = (error: TRPCClientError<TRouter>) => {
            if (done) return;
            finish();
            observer.error(error);
          };
          // `waiting` carries the caller's abort reason (`onAbort`); it is aborted whenever this is called.
          const failAborted = () => fail(TRPCClientError.from(abortError(waiting.signal)));
          // Ends the call on a retryable failure, no attempt having got an answer.
          const giveUp = (error: TRPCClientError<TRouter>, reason: RetryReason) =>
            fail(
              mayHaveRun
                ? outcomeUnknownError(error, { key, path: op.path, attempts: attempt, reason })
                : error,
            );

          const send = () => {
            attempt += 1;
            notify({ type: 'attempt', attempt, maxAttempts });
            // The same `op` every time: same id, same context, hence the same Idempotency-Key header.
            current = next(op).subscribe({
              next(envelope) {
                if (done) return;
                const response = responseOf(envelope.context);
                notifyResponse(true, response, responseStatus(response));
                observer.next(envelope);
              },
              error(error) {
                if (done) return;
                const reason = signal?.aborted ? undefined : retryReasonOf(error);
                const response = errorResponseOf(error);
                if (reason === undefined) {
                  // A final answer of the server (reported as its response), an abort, or a failure that is not
                  // worth a retry: passed on as it is.
                  const status = httpStatusOf(error);
                  if (response !== undefined || status !== undefined) notifyResponse(false, response, status);
                  fail(error);
                  return;
                }
                if (reason !== 'throttled') mayHaveRun = true;
                if (attempt >= maxAttempts) {
                  giveUp(error, reason);
                  return;
                }
                const retryAfter = readResponseHeader(response, RETRY_AFTER_HEADER);
                // `Retry-After` is the least the server asks to wait; the backoff's wait, when longer, keeps the
                // schedule's least total (a restart that answers every attempt with `Retry-After: 1` is ridden out).
                const delayMs = Math.max(
                  parseRetryAfter(retryAfter, now(), maxRetryAfterMs) ?? 0,
                  backoffDelayMs(attempt, options),
                );
                notify({ type: 'retrying', attempt, delayMs, reason, error });
                wait(delayMs, waiting.signal).then(
                  () => {
                    // The consumer leaving (`done`) aborted `waiting` too: `fail` then does nothing.
                    if (waiting.signal.aborted) failAborted();
                    else send();
                  },
                  () => (signal?.aborted ? failAborted() : giveUp(error, reason)),
                );
              },
              complete() {
                if (done) return;
                finish();
                observer.complete();
              },
            });
          };

          send();
          return () => {
            finish();
            waiting.abort();
            current?.unsubscribe();
          };
        },
      );
    };
}
