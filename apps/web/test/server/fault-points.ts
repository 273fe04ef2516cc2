/**
 * Fault points for the multi-process fault suite (tests/faults): SIGKILL this very process at one of the
 * idempotency lifecycle's crash-sensitive moments. They are a decorator of the key store — the library's
 * extension point — so neither the library nor the app carries a hook for them:
 * - `after-claim`: the claim has returned (external: committed; transactional: inside the open transaction),
 *   the procedure has not run;
 * - `before-complete` (external mode): the procedure's effect is done, the completion has not been sent;
 * - `after-complete`: the result is stored (external: completed; transactional: committed), not yet answered.
 */
import { existsSync, writeFileSync } from 'node:fs';
import type { IdempotencyStore } from '@idem/idempotency';

export const FAULT_POINTS = ['after-claim', 'before-complete', 'after-complete'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface FaultPointSettings {
  point: FaultPoint;
  /** Fire once across restarts: the marker file is written just before the kill; an existing one disarms. */
  onceFile: string | null;
  /** The probability that a hit fires. */
  rate: number;
}

function killAt({ point, onceFile, rate }: FaultPointSettings): () => void {
  return () => {
    if (onceFile && existsSync(onceFile)) return;
    if (rate < 1 && Math.random() >= rate) return;
    if (onceFile) writeFileSync(onceFile, `${point} ${process.pid}\n`);
    process.kill(process.pid, 'SIGKILL');
  };
}

/** `store`, dying at `settings.point`; every other member is the store's own. */
export function withFaultPoint<TTx>(
  store: IdempotencyStore<TTx>,
  settings: FaultPointSettings,
): IdempotencyStore<TTx> {
  const fire = killAt(settings);
  switch (settings.point) {
    case 'after-claim':
      return {
        ...store,
        async claim(request, tx) {
          const claim = await store.claim(request, tx);
          // A claim that records a finished error (`response`) starts no procedure: nothing to interrupt.
          if (claim.claimed && request.response === undefined) fire();
          return claim;
        },
      };
    case 'before-complete':
      return {
        ...store,
        complete(key, owner, response, tx) {
          if (tx === undefined) fire();
          return store.complete(key, owner, response, tx);
        },
      };
    case 'after-complete': {
      // Transactional mode stores inside its transaction (the completion, or a stored error's claim): the
      // result is stored once that transaction commits.
      const storedIn = new WeakSet<object>();
      const stored = (tx: TTx | undefined) => {
        if (tx === undefined) fire();
        else if (typeof tx === 'object' && tx !== null) storedIn.add(tx);
      };
      return {
        ...store,
        async claim(request, tx) {
          const claim = await store.claim(request, tx);
          if (claim.claimed && request.response !== undefined) stored(tx);
          return claim;
        },
        async complete(key, owner, response, tx) {
          const completed = await store.complete(key, owner, response, tx);
          if (completed) stored(tx);
          return completed;
        },
        async transaction(fn, options) {
          let committedStore = false;
          const result = await store.transaction(async (tx) => {
            const value = await fn(tx);
            committedStore = typeof tx === 'object' && tx !== null && storedIn.has(tx);
            return value;
          }, options);
          if (committedStore) fire();
          return result;
        },
      };
    }
  }
}
