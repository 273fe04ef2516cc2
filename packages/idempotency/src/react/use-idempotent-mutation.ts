/**
 * `useIdempotentMutation`: a keyed tRPC mutation on TanStack Query, with one key per intent
 * (`useIdempotencyKey`), retries through `idempotentRetryLink`, and an explicit in-doubt state.
 *
 * How the key reaches the link: `@trpc/tanstack-react-query`'s `mutationOptions(opts)` returns a `mutationFn`
 * that closes over `opts` and passes `opts.trpc` (`{ context }`) to the client; the returned object's own `trpc`
 * field is only `{ path }`. So the context cannot be added to what `mutationOptions()` returned — this hook
 * takes the call instead, `(request) => trpc.x.mutationOptions({ ...request, onSuccess… })`, and calls it
 * again for each submission with that submission's `{ trpc: { context: { idempotencyKey, idempotencyObserver } } }`.
 *
 * In-doubt rule: when an earlier attempt of this intent is in doubt (sent, outcome never known: the page
 * reloaded mid-request, or retries ran out) and `submit` is called with a DIFFERENT payload, the new payload
 * is NOT sent. The ORIGINAL payload is re-sent with the ORIGINAL key — the server replays its outcome if it
 * went through, or runs it once if it did not — and that outcome is reported (`state.recoveredInDoubt`,
 * `state.input` = the original payload). Only after that may the UI start a new intent, and only with the
 * user's consent, through `reset()` (a new key). Sending the edited payload under the old key would be
 * rejected (422), and under a new key could run twice.
 *
 * An unresolved intent's key is never given up silently: a 422 to a re-sent attempt that is not a replay
 * (the server holds another payload under the key) leaves the key and the payload in place ('unresolved');
 * an attempt older than `maxIntentAgeMs` is not re-sent at all ('expired'); while another tab sharing the
 * storage waits for the intent's outcome, `reset()` is refused.
 */
import { type UseMutationOptions, useMutation } from '@tanstack/react-query';
import { useCallback, useMemo, useState } from 'react';
import { DEFAULT_MAX_ATTEMPTS } from '../client/constants.ts';
import type { KeyedMutationContext, RetryLinkEvent } from '../client/context.ts';
import { httpStatusOf, isAbortError, retryReasonOf } from '../client/retry-policy.ts';
import { plainJsonWire } from '../core/wire-form.ts';
import type { IsIdempotentProcedureError } from '../idempotent-procedure.ts';
import { isAlive, keepAlive } from './intent-store.ts';
import { payloadEquals, serializePayload } from './payload.ts';
import {
  type InDoubtAttempt,
  isIntentExpired,
  type UseIdempotencyKeyOptions,
  useIntent,
} from './use-idempotency-key.ts';

/** What the hook passes to your `mutationOptions` call: spread it into `trpc.x.mutationOptions({ ... })`. */
export type IdempotentRequestOptions = { trpc: { context: KeyedMutationContext } };

export type IdempotentMutationStatus =
  | 'idle'
  /** The first attempt is in flight. */
  | 'sending'
  /** A retryable failure happened; waiting, or a later attempt (same key) is in flight. */
  | 'retrying'
  /** Done: the server ran it now. The key is retired. */
  | 'succeeded'
  /** Done: the server replayed the stored result of an earlier attempt with this key. The key is retired. */
  | 'replayed'
  /** A final, deterministic error (validation, declined, out of stock, …). The key is retired. */
  | 'failed'
  /**
   * Retries exhausted on a retryable failure (or the call aborted): the outcome is unknown. The key is kept;
   * `inDoubt` is set. When the link's retries ran out, `error` is its outcome-unknown error
   * (`isIdempotencyOutcomeUnknown`).
   */
  | 'unknown'
  /**
   * A re-sent attempt got a 422 that is not a replay: the server holds another payload under this key, so what
   * became of the intent is still unknown here (also, without sending, when the stored payload of the sent
   * attempt cannot be read back). The key and the payload are kept; only `reset()` gives a new key.
   */
  | 'unresolved'
  /**
   * Not sent: the in-doubt attempt is older than `maxIntentAgeMs`. Ask the server what became of it (the key
   * and `state.input`), then `reset()`.
   */
  | 'expired';

