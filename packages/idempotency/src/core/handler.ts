/**
 * The lifecycle of one idempotent request, independent of any API framework: claim → run once → store →
 * replay. Adapters (./trpc) turn their framework's request into an `IdempotentRequest` and their result into
 * a `RunOutcome`.
 */
import { randomUUID } from 'node:crypto';
import { inFlightCapOf, type ResolvedOptions } from './config.ts';
import { inProgressError, keyReusedError, leaseLostError, storeUnavailableError } from './errors.ts';
import { type IdempotencyRecord, RecordState, type StoredResponse } from './record.ts';
import { countReplay } from './replay-counts.ts';
import { takeTurnInProcess } from './running-here.ts';
import type { ClaimRequest, IdempotencyStore } from './store.ts';

export interface IdempotentRequest {
  scope: string;
  procedure: string;
  key: string;
  fingerprint: string;
}

/**
 * What running the procedure produced. `response` is what to store and replay, or null when the result must
 * not be stored (a transient failure or a validation error): then the key is released and a retry runs again.
 */
export interface RunOutcome<TResult> {
  result: TResult;
  response: StoredResponse | null;
}

export type HandledRequest<TResult> =
  /** This request ran the procedure, and its response is stored. */
  | { kind: 'executed'; result: TResult }
  /** This request ran the procedure, which failed in a way that is not stored: the key was released. */
  | { kind: 'released'; result: TResult }
  /** A duplicate: the first request's stored response. */
  | { kind: 'replayed'; response: StoredResponse };

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
 *
 * When the store has `findCompleted`, that read is sent at the same time as the transaction opens, on another
 * connection: a duplicate of a finished request is answered as soon as it returns (one round trip, no
 * transaction), and a first execution waits for nothing more than before. Whichever learns the key's fate
 * first decides — the read, if it returns a completed record before the claim returns; otherwise the claim —
 * and the other one changes nothing: a transaction whose claim comes back after the read answered rolls back
 * without running the procedure, even when it did claim (an expiry in between), so no execution goes unanswered.
 */
export async function handleTransactional<TTx, TResult>(
  store: IdempotencyStore<TTx>,
  options: ResolvedOptions,
  request: IdempotentRequest,
  run: (tx: TTx) => Promise<RunOutcome<TResult>>,
): Promise<HandledRequest<TResult>> {
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
    return handleTransactional(store, { ...options, lockTimeoutMs: leftMs }, request, run);
  }
  let committed: StoredResponse | null = null;
  try {
    const handled = await handleInDatabase(store, options, request, run, (response) => {
      committed = response;
    });
    if (handled.kind === 'replayed') committed = handled.response;
    return handled;
  } finally {
    turn.settle(committed);
  }
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
  committed: (response: StoredResponse) => void,
): Promise<HandledRequest<TResult>> {
  let decidedBy: 'read' | 'claim' | undefined;
  let heldRecord: IdempotencyRecord | undefined;
  let claimFoundHeld: (record: IdempotencyRecord) => void = () => {};
  const held = new Promise<Decision<TResult>>((resolve) => {
    claimFoundHeld = (record) => {
      heldRecord = record;
      resolve({ record });
    };
  });
  const completedRead = store.findCompleted?.(request).then(
    (record): Promise<Decision<TResult>> | Decision<TResult> => {
      if (!record || decidedBy) return NO_ANSWER;
      decidedBy = 'read';
      return { record };
    },
    // A failed read decides nothing: the transaction answers.
    () => NO_ANSWER,
  );
  const transaction = runTransactional(store, options, request, run, {
    claimDecides: () => {
      if (decidedBy === 'read') return false;
      decidedBy = 'claim';
      return true;
    },
    answeredByRead: () => decidedBy === 'read',
    foundHeld: claimFoundHeld,
    committed,
  });
  // When the read or the claim has answered, what ends the transaction afterwards (even a failure) is nobody's
  // answer; until then its failure is the request's (the race below rejects with it).
  transaction.catch(() => {});
  const answer = await Promise.race([
    ...(store.answersDuplicatesAtClaim ? [held] : []),
    ...(completedRead ? [completedRead] : []),
    transaction.then((handled): Decision<TResult> => ({ handled })),
  ]);
  // The claim found the key held: its record is the answer, now or (a store that cannot answer before the
  // transaction ends) once the transaction has rolled back.
  const decided: Decision<TResult> = 'handled' in answer && heldRecord ? { record: heldRecord } : answer;
  const handled: HandledRequest<TResult> =
    'record' in decided
      ? { kind: 'replayed', response: replayOf(decided.record, request, options) }
      : decided.handled;
  if (handled.kind === 'replayed') countReplay(store, request);
  return handled;
}

