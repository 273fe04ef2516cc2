/**
 * Transactional requests this process is running, per store and key. A duplicate that arrives while the first
 * one runs here waits for the first one's answer in memory, instead of on the key's uncommitted row — where it
 * would hold a pool connection until the first commits, so that a burst of duplicates of one key (a retry
 * storm, a double-click storm) could take every connection of the pool and stall the process's other
 * requests. Nothing here decides who runs the procedure: a duplicate is answered from here only with a response
 * the first one has committed (its own, or the one it replayed); when the first commits none (it failed, was
 * released or refused), the duplicate goes to the database like any request, and the unique index decides.
 */

import { mapPerStore } from './per-store.ts';
import { recordKeyId, type StoredResponse } from './record.ts';
import type { IdempotentRequest } from './request.ts';

interface Running {
  fingerprint: string;
  answer: Promise<StoredResponse | null>;
}

export type InProcessTurn =
  /** The first of its key here: run it, then `settle` with the response it committed, or null. */
  | { first: true; settle(response: StoredResponse | null): void }
  /** The same request is running here: `answer` is the response it commits, or null when it commits none. */
  | { first: false; answer: Promise<StoredResponse | null> };

const runningIn = mapPerStore<Running>();

/**
 * Registers `request` as running here, or, when the same request (same key AND fingerprint) already is, the
 * answer to wait for. Synchronous, so that duplicates arriving in the same tick meet. A request with the same
 * key and another payload is not a duplicate of the running one: it goes to the database, which answers 422
 * once the first commits.
 */
export function takeTurnInProcess(store: object, request: IdempotentRequest): InProcessTurn {
  const running = runningIn(store);
  const id = recordKeyId(request);
  const current = running.get(id);
  if (current) {
    if (current.fingerprint === request.fingerprint) return { first: false, answer: current.answer };
    // Another payload under a running key: to the database, without taking the running one's place.
    return { first: true, settle: () => {} };
  }
  let resolve: (response: StoredResponse | null) => void = () => {};
  const answer = new Promise<StoredResponse | null>((settle) => {
    resolve = settle;
  });
  const own: Running = { fingerprint: request.fingerprint, answer };
  running.set(id, own);
  const table = running;
  return {
    first: true,
    settle(response) {
      if (table.get(id) === own) table.delete(id);
      resolve(response);
    },
  };
}