export interface IdempotentMutationState<TData, TError, TVariables> {
  status: IdempotentMutationStatus;
  /** The current attempt (1-based; 0 when idle). */
  attempt: number;
  maxAttempts: number;
  /** The final error ('failed', 'unknown'), or the last retryable one while 'retrying'. */
  error: TError | null;
  data: TData | undefined;
  /** The payload actually sent — the ORIGINAL one when an in-doubt attempt was being resolved. */
  input: TVariables | undefined;
  /** True when `submit` resolved an earlier in-doubt attempt instead of sending the payload it was given. */
  recoveredInDoubt: boolean;
}

/** `storage`, `transformer`, `serializer`, `maxIntentAgeMs`: see `useIdempotencyKey`. */
export interface UseIdempotentMutationOptions extends UseIdempotencyKeyOptions {
  /** Names the intent; its key lives in storage under `idem:intent:<intentId>`. */
  intentId: string;
}

export interface UseIdempotentMutationResult<TData, TError, TVariables> {
  /**
   * Sends `input` with the intent's key. While an attempt is in flight, returns that attempt's promise (no
   * second request). When an earlier attempt is in doubt, resolves it first (see the module comment). Never
   * rejects for a server or network error: resolves with the final state; rejects only for a programming error
   * (e.g. a payload that does not survive `serializer`).
   */
  submit(input: TVariables): Promise<IdempotentMutationState<TData, TError, TVariables>>;
  state: IdempotentMutationState<TData, TError, TVariables>;
  /** The intent's key; null until mounted. */
  key: string | null;
  inDoubt: InDoubtAttempt<TVariables> | null;
  /**
   * Another tab sharing the storage is waiting for this intent's outcome. Do not offer a new intent: a
   * `submit` here joins that payment (same key), and `reset()` is refused until it is over.
   */
  inFlightElsewhere: boolean;
  /**
   * The user starts a new intent: a new key (even if an attempt is in doubt) and an idle state. Refused
   * (returns false) while an attempt is in flight, in this tab or another — wait for its outcome.
   */
  reset(): boolean;
}

/**
 * What the options argument must also satisfy: nothing for a procedure built with `idempotency.transactional()`
 * or `.external()` (its error type carries the mark), else a property no options object has, so that passing a
 * plain mutation is a compile error that names the reason.
 */
export type IdempotentProcedureOnly<TError> =
  IsIdempotentProcedureError<TError> extends true
    ? unknown
    : {
        notAnIdempotentProcedure: 'useIdempotentMutation needs a procedure built with idempotency.transactional() or .external()';
      };

/**
 * The status a failed submission ends in. `resentNotReplayed`: the key had been sent before this submission and
 * the server's answer was not a replay — then a 422 means the key holds another payload (or a first, fresh
 * decision that a re-send will replay), and the intent stays unresolved rather than losing its key.
 */
function failureStatus(error: unknown, resentNotReplayed: boolean): IdempotentMutationStatus {
  // `retryReasonOf` names the link's outcome-unknown error as it named the last attempt's (it keeps that error's
  // data and meta), and a retryable error that comes without it (no link; every attempt refused with a 429).
  if (isAbortError(error) || retryReasonOf(error)) return 'unknown';
  return resentNotReplayed && httpStatusOf(error) === 422 ? 'unresolved' : 'failed';
}

const IDLE: IdempotentMutationState<never, never, never> = {
  status: 'idle',
  attempt: 0,
  maxAttempts: DEFAULT_MAX_ATTEMPTS,
  error: null,
  data: undefined,
  input: undefined,
  recoveredInDoubt: false,
};

