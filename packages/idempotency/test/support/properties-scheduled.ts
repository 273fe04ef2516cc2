/**
 * Puts a fast-check scheduler in front of every store call, so the scheduler decides the order in which the
 * statements of concurrent requests reach the store (each store call is one atomic statement).
 */
import type fc from 'fast-check';
import type { ClaimResult, IdempotencyStore } from '../../src/index.ts';

/**
 * Claims and completions with the moments they were sent (`sent`) and answered (`answered`), on one counter.
 * On a real database the order of the answers is not the order the statements ran: a statement may commit
 * first and be answered last (its thread waits for the log flush, or is descheduled). Only "answered before the
 * other was sent" is certain.
 */
export interface CallLog {
  seq: number;
  claims: Array<{ sent: number; answered: number; who: string; owner: string; result: ClaimResult }>;
  completes: Array<{ sent: number; answered: number; who: string; owner: string; stored: boolean }>;
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
      const sent = log.seq++;
      const result = await inner.claim(request, tx);
      log.claims.push({ sent, answered: log.seq++, who, owner: request.owner, result });
      return result;
    },
    async complete(key, owner, response, tx) {
      await point('complete');
      const sent = log.seq++;
      const stored = await inner.complete(key, owner, response, tx);
      log.completes.push({ sent, answered: log.seq++, who, owner, stored });
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
