/**
 * Puts a fast-check scheduler in front of every store call, so the scheduler decides the order in which the
 * statements of concurrent requests reach the store (each store call is one atomic statement).
 */
import type fc from 'fast-check';
import type { ClaimResult, IdempotencyStore } from '../../src/index.ts';

/** Claims and completions in the order the store executed them (`seq`). */
export interface CallLog {
  seq: number;
  claims: Array<{ seq: number; who: string; owner: string; result: ClaimResult }>;
  completes: Array<{ seq: number; who: string; owner: string; stored: boolean }>;
}

export function newCallLog(): CallLog {
  return { seq: 0, claims: [], completes: [] };
}

/** `inner`, with a scheduling point before each call (and before each transaction's commit). */
export function scheduledStore<TTx>(
  inner: IdempotencyStore<TTx>,
  s: fc.Scheduler,
  who: string,
  log: CallLog,
): IdempotencyStore<TTx> {
  const point = (what: string) => s.schedule(Promise.resolve(what), `${who} ${what}`);
  return {
    async claim(request, tx) {
      await point('claim');
      const result = await inner.claim(request, tx);
      log.claims.push({ seq: log.seq++, who, owner: request.owner, result });
      return result;
    },
    async complete(key, owner, response, tx) {
      await point('complete');
      const stored = await inner.complete(key, owner, response, tx);
      log.completes.push({ seq: log.seq++, who, owner, stored });
      return stored;
    },
    async release(key, owner) {
      await point('release');
      return inner.release(key, owner);
    },
    async find(key) {
      await point('find');
      return inner.find(key);
    },
    async countReplay(key, replays) {
      await point('countReplay');
      return inner.countReplay(key, replays);
    },
    async transaction(fn, options) {
      await point('begin');
      return inner.transaction(async (tx) => {
        const result = await fn(tx);
        await point('commit');
        return result;
      }, options);
    },
    isLockTimeout: (error) => inner.isLockTimeout(error),
    async deleteExpiredBatch(batchSize) {
      await point('deleteExpiredBatch');
      return inner.deleteExpiredBatch(batchSize);
    },
  };
}