/**
 * @param mutationOptions builds the tRPC mutation options from the request options this hook supplies:
 *   `(request) => trpc.notes.create.mutationOptions({ ...request, onSuccess: … })`. Called on every
 *   render and once per submission; keep it pure. TanStack `retry` is forced off: retries belong to
 *   `idempotentRetryLink`, which re-sends the same operation with the same key. Only a procedure built with
 *   `idempotency.transactional()` / `.external()` is accepted: for any other, `options` does not type-check
 *   (`IdempotentProcedureOnly`).
 */
export function useIdempotentMutation<TData, TError, TVariables, TOnMutateResult = unknown>(
  mutationOptions: (
    request: IdempotentRequestOptions,
  ) => UseMutationOptions<TData, TError, TVariables, TOnMutateResult> & IdempotentProcedureOnly<TError>,
  options: UseIdempotentMutationOptions,
): UseIdempotentMutationResult<TData, TError, TVariables> {
  type State = IdempotentMutationState<TData, TError, TVariables>;
  const { store, record, seen, settingsRef, setInFlightKey } = useIntent<TVariables>(
    options.intentId,
    options,
  );
  const key = record?.key ?? null;
  const [state, setState] = useState<State>(IDLE);

  // This instance's mutable fields, read by the callbacks and never rendered.
  const [instance] = useState(() => ({
    /**
     * The in-flight submission's context: read by mutationFn (TanStack calls it a few microtasks after
     * mutateAsync). Only `submit` sets it, and never while one is in flight, so a call always reads its own.
     */
    context: null as KeyedMutationContext | null,
    inFlight: null as Promise<State> | null,
    /** As the link last reported it. */
    maxAttempts: DEFAULT_MAX_ATTEMPTS,
    /** The developer warnings already given (each once per hook instance). */
    warned: undefined as { link?: true; transformer?: true } | undefined,
  }));

  const mutation = useMutation<TData, TError, TVariables, TOnMutateResult>({
    ...mutationOptions({ trpc: { context: { idempotencyKey: key ?? '' } } }),
    retry: false,
    // TanStack runs the mutationFn of the options it was given last, so this closes over the same render's
    // `mutationOptions` as the rest of those options (onSuccess, …).
    mutationFn: (variables, functionContext) => {
      const context = instance.context;
      const mutationFn = context && mutationOptions({ trpc: { context } }).mutationFn;
      if (!mutationFn) throw new Error('useIdempotentMutation: not sent by submit(), or no mutationFn');
      return mutationFn(variables, functionContext);
    },
  });
  // Stable: TanStack binds it to the hook's observer.
  const { mutateAsync } = mutation;

  const submit = useCallback(
    (input: TVariables): Promise<State> => {
      if (instance.inFlight) return instance.inFlight;

      const record = store.ensure();
      const { key, sent: before, createdAt } = record;
      const settings = settingsRef.current;
      const transformer = settings.transformer ?? plainJsonWire;
      // Nothing of this instance is in flight, so a recorded `sent` payload is in doubt (or another tab's, in
      // flight): this submission re-sends it. A different `input` is not sent, the original is (see the module
      // comment) — "different" as the server's fingerprint sees it.
      const resent = before !== null;
      /** Ends the submission without sending. */
      const notSent = (status: IdempotentMutationStatus, input?: TVariables) => {
        const next: State = { ...IDLE, status, input };
        setState(next);
        return Promise.resolve(next);
      };
      let payload = input;
      let recoveredInDoubt = false;
      let stopKeepAlive: () => void;
      try {
        if (before) {
          let original: TVariables;
          try {
            original = settings.serializer.parse(before.payload) as TVariables;
          } catch {
            // What was sent under this key cannot be read back (storage altered): never re-sent, never replaced.
            return notSent('unresolved');
          }
          recoveredInDoubt = !payloadEquals(original, input, transformer);
          if (recoveredInDoubt) payload = original;
          // Too old to re-send: the server may have forgotten the key. The form asks what became of it.
          if (isIntentExpired(createdAt, settings.maxIntentAgeMs)) return notSent('expired', original);
        }
        const now = Date.now();
        const sent = { payload: serializePayload(settings.serializer, payload, transformer), at: now };
        // This tab's sign of life first: another tab that sees the sent record sees it in flight.
        stopKeepAlive = keepAlive(store, key);
        // Persist BEFORE sending: if the page dies once the request has left, the reload knows it is in doubt.
        // The intent's age counts from its first send.
        store.write({ ...record, createdAt: resent ? createdAt : now, sent });
        setInFlightKey(key);
      } catch (error) {
        return Promise.reject(error);
      }

      let replayed = false;
      let linkSeen = false;
      let attempt = 1;
      let retryableError: TError | null = null;
      // Only this submission sets the state until it settles: `submit` and `reset` wait for it.
      const show = (status: IdempotentMutationStatus, data?: TData, error = retryableError): State => {
        const next: State = {
          status,
          attempt,
          maxAttempts: instance.maxAttempts,
          error,
          data,
          input: payload,
          recoveredInDoubt,
        };
        setState(next);
        return next;
      };
      const observer = (event: RetryLinkEvent) => {
        linkSeen = true;
        if (event.type === 'attempt') {
          attempt = event.attempt;
          instance.maxAttempts = event.maxAttempts;
          show(attempt > 1 ? 'retrying' : 'sending');
        } else if (event.type === 'retrying') {
          retryableError = event.error as TError;
          show('retrying');
        } else {
          replayed = event.replayed;
        }
      };
      instance.context = { idempotencyKey: key, idempotencyObserver: observer };
      show('sending');

      const settle = (status: IdempotentMutationStatus, data: TData | undefined, error: TError | null) => {
        stopKeepAlive();
        // 'unknown': retries ran out on a failure that may or may not have reached the server; 'unresolved':
        // the server holds another payload under the key. Both keep the key and payload (in doubt). Any other
        // answer is definite: a new intent next.
        if (status !== 'unknown' && status !== 'unresolved') store.retire(key);
        setInFlightKey(null);
        // Developer warnings, left out of production builds (bundlers replace `process.env.NODE_ENV`).
        if (process.env.NODE_ENV !== 'production') {
          instance.warned ??= {};
          if (!linkSeen && !instance.warned.link) {
            instance.warned.link = true;
            console.warn('useIdempotentMutation: no idempotentRetryLink() in the tRPC client');
          }
          if (status === 'unresolved' && !settings.transformer && !instance.warned.transformer) {
            instance.warned.transformer = true;
            console.warn(
              'useIdempotentMutation: a re-sent payload got 422. If the tRPC links use a transformer, pass it as `transformer`.',
            );
          }
        }
        return show(status, data, error);
      };
      const tracked = mutateAsync(payload)
        .then(
          (data) => settle(replayed ? 'replayed' : 'succeeded', data, null),
          (error: TError) => settle(failureStatus(error, resent && !replayed), undefined, error),
        )
        .finally(() => {
          if (instance.inFlight === tracked) instance.inFlight = null;
        });
      instance.inFlight = tracked;
      return tracked;
    },
    [store, settingsRef, setInFlightKey, mutateAsync, instance],
  );

  const reset = useCallback((): boolean => {
    // Another tab waiting for this intent's outcome: a new key here could run the same intent twice.
    if (instance.inFlight || isAlive(store.aliveAt())) return false;
    store.ensure(true);
    setInFlightKey(null);
    mutation.reset();
    setState(IDLE);
    return true;
  }, [store, setInFlightKey, mutation.reset, instance]);

  const { inDoubt, inFlightElsewhere } = seen;
  return useMemo(
    () => ({ submit, state, key, inDoubt, inFlightElsewhere, reset }),
    [submit, state, key, inDoubt, inFlightElsewhere, reset],
  );
}
