/**
 * One idempotent request, whatever the adapter: the key from its header, the principal, the fingerprint, then
 * the mode's lifecycle (`handleTransactional` / `handleExternal`) or, without a key under `missingKey:
 * 'passthrough'`, an unprotected run — and one event per request. The tRPC middleware and the plain-HTTP guard
 * only translate their framework's request into a `GuardedRequest` and the `GuardOutcome` into their reply.
 */
import { randomUUID } from 'node:crypto';
import type { IdempotencyMode, ResolvedOptions } from './config.ts';
import {
  type IdempotencyRequestTrace,
  IdempotencyStep,
  publishStep,
  requestTraceChannel,
} from './diagnostics.ts';
import { IdempotencyError, IdempotencyErrorCode, UnstableScope, unstableScopeError } from './errors.ts';
import type { IdempotencyEvent } from './event.ts';
import { handleExternal } from './external.ts';
import { parseIdempotencyKey } from './key.ts';
import { logKeyHash } from './log-key-hash.ts';
import { RequestOutcome, type StoredResponse } from './record.ts';
import type { HandledRequest, IdempotentRequest, RunOutcome } from './request.ts';
import type { IdempotencyStore } from './store.ts';
import { handleTransactional, runUnkeyedTransactional } from './transactional.ts';

type MaybePromise<T> = T | Promise<T>;

/** What a protected handler finds about its request's key, on every adapter. */
export interface IdempotencyContext {
  /**
   * The client's key: forward it (or something derived from it) to every outside service. For a request let
   * through without a key (`missingKey: 'passthrough'`, `keyed: false`), a fresh UUID of this request alone, so
   * a retry is a new request.
   */
  key: string;
  /** False when the request carried no key and ran unprotected (`missingKey: 'passthrough'`). */
  keyed: boolean;
  /** The principal the key is scoped to. */
  scope: string;
  /**
   * The request fingerprint (SHA-256 of the canonical route or procedure and its input). Name effects after
   * (scope, key, fingerprint) rather than the key alone: once a key has expired it may come back with a
   * different request, which must not resume the old one's effects.
   */
  fingerprint: string;
}

/** How a mode runs a request: with its key (the lifecycle), or unprotected (`missingKey: 'passthrough'`). */
export interface ModeRunner<TResult> {
  keyed(request: IdempotentRequest, idempotency: IdempotencyContext): Promise<HandledRequest<TResult>>;
  unkeyed(idempotency: IdempotencyContext): Promise<TResult>;
}

/** One request, as an adapter hands it to `guardRequest`. */
export interface GuardedRequest<TResult> {
  mode: IdempotencyMode;
  options: ResolvedOptions;
  /** The key space in the store: the tRPC path or the HTTP route's name. */
  procedure: string;
  /** The raw `Idempotency-Key` header value, or null when absent. */
  keyHeader: string | null;
  /** Refusals of the adapter's own before anything else (tRPC: a batch, a streamed response): throw them. */
  refuse?(): void;
  scope(): MaybePromise<string | null | undefined | UnstableScope>;
  /** Throws an IdempotencyError (400) for input that cannot be fingerprinted. */
  fingerprint(): MaybePromise<string>;
  run: ModeRunner<TResult>;
  onEvent?(event: IdempotencyEvent): void;
}

export type GuardOutcome<TResult> =
  /** The procedure ran (executed, released, or unprotected without a key): its own result. */
  | { kind: 'ran'; result: TResult }
  | { kind: 'replayed'; response: StoredResponse }
  /** `scope()` found no principal: nothing was claimed or run (the adapter answers 401). */
  | { kind: 'unauthenticated' };

/**
 * Runs the sequence and reports its outcome through `onEvent`. An IdempotencyError (the layer's own refusal) is
 * reported, then thrown for the adapter to answer; any other error is thrown as is. With a subscriber on
 * `idem:request` (diagnostics.ts), the request runs inside that trace.
 */
export function guardRequest<TResult>(request: GuardedRequest<TResult>): Promise<GuardOutcome<TResult>> {
  if (!requestTraceChannel.hasSubscribers) return runGuarded(request, undefined);
  const trace: IdempotencyRequestTrace = { procedure: request.procedure, mode: request.mode, keyHash: null };
  return requestTraceChannel.tracePromise(() => runGuarded(request, trace), trace);
}

