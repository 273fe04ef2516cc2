/**
 * The shipping half of convergence: every paid order ships, whoever forgot to say so. A `paid` order normally
 * gets its fulfilment job from the transaction that made it paid (the provider's `charge.succeeded` webhook, or
 * the reconciler). Two ways it gets none, or loses it:
 *   - the provider gives its webhook up (receiver down, 5xx, a signature out of tolerance: ~2 min of attempts)
 *     and the checkout request itself settled the order `paid`, which queues nothing;
 *   - its fulfilment job ran out of retries (`failed`), or was deleted.
 * A paid order whose payment is older than `shipAfterSeconds` and that has no live fulfilment job (created,
 * retry or active) gets one queued, under the order's row lock (re-checked: still `paid`, still no job). The
 * fulfilment job is idempotent per order, so queuing one too many costs a no-op delivery, never a second parcel.
 *
 * Every such order is visited in every run: keyset pages over the order id (`batchSize` per page), so no LIMIT
 * leaves the oldest behind, however many there are.
 */
import { incrementCounter, WorkerCounter } from '@idem/contracts';
import type { Database, Prisma } from '@idem/db';
import type { Logger } from '../log.ts';
import { forEachInKeysetPages, NIL_UUID } from './keyset-pages.ts';

export interface StrandedPaidOptions {
  /**
   * How long after its payment a paid order may go without shipping before it gets a fulfilment job of its own.
   * Default 300 s: past the provider's ~2 min of webhook attempts and a fulfilment job's first retries.
   */
  shipAfterSeconds?: number;
  /** Orders per page. Default 100. */
  batchSize?: number;
}

/** A fulfilment job that may still run: pg-boss's states before completion or final failure. */
const LIVE_JOB_STATES = new Set(['created', 'retry', 'active']);

export interface StrandedPaidDeps {
  db: Database;
  /** pg-boss states of the order's fulfilment jobs (findFulfilmentJobs). */
  fulfilmentJobStates(orderId: string): Promise<string[]>;
  /** Queues fulfilment inside the given transaction. */
  enqueueFulfilment(orderId: string, tx: Prisma.TransactionClient): Promise<void>;
  log: Logger;
}

export interface StrandedPaidSummary {
  /** Paid orders older than the wait that have not shipped, looked at. */
  checked: number;
  /** Of them, given a fulfilment job. */
  requeued: number;
  /** Failed (logged): tried again next run; the rest go on. */
  failed: number;
}

export async function shipStrandedPaidOrders(
  deps: StrandedPaidDeps,
  options: StrandedPaidOptions = {},
): Promise<StrandedPaidSummary> {
  const shipAfterSeconds = options.shipAfterSeconds ?? 300;
  const batchSize = options.batchSize ?? 100;
  const summary: StrandedPaidSummary = { checked: 0, requeued: 0, failed: 0 };
  await forEachInKeysetPages({
    start: NIL_UUID,
    pageSize: batchSize,
    readPage: (after) => deps.db.$queryRaw<Array<{ id: string }>>`
      select o.id::text from orders o
        join payments p on p.order_id = o.id and p.status = 'succeeded'
       where o.status = 'paid' and o.id > ${after}::uuid
         and p.created_at < now() - make_interval(secs => ${shipAfterSeconds})
       order by o.id
       limit ${batchSize}`,
    keyOf: (order) => order.id,
    visit: async ({ id }) => {
      summary.checked += 1;
      try {
        if (await requeueIfStranded(deps, id)) {
          summary.requeued += 1;
          deps.log.error(
            `ship ${id}: paid ${shipAfterSeconds} s ago with no live fulfilment job; queued one`,
          );
        }
      } catch (error) {
        summary.failed += 1;
        deps.log.error(`ship ${id}: could not queue its fulfilment; next run retries`, error);
      }
    },
  });
  return summary;
}

async function requeueIfStranded(deps: StrandedPaidDeps, orderId: string): Promise<boolean> {
  return deps.db.$transaction(async (tx) => {
    // The row lock orders this against the webhook's and the reconciler's transitions of the same order.
    const [still] = await tx.$queryRaw<Array<{ id: string }>>`
      select id::text from orders where id = ${orderId}::uuid and status = 'paid' for update`;
    if (!still) return false;
    const states = await deps.fulfilmentJobStates(orderId);
    if (states.some((state) => LIVE_JOB_STATES.has(state))) return false;
    await deps.enqueueFulfilment(orderId, tx);
    await incrementCounter(tx, WorkerCounter.strandedPaidRequeued);
    return true;
  });
}
