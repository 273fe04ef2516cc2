/**
 * Transactional mode's lifecycle: claim → run once → store, in the procedure's own transaction → replay.
 */
import { randomUUID } from 'node:crypto';
import { IdempotencyMode, inFlightCapOf, type ResolvedOptions } from './config.ts';
import { IdempotencyStep, publishStep } from './diagnostics.ts';
import { inProgressError, storeUnavailableError, TransactionLostError } from './errors.ts';
import type { IdempotencyRecord, StoredResponse } from './record.ts';
import { replayFromMemory } from './replay-cache.ts';
import { countReplay } from './replay-counts.ts';
import { type HandledRequest, type IdempotentRequest, type RunOutcome, replayOf } from './request.ts';
import { takeTurnInProcess } from './running-here.ts';
import type { ClaimRequest, IdempotencyStore } from './store.ts';

/**
 * Transactional mode: the claim, the procedure's writes and the response commit together, or not at all.
 * Round trips added to the procedure's own transaction: the claim (which also sets the lock timeout, and which
 * returns the live record for a duplicate) and the completion — no SAVEPOINT, no SET LOCAL.
 *
 * A duplicate of a request this process is running waits for that request's answer in memory, holding no
 * connection (running-here.ts); it is answered from there only with a response the first one committed.
 *
 * On a store with `answersDuplicatesAtClaim`, a duplicate is answered as soon as its claim returns: the claim
 * found the key held and wrote nothing, and the record it read is committed — so the transaction's end (a
 * ROLLBACK of nothing) is left to finish on its own instead of costing the duplicate another round trip.
 */
export async function handleTransactional<TTx, TResult>(
  store: IdempotencyStore<TTx>,
  options: ResolvedOptions,
  request: IdempotentRequest,
  run: (tx: TTx) => Promise<RunOutcome<TResult>>,
  known: KnownResponse = {},
): Promise<HandledRequest<TResult>> {
  const remembered = replayFromMemory(store, options, request);
  if (remembered) return { kind: 'replayed', response: remembered };
  const turn = takeTurnInProcess(store, request);
  if (!turn.first) {
    // The same request is running in this process: wait for its answer here, holding no connection, as long
    // as a duplicate may wait on the key's row lock.
    const waitedFrom = performance.now();
    const response = await valueWithin(turn.answer, options.lockTimeoutMs);
    if (response === TIMED_OUT) throw inProgressError(options.retryAfterSeconds);
    if (response) {
      countReplay(store, request);
      // A copy as the store keeps it (JSON text): what every later replay of the key gets, and this request's own.
      return { kind: 'replayed', response: JSON.parse(JSON.stringify(response)) as StoredResponse };
    }
    // It committed nothing: this request goes on as if it had arrived alone, with what is left of its wait
    // (the first may have spent it on a lock held elsewhere; a duplicate waits once, not twice).
    const leftMs = options.lockTimeoutMs - (performance.now() - waitedFrom);
    if (leftMs < 1) throw inProgressError(options.retryAfterSeconds);
    return handleTransactional(store, { ...options, lockTimeoutMs: leftMs }, request, run, known);
  }
  let committed: StoredResponse | null = null;
  // The row this request may write expires one retention after its claim, which comes after this instant.
  const expiresAt = new Date(Date.now() + options.retentionSeconds * 1000);
  try {
    const handled = await handleInDatabase(store, options, request, run, known, (response) => {
      committed = response;
      options.replayCache?.rememberCommitted?.(request, response, expiresAt);
    });
    if (handled.kind === 'replayed') committed = handled.response;
    return handled;
  } finally {
    turn.settle(committed);
  }
}

/**
 * A response known before the run (a queue consumer's "handled": nothing to replay but the fact). The claim then
 * writes the key completed with it, and a run that succeeds commits with no completion statement — one round trip
 * fewer. Safe only here: in transactional mode nobody else sees the row before COMMIT, so "completed" is never
 * visible for a run that rolls back. The run's own response must be this one or null (roll back).
 */
export interface KnownResponse {
  responseBeforeRun?: StoredResponse;
}

const TIMED_OUT = Symbol('timed out');

/** `promise`'s value, or TIMED_OUT once `ms` have passed first. */
async function valueWithin<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `handleTransactional` in the database: the claim decides. `committed(response)` is told the response this
 * request committed as the key's (its own result, or the business error it recorded) once it has.
 */