async function runGuarded<TResult>(
  request: GuardedRequest<TResult>,
  trace: IdempotencyRequestTrace | undefined,
): Promise<GuardOutcome<TResult>> {
  const started = performance.now();
  let keyHash: string | null = null;
  let keyed: IdempotentRequest | undefined;
  const report = (outcome: RequestOutcome) => {
    if (trace) trace.outcome = outcome;
    request.onEvent?.({
      procedure: request.procedure,
      mode: request.mode,
      outcome,
      durationMs: performance.now() - started,
      keyHash,
    });
  };
  try {
    request.refuse?.();
    const isKeyed = request.keyHeader !== null || request.options.missingKey === 'reject';
    const key = isKeyed ? parseIdempotencyKey(request.keyHeader) : randomUUID();
    const scope = await request.scope();
    if (scope instanceof UnstableScope) throw unstableScopeError(scope.howToFix);
    if (!scope) {
      report(RequestOutcome.rejected);
      return { kind: 'unauthenticated' };
    }
    const fingerprint = await request.fingerprint();
    const idempotency = { key, keyed: isKeyed, scope, fingerprint };
    if (!isKeyed) {
      const result = await request.run.unkeyed(idempotency);
      report(RequestOutcome.unkeyed);
      return { kind: 'ran', result };
    }
    // Only hashed when someone listens: the request path pays for no work nobody reads.
    if (request.onEvent || trace) keyHash = logKeyHash(scope, key);
    if (trace) trace.keyHash = keyHash;
    keyed = { scope, procedure: request.procedure, key, fingerprint };
    const handled = await request.run.keyed(keyed, idempotency);
    if (handled.kind === 'replayed') {
      publishStep(IdempotencyStep.replayed, request.mode, keyed);
      report(RequestOutcome.replayed);
      return { kind: 'replayed', response: handled.response };
    }
    report(handled.kind === 'executed' ? RequestOutcome.executed : RequestOutcome.released);
    return { kind: 'ran', result: handled.result };
  } catch (error) {
    if (error instanceof IdempotencyError) {
      const step = keyed && stepOfError(error);
      if (keyed && step) publishStep(step, request.mode, keyed);
      report(outcomeOfError(error));
    }
    throw error;
  }
}

/** The step a refusal of a keyed request is, when it is one. */
function stepOfError(error: IdempotencyError): IdempotencyStep | undefined {
  if (error.code === IdempotencyErrorCode.inProgress) return IdempotencyStep.inFlight;
  if (error.code === IdempotencyErrorCode.leaseLost) return IdempotencyStep.leaseLost;
  if (error.code === IdempotencyErrorCode.keyReused) return IdempotencyStep.payloadMismatch;
  return undefined;
}

function outcomeOfError(error: IdempotencyError): RequestOutcome {
  if (error.httpStatus === 409) return RequestOutcome.conflict;
  if (error.httpStatus === 422) return RequestOutcome.mismatch;
  return RequestOutcome.rejected;
}

/**
 * Transactional mode's runner: the claim, the handler's writes (through `tx`) and the stored result commit in
 * one transaction. `run` calls the adapter's handler; `storedOf` says what of its result to store (null: release).
 */
export function transactionalRunner<TTx, TResult>(
  store: IdempotencyStore<TTx>,
  options: ResolvedOptions,
  run: (idempotency: IdempotencyContext, tx: TTx) => Promise<TResult>,
  storedOf: (result: TResult) => StoredResponse | null,
): ModeRunner<TResult> {
  const runInTx =
    (idempotency: IdempotencyContext) =>
    async (tx: TTx): Promise<RunOutcome<TResult>> => {
      const result = await run(idempotency, tx);
      return { result, response: storedOf(result) };
    };
  return {
    keyed: (request, idempotency) => handleTransactional(store, options, request, runInTx(idempotency)),
    unkeyed: (idempotency) => runUnkeyedTransactional(store, options, runInTx(idempotency)),
  };
}

/** External mode's runner: the claim commits first under a lease; the completion is fenced by its owner. */
export function externalRunner<TResult>(
  store: IdempotencyStore<unknown>,
  options: ResolvedOptions,
  run: (idempotency: IdempotencyContext) => Promise<TResult>,
  storedOf: (result: TResult) => StoredResponse | null,
): ModeRunner<TResult> {
  return {
    keyed: (request, idempotency) =>
      handleExternal(store, options, request, async () => {
        const result = await run(idempotency);
        return { result, response: storedOf(result) };
      }),
    unkeyed: run,
  };
}