/** How a transactional request learns its answer: a record someone else left, or its own transaction's end. */
type Decision<TResult> = { record: IdempotencyRecord } | { handled: HandledRequest<TResult> };

/** A completed read that found nothing to replay: it never answers, and the race waits for the others. */
const NO_ANSWER = new Promise<never>(() => {});

/** What the transaction of `handleTransactional` tells it, and asks it, on the way. */
interface TransactionSignals {
  /** Asked as soon as the claim returns: false when the completed read already answered (then rolled back). */
  claimDecides(): boolean;
  /** Asked before the claim is sent: a replay the read answered while BEGIN was on its way costs no claim. */
  answeredByRead(): boolean;
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
  { claimDecides, answeredByRead, foundHeld, committed }: TransactionSignals,
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
  };
  let stored: StoredResponse | null = null;
  let opened = false;
  try {
    const handled = await store.transaction(async (tx): Promise<HandledRequest<TResult>> => {
      opened = true;
      // The read answered while the transaction was opening: no claim to send (the claim would decide nothing).
      if (answeredByRead()) throw new RollBack(undefined, null);
      const claim = await store.claim(claimRequest, tx);
      if (!claimDecides()) throw new RollBack(undefined, null);
      if (!claim.claimed) {
        foundHeld(claim.record);
        throw new RollBack(undefined, null);
      }

      const outcome = await run(tx);
      // Not storable: roll everything back, the claim included, so the key is free for a retry.
      if (outcome.response === null) throw new RollBack(outcome.result, null);
      // A stored error keeps none of the procedure's writes: roll them back with the claim, then record the
      // error on its own (below).
      if (outcome.response.kind === 'error') throw new RollBack(outcome.result, outcome.response);
      await store.complete(request, owner, outcome.response, tx);
      stored = outcome.response;
      return { kind: 'executed', result: outcome.result };
    }, transactionOptions);
    // Committed: the transaction resolved.
    if (stored) committed(stored);
    return handled;
  } catch (error) {
    if (error instanceof RollBack) {
      if (!error.response) return { kind: 'released', result: error.result as TResult };
      const recorded = await recordStoredError<TTx, TResult>(
        store,
        options,
        claimRequest,
        error,
        transactionOptions,
      );
      if (recorded.kind === 'executed') committed(error.response);
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
 * External mode: the claim commits first under a lease; the procedure runs its outside effect (forwarding
 * the key); completion is fenced by the lease owner, so a request whose lease was taken over changes nothing.
 */
export async function handleExternal<TResult>(
  store: IdempotencyStore<unknown>,
  options: ResolvedOptions,
  request: IdempotentRequest,
  run: () => Promise<RunOutcome<TResult>>,
): Promise<HandledRequest<TResult>> {
  const owner = randomUUID();
  const claimRequest: ClaimRequest = {
    ...request,
    owner,
    leaseSeconds: options.leaseSeconds,
    retentionSeconds: options.retentionSeconds,
    inFlightCap: inFlightCapOf(options),
  };
  let claim = await store.claim(claimRequest);
  if (!claim.claimed) {
    let record = await waitWhileInFlight(store, request, claim.record, options);
    // The owner's lease ended while we waited (it died): take the key over now, as a retry would.
    if (isDeadLeaseOfSameRequest(record, request)) {
      claim = await store.claim(claimRequest);
      if (!claim.claimed) record = claim.record;
    }
    if (!claim.claimed) {
      const response = replayOf(record, request, options);
      countReplay(store, request);
      return { kind: 'replayed', response };
    }
  }

  let outcome: RunOutcome<TResult>;
  // The owner renews its lease while the procedure runs, so a live owner slower than its lease is never taken
  // over mid-run; only a dead or frozen owner loses it, and completion stays fenced for that case.
  const stopRenewing = renewLeaseWhileRunning(store, request, owner, options.leaseSeconds);
  try {
    outcome = await run();
  } catch (error) {
    stopRenewing();
    // The adapter turns expected failures into outcomes; anything thrown here is unexpected but did not
    // complete, and every outside effect carries the key: a retry is safe.
    const released = await store.release(request, owner).catch(() => null);
    if (released === false) throw leaseLostError(options.retryAfterSeconds);
    throw error;
  }
  stopRenewing();
  if (outcome.response === null) {
    // A request that lost its lease while frozen (GC pause, SIGSTOP) may resume mid-procedure while the takeover
    // runs it too, and fail on the overlap. Its failure says nothing about the key: another request owns (or
    // completed) it. Answer 409 like a fenced completion, so the client retries and gets the owner's result.
    if (!(await store.release(request, owner))) throw leaseLostError(options.retryAfterSeconds);
    return { kind: 'released', result: outcome.result };
  }
  // If this throws (connection lost), the outcome is unknown: the key stays claimed until its lease ends.
  const stored = await store.complete(request, owner, outcome.response);
  if (!stored) throw leaseLostError(options.retryAfterSeconds);
  return { kind: 'executed', result: outcome.result };
}

/**
 * Renews the lease every third of it while the procedure runs (when the store can), so that a slow but live
 * owner keeps its key. Best effort: a failed renewal only means the lease may end, which fencing covers.
 */
function renewLeaseWhileRunning(
  store: IdempotencyStore<unknown>,
  request: IdempotentRequest,
  owner: string,
  leaseSeconds: number,
): () => void {
  const renew = store.renewLease?.bind(store);
  if (!renew) return () => {};
  const timer = setInterval(
    () => {
      renew(request, owner, leaseSeconds)
        .then((held) => {
          // Taken over: no renewal can win the key back, so stop trying.
          if (!held) clearInterval(timer);
        })
        .catch(() => {});
    },
    Math.max(100, (leaseSeconds * 1000) / 3),
  );
  timer.unref?.();
  return () => clearInterval(timer);
}

/** The response a duplicate gets, or the 422 / 409 that explains why it gets none. */
function replayOf(
  record: IdempotencyRecord,
  request: IdempotentRequest,
  options: ResolvedOptions,
): StoredResponse {
  if (record.fingerprint !== request.fingerprint) throw keyReusedError();
  if (record.state === RecordState.completed && record.response) return record.response;
  throw inProgressError(options.retryAfterSeconds);
}

/** A key still `processing` for this same request whose owner's lease has ended: a retry may take it over. */
function isDeadLeaseOfSameRequest(record: IdempotencyRecord, request: IdempotentRequest): boolean {
  return (
    record.state === RecordState.processing &&
    !record.leaseActive &&
    record.fingerprint === request.fingerprint
  );
}

/**
 * Polls (bounded by `waitForInFlightMs`) while the key is in flight for this same request under a live lease.
 * Returns as soon as the key is completed, released, reused by another request, or its lease has ended.
 */
async function waitWhileInFlight(
  store: IdempotencyStore<unknown>,
  request: IdempotentRequest,
  record: IdempotencyRecord,
  options: ResolvedOptions,
): Promise<IdempotencyRecord> {
  let current = record;
  const deadline = Date.now() + options.waitForInFlightMs;
  let pauseMs = 25;
  while (
    current.state === RecordState.processing &&
    current.leaseActive &&
    current.fingerprint === request.fingerprint &&
    Date.now() < deadline
  ) {
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    pauseMs = Math.min(pauseMs * 2, 250);
    const next = await store.find(request);
    if (!next) break; // released: the caller answers 409 and its retry runs the procedure
    current = next;
  }
  return current;
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