async function handleInDatabase<TTx, TResult>(
  store: IdempotencyStore<TTx>,
  options: ResolvedOptions,
  request: IdempotentRequest,
  run: (tx: TTx) => Promise<RunOutcome<TResult>>,
  known: KnownResponse,
  committed: (response: StoredResponse) => void,
): Promise<HandledRequest<TResult>> {
  let heldRecord: IdempotencyRecord | undefined;
  let claimFoundHeld: (record: IdempotencyRecord) => void = () => {};
  const held = new Promise<Decision<TResult>>((resolve) => {
    claimFoundHeld = (record) => {
      heldRecord = record;
      resolve({ record });
    };
  });
  const transaction = runTransactional(store, options, request, run, known, {
    foundHeld: claimFoundHeld,
    committed,
  });
  // Once the claim has answered, what ends the transaction afterwards (even a failure) is nobody's answer;
  // until then its failure is the request's (the race below rejects with it).
  transaction.catch(() => {});
  const answer = await Promise.race([
    ...(store.answersDuplicatesAtClaim ? [held] : []),
    transaction.then((handled): Decision<TResult> => ({ handled })),
  ]);
  // The claim found the key held: its record is the answer, now or (a store that cannot answer before the
  // transaction ends) once the transaction has rolled back.
  const decided: Decision<TResult> = 'handled' in answer && heldRecord ? { record: heldRecord } : answer;
  let handled: HandledRequest<TResult>;
  if ('record' in decided) {
    handled = { kind: 'replayed', response: replayOf(decided.record, request, options) };
    options.replayCache?.remember(request, decided.record);
  } else handled = decided.handled;
  if (handled.kind === 'replayed') countReplay(store, request);
  return handled;
}

/** How a transactional request learns its answer: a record someone else left, or its own transaction's end. */
type Decision<TResult> = { record: IdempotencyRecord } | { handled: HandledRequest<TResult> };

/** What the transaction of `handleTransactional` tells it on the way. */
interface TransactionSignals {
  /** The claim found the key held: that record is the answer; the transaction, which wrote nothing, just ends. */
  foundHeld(record: IdempotencyRecord): void;
  /** The response this request committed as the key's, once it has. */
  committed(response: StoredResponse): void;
}

/** The transaction of `handleTransactional`. */
async function runTransactional<TTx, TResult>(
  store: IdempotencyStore<TTx>,
  options: ResolvedOptions,
  request: IdempotentRequest,
  run: (tx: TTx) => Promise<RunOutcome<TResult>>,
  { responseBeforeRun }: KnownResponse,
  { foundHeld, committed }: TransactionSignals,
): Promise<HandledRequest<TResult>> {
  const owner = randomUUID();
  const transactionOptions = {
    lockTimeoutMs: options.lockTimeoutMs,
    timeoutMs: options.transactionTimeoutMs,
  };
  const claimRequest = {
    ...request,
    owner,
    leaseSeconds: Math.ceil(options.transactionTimeoutMs / 1000),
    retentionSeconds: options.retentionSeconds,
    inFlightCap: inFlightCapOf(options),
    response: responseBeforeRun,
  };
  let stored: StoredResponse | null = null;
  let opened = false;
  let claimed = false;
  try {
    const handled = await store.transaction(async (tx): Promise<HandledRequest<TResult>> => {
      opened = true;
      const claim = await store.claim(claimRequest, tx);
      if (!claim.claimed) {
        foundHeld(claim.record);
        throw new RollBack(undefined, null);
      }
      claimed = true;
      publishStep(IdempotencyStep.claimed, IdempotencyMode.transactional, request, {
        takeover: claim.takeover,
      });

      const outcome = await run(tx);
      // Not storable: roll everything back, the claim included, so the key is free for a retry.
      if (outcome.response === null) throw new RollBack(outcome.result, null);
      // A stored error keeps none of the procedure's writes: roll them back with the claim, then record the
      // error on its own (below).
      // The claim wrote the known response: a run that answers anything else is a caller's bug, refused whole.
      if (responseBeforeRun && outcome.response !== responseBeforeRun)
        throw new Error('handleTransactional: a run with responseBeforeRun must answer it or null');
      if (outcome.response.kind === 'error') throw new RollBack(outcome.result, outcome.response);
      // The claim wrote the response, so no completion follows the run: a statement of the run that failed with
      // its error caught may have left the transaction unable to commit (Postgres then answers the COMMIT with a
      // silent ROLLBACK): the store checks it first, where its COMMIT would not say.
      if (responseBeforeRun) await store.checkTransaction?.(tx);
      else if (!(await store.complete(request, owner, outcome.response, tx)))
        throw new TransactionLostError();
      stored = outcome.response;
      return { kind: 'executed', result: outcome.result };
    }, transactionOptions);
    // Committed: the transaction resolved.
    if (stored) {
      committed(stored);
      publishStep(IdempotencyStep.stored, IdempotencyMode.transactional, request);
    }
    return handled;
  } catch (error) {
    if (error instanceof RollBack) {
      if (!error.response) {
        if (claimed) publishStep(IdempotencyStep.released, IdempotencyMode.transactional, request);
        return { kind: 'released', result: error.result as TResult };
      }
      const recorded = await recordStoredError<TTx, TResult>(
        store,
        options,
        claimRequest,
        error,
        transactionOptions,
      );
      if (recorded.kind === 'executed') {
        committed(error.response);
        publishStep(IdempotencyStep.stored, IdempotencyMode.transactional, request);
      }
      return recorded;
    }
    // The first request's transaction held the key longer than we may wait.
    if (store.isLockTimeout(error)) throw inProgressError(options.retryAfterSeconds);
    // The transaction never opened (no pooled connection within the wait, the database unreachable): nothing
    // was claimed or run, so the honest answer is "busy, retry with the same key", not a 500.
    if (!opened) throw storeUnavailableError(options.retryAfterSeconds, error);
    throw error;
  }
}

