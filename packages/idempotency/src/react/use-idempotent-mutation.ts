/**
 * `useIdempotentMutation`: a keyed tRPC mutation on TanStack Query, with one key per purchase intent
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
 * `state.input` = the original payload). Only after that may the UI start a new purchase, and only with the
 * user's consent, through `reset()` (a new key). Sending the edited payload under the old key would be
 * rejected (422), and under a new key could buy twice.
 */
import { type UseMutationOptions, useMutation } from '@tanstack/react-query';
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { DEFAULT_MAX_ATTEMPTS } from '../client/constants.ts';
import type { IdempotencyContext, IdempotencyEvent } from '../client/context.ts';
import { classifyFailure, isAbortError } from '../client/retry-policy.ts';
import type { KeyValueStorage } from './intent-store.ts';
import { type PayloadSerializer, payloadEquals } from './payload.ts';
import { type InDoubtAttempt, useIntent } from './use-idempotency-key.ts';

/** What the hook passes to your `mutationOptions` call: spread it into `trpc.x.mutationOptions({ ... })`. */
export type IdempotentRequestOptions = { trpc: { context: IdempotencyContext } };

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
  /** Retries exhausted on a retryable failure: the outcome is unknown. The key is kept; `inDoubt` is set. */
  | 'unknown';

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

export interface UseIdempotentMutationOptions {
  /** Names the purchase intent; its key lives in storage under `idem:intent:<intentId>`. */
  intentId: string;
  /** See `useIdempotencyKey`. Default `window.sessionStorage`. */
  storage?: KeyValueStorage | null;
  /** See `useIdempotencyKey`. Default JSON. */
  serializer?: PayloadSerializer;
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
   * The user starts a new purchase: a new key (even if an attempt is in doubt) and an idle state. Refused
   * (returns false) while an attempt is in flight — wait for its outcome.
   */
  reset(): boolean;
}

const useIsomorphicLayoutEffect = typeof window === 'undefined' ? useEffect : useLayoutEffect;

function idleState<TData, TError, TVariables>(): IdempotentMutationState<TData, TError, TVariables> {
  return {
    status: 'idle',
    attempt: 0,
    maxAttempts: DEFAULT_MAX_ATTEMPTS,
    error: null,
    data: undefined,
    input: undefined,
    recoveredInDoubt: false,
  };
}

interface Submission {
  context: IdempotencyContext;
}

/**
 * @param mutationOptions builds the tRPC mutation options from the request options this hook supplies:
 *   `(request) => trpc.checkout.placeOrder.mutationOptions({ ...request, onSuccess: … })`. Called on every
 *   render and once per submission; keep it pure. TanStack `retry` is forced off: retries belong to
 *   `idempotentRetryLink`, which re-sends the same operation with the same key.
 */
