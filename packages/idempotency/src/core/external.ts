/**
 * External mode's lifecycle: claim under a lease (committed first) → run the outside effect once → complete,
 * fenced by the lease owner → replay.
 */
import { randomUUID } from 'node:crypto';
import { IdempotencyMode, inFlightCapOf, type ResolvedOptions } from './config.ts';
import { IdempotencyStep, publishStep } from './diagnostics.ts';
import { leaseLostError } from './errors.ts';
import { type IdempotencyRecord, RecordState } from './record.ts';
import { replayFromMemory } from './replay-cache.ts';
import { countReplay } from './replay-counts.ts';
import { type HandledRequest, type IdempotentRequest, type RunOutcome, replayOf } from './request.ts';
import type { ClaimRequest, IdempotencyStore } from './store.ts';

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
  const remembered = replayFromMemory(store, options, request);
  if (remembered) return { kind: 'replayed', response: remembered };
  const owner = randomUUID();
  const claimRequest: ClaimRequest = {
    ...request,
    owner,
    leaseSeconds: options.leaseSeconds,
    retentionSeconds: options.retentionSeconds,
    inFlightCap: inFlightCapOf(options),
  };
  // The row expires one retention after the claim, which comes after this instant.
  const expiresAt = new Date(Date.now() + options.retentionSeconds * 1000);
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
      options.replayCache?.remember(request, record);
      countReplay(store, request);
      return { kind: 'replayed', response };
    }
  }
  publishStep(IdempotencyStep.claimed, IdempotencyMode.external, request, { takeover: claim.takeover });

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
    if (released) publishStep(IdempotencyStep.released, IdempotencyMode.external, request);
    throw error;
  }
  stopRenewing();
  if (outcome.response === null) {
    // A request that lost its lease while frozen (GC pause, SIGSTOP) may resume mid-procedure while the takeover
    // runs it too, and fail on the overlap. Its failure says nothing about the key: another request owns (or
    // completed) it. Answer 409 like a fenced completion, so the client retries and gets the owner's result.
    if (!(await store.release(request, owner))) throw leaseLostError(options.retryAfterSeconds);
    publishStep(IdempotencyStep.released, IdempotencyMode.external, request);
    return { kind: 'released', result: outcome.result };
  }
  // If this throws (connection lost), the outcome is unknown: the key stays claimed until its lease ends.
  const stored = await store.complete(request, owner, outcome.response);
  if (!stored) throw leaseLostError(options.retryAfterSeconds);
  options.replayCache?.rememberCommitted?.(request, outcome.response, expiresAt);
  publishStep(IdempotencyStep.stored, IdempotencyMode.external, request);
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