/**
 * A request without a key that `missingKey: 'passthrough'` lets through, in transactional mode: the procedure
 * runs once in a transaction of its own (it writes through `tx` as usual), unprotected — nothing is claimed or
 * stored, so a retry runs it again. A result that is not a success rolls its writes back, as with a key.
 */
export async function runUnkeyedTransactional<TTx, TResult>(
  store: IdempotencyStore<TTx>,
  options: ResolvedOptions,
  run: (tx: TTx) => Promise<RunOutcome<TResult>>,
): Promise<TResult> {
  try {
    return await store.transaction(
      async (tx) => {
        const outcome = await run(tx);
        if (outcome.response === null || outcome.response.kind === 'error')
          throw new RollBack(outcome.result, null);
        return outcome.result;
      },
      { lockTimeoutMs: options.lockTimeoutMs, timeoutMs: options.transactionTimeoutMs },
    );
  } catch (error) {
    if (error instanceof RollBack) return error.result as TResult;
    throw error;
  }
}

/**
 * Records a business error after its transaction rolled back (one short transaction, one statement). Cheaper
 * than a SAVEPOINT on every request, at one cost: between the rollback and this insert, a duplicate that was
 * waiting on the key may claim it and run the procedure itself. Then the key holds THAT run's result and this
 * caller gets it too (a replay, or 409 while it runs), so every caller still sees the one committed outcome.
 */
async function recordStoredError<TTx, TResult>(
  store: IdempotencyStore<TTx>,
  options: ResolvedOptions,
  claimRequest: ClaimRequest,
  rollBack: RollBack,
  transactionOptions: { lockTimeoutMs: number; timeoutMs: number },
): Promise<HandledRequest<TResult>> {
  // This request already passed the in-flight cap when it claimed the key; recording its decided outcome is
  // not a new key in flight, so the cap does not apply (it would answer 429 and store nothing).
  const recordRequest: ClaimRequest = {
    ...claimRequest,
    inFlightCap: undefined,
    response: rollBack.response ?? undefined,
  };
  try {
    const claim = await store.transaction((tx) => store.claim(recordRequest, tx), transactionOptions);
    if (claim.claimed) return { kind: 'executed', result: rollBack.result as TResult };
    return { kind: 'replayed', response: replayOf(claim.record, claimRequest, options) };
  } catch (error) {
    if (store.isLockTimeout(error)) throw inProgressError(options.retryAfterSeconds);
    throw error;
  }
}

/**
 * Carries a result out of the transaction callback so the transaction rolls back: a result that is not stored
 * (`response` null: the key is released with it), or a business error to record once its writes are gone.
 */
class RollBack {
  constructor(
    readonly result: unknown,
    readonly response: StoredResponse | null,
  ) {}
}