export function useIdempotentMutation<TData, TError, TVariables, TOnMutateResult = unknown>(
  mutationOptions: (
    request: IdempotentRequestOptions,
  ) => UseMutationOptions<TData, TError, TVariables, TOnMutateResult>,
  options: UseIdempotentMutationOptions,
): UseIdempotentMutationResult<TData, TError, TVariables> {
  type State = IdempotentMutationState<TData, TError, TVariables>;
  const { handle: intent, store, serializerRef } = useIntent<TVariables>(options.intentId, options);
  const [state, setState] = useState<State>(idleState);

  const factoryRef = useRef(mutationOptions);
  useIsomorphicLayoutEffect(() => {
    factoryRef.current = mutationOptions;
  });
  // The in-flight submission: read by mutationFn (TanStack calls it a few microtasks after mutateAsync).
  // Only `submit` sets it, and never while one is in flight, so a call always reads its own.
  const submissionRef = useRef<Submission | null>(null);
  const inFlightRef = useRef<Promise<State> | null>(null);
  const generationRef = useRef(0);
  const maxAttemptsRef = useRef(DEFAULT_MAX_ATTEMPTS);
  const warnedRef = useRef(false);

  const renderContext: IdempotencyContext = { idempotencyKey: intent.key ?? '' };
  const mutation = useMutation<TData, TError, TVariables, TOnMutateResult>({
    ...mutationOptions({ trpc: { context: renderContext } }),
    retry: false,
    mutationFn: (variables, functionContext) => {
      const submission = submissionRef.current;
      if (!submission)
        throw new Error('useIdempotentMutation: send with submit(), not through TanStack mutate().');
      const { mutationFn } = factoryRef.current({ trpc: { context: submission.context } });
      if (!mutationFn) throw new Error('useIdempotentMutation: the mutation options have no mutationFn.');
      return mutationFn(variables, functionContext);
    },
  });
  const mutateAsyncRef = useRef(mutation.mutateAsync);
  useIsomorphicLayoutEffect(() => {
    mutateAsyncRef.current = mutation.mutateAsync;
  });
  const intentRef = useRef(intent);
  useIsomorphicLayoutEffect(() => {
    intentRef.current = intent;
  });

  const submit = useCallback(
    (input: TVariables): Promise<State> => {
      if (inFlightRef.current) return inFlightRef.current;
      const generation = ++generationRef.current;
      const current = (update: (state: State) => State) => {
        if (generationRef.current === generation) setState(update);
      };

      const record = store.ensure();
      const key = record.key;
      // Nothing of this instance is in flight, so a recorded `sent` payload is in doubt.
      let payload = input;
      let recoveredInDoubt = false;
      if (record.sent) {
        const original = serializerRef.current.parse(record.sent.payload) as TVariables;
        if (!payloadEquals(original, input)) {
          payload = original;
          recoveredInDoubt = true;
        }
      }
      try {
        // Persist BEFORE sending: if the page dies once the request has left, the reload knows it is in doubt.
        intentRef.current.markSent(payload);
      } catch (error) {
        return Promise.reject(error);
      }

      let replayed = false;
      let linkSeen = false;
      let attempt = 1;
      const observer = (event: IdempotencyEvent) => {
        linkSeen = true;
        if (event.type === 'attempt') {
          attempt = event.attempt;
          maxAttemptsRef.current = event.maxAttempts;
          current((s) => ({
            ...s,
            status: event.attempt > 1 ? 'retrying' : 'sending',
            attempt: event.attempt,
            maxAttempts: event.maxAttempts,
          }));
        } else if (event.type === 'retrying') {
          current((s) => ({ ...s, status: 'retrying', error: event.error as TError }));
        } else if (event.ok) {
          replayed = event.replayed;
        }
      };
      submissionRef.current = { context: { idempotencyKey: key, idempotencyObserver: observer } };
      setState({
        status: 'sending',
        attempt: 1,
        maxAttempts: maxAttemptsRef.current,
        error: null,
        data: undefined,
        input: payload,
        recoveredInDoubt,
      });

      const settle = (outcome: Pick<State, 'status' | 'data' | 'error'>): State => {
        if (!linkSeen && !warnedRef.current) {
          warnedRef.current = true;
          console.warn(
            'useIdempotentMutation: no idempotentRetryLink reported on this request. Add idempotentRetryLink() ' +
              'before the terminating link: without it nothing is retried and replays are not detected.',
          );
        }
        const final: State = {
          ...outcome,
          attempt,
          maxAttempts: maxAttemptsRef.current,
          input: payload,
          recoveredInDoubt,
        };
        current(() => final);
        return final;
      };

      const promise = mutateAsyncRef.current(payload).then(
        (data): State => {
          intentRef.current.retire(key);
          return settle({ status: replayed ? 'replayed' : 'succeeded', data, error: null });
        },
        (error: TError): State => {
          if (isAbortError(error) || classifyFailure(error) === 'retry') {
            // Retries ran out on a failure that may or may not have reached the server: keep key and payload.
            intentRef.current.markInDoubt();
            return settle({ status: 'unknown', data: undefined, error });
          }
          // A definite answer (stored and replayed by the server, or rejected before running): a new intent next.
          intentRef.current.retire(key);
          return settle({ status: 'failed', data: undefined, error });
        },
      );
      const tracked = promise.finally(() => {
        if (inFlightRef.current === tracked) inFlightRef.current = null;
      });
      inFlightRef.current = tracked;
      return tracked;
    },
    [store, serializerRef],
  );

  const reset = useCallback((): boolean => {
    if (inFlightRef.current) return false;
    generationRef.current += 1;
    intentRef.current.reset();
    mutation.reset();
    setState(idleState);
    return true;
  }, [mutation.reset]);

  return useMemo(
    () => ({ submit, state, key: intent.key, inDoubt: intent.inDoubt, reset }),
    [submit, state, intent.key, intent.inDoubt, reset],
  );
}
