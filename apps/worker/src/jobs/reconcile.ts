/**
 * The payment reconciler — the completer of brandur's rocket-rides, Stripe's "drive to completion". A `pending`
 * order whose last charge attempt is older than `settleAfterSeconds` has no request left that could finish it
 * (its response was lost, the provider was down, the customer started over): ask the provider what happened and
 * settle it from that answer —
 *   charged  → paid, payment recorded, fulfilment queued (same transaction);
 *   declined → payment_failed, stock released;
 *   nothing  → payment_failed (`abandoned`), stock released. A late retry of its key then resumes this order,
 *              finds it decided and replays that answer instead of paying.
 * Each order is decided under its row lock, re-checking that it is still pending and that no attempt started
 * since it was read (checkout stamps `charge_attempted_at` before each charge), so a run never settles an order
 * whose charge may still be running. Running twice, or twice at once, gives the same result.
 *
 * A charge can still land after the order was given up: a process frozen between its stamp and its charge call
 * past the wait, or a provider that finishes a request long after the client's timeout. Each run therefore also
 * looks again at the orders it gave up recently (`lateChargeWindowSeconds`): a succeeded charge on one of them
 * is money for an order the customer was told is cancelled, so it is refunded (under a key derived from the
 * charge), counted (`late_charges_refunded`) and logged as an anomaly.
 */

import { incrementCounter, providerRefundKey, WorkerCounter } from '@idem/contracts';
import type { Database, Prisma } from '@idem/db';
import { enqueueFulfilment, findFulfilmentJobs, type PgBoss, prismaTransactionDb, Queue } from '@idem/jobs';
import {
  answerFromCharges,
  markOrderPaid,
  markOrderPaymentFailed,
  PaymentFailureCode,
  type PaymentProvider,
  type ProviderAnswer,
  ProviderUnavailableError,
  type RefundingPaymentProvider,
  recordPayment,
} from '@idem/payments';
import type { Logger } from '../log.ts';
import { forEachInKeysetPages, NIL_UUID } from './keyset-pages.ts';
import {
  type StrandedPaidDeps,
  type StrandedPaidOptions,
  type StrandedPaidSummary,
  shipStrandedPaidOrders,
} from './stranded-paid.ts';

export const DEFAULT_RECONCILE_CRON = '* * * * *';

export interface ReconcileOptions {
  /**
   * How old an order's last charge attempt must be before the reconciler settles it. Default 300 s: far past the
   * checkout's 10 s provider timeout and its 30 s lease, so no live request can still be charging it.
   */
  settleAfterSeconds?: number;
  /**
   * Pending orders settled per run; also the page size of the late-charge sweep, which visits every order in
   * its window each run. Default 100.
   */
  batchSize?: number;
  /**
   * How long an order flagged as an anomaly (a succeeded charge that does not match it) waits before the
   * reconciler asks about it again. Default 3 600 s. Until then it takes no place in a batch, so anomalies
   * waiting for a human never keep the orders behind them pending.
   */
  anomalyRecheckSeconds?: number;
  /**
   * How long after giving an order up the reconciler still looks for a charge that landed on it late. Default
   * 3 600 s: far past any charge request still in flight when the order was given up (its client timed out after
   * 10 s, the wait before giving up was 300 s).
   */
  lateChargeWindowSeconds?: number;
}

/** The options with their defaults (each documented above) in place of the ones not given. */
function reconcileSettings(options: ReconcileOptions): Required<ReconcileOptions> {
  return {
    settleAfterSeconds: options.settleAfterSeconds ?? 300,
    batchSize: options.batchSize ?? 100,
    anomalyRecheckSeconds: options.anomalyRecheckSeconds ?? 3_600,
    lateChargeWindowSeconds: options.lateChargeWindowSeconds ?? 3_600,
  };
}

export const ReconcileOutcome = {
  paid: 'paid',
  paymentFailed: 'payment_failed',
  abandoned: 'abandoned',
} as const;
export type ReconcileOutcome = (typeof ReconcileOutcome)[keyof typeof ReconcileOutcome];

export interface ReconcileSummary {
  /** Orders settled, by outcome. */
  settled: Record<ReconcileOutcome, number>;
  /** Decided or re-attempted by someone else between the read and the lock: left alone. */
  skipped: number;
  /** The provider could not answer: tried again next run. */
  unavailable: number;
  /** The provider holds a succeeded charge that does not match the order: left pending for a human. */
  anomalies: number;
  /** Failed for another reason (logged): tried again next run; the rest of the batch goes on. */
  failed: number;
}

/** What `reconciled_outcome` says of a pending order flagged for a human. */
const ANOMALY = 'anomaly';

export interface ReconcileDeps {
  db: Database;
  provider: PaymentProvider;
  /** Queues fulfilment inside the settling transaction. */
  enqueueFulfilment(orderId: string, tx: Prisma.TransactionClient): Promise<void>;
  log: Logger;
}

interface Candidate {
  id: string;
  total_cents: number;
  currency: string;
}

export async function reconcilePendingOrders(
  deps: ReconcileDeps,
  options: ReconcileOptions = {},
): Promise<ReconcileSummary> {
  const { settleAfterSeconds, anomalyRecheckSeconds, batchSize } = reconcileSettings(options);
  const summary: ReconcileSummary = {
    settled: { paid: 0, payment_failed: 0, abandoned: 0 },
    skipped: 0,
    unavailable: 0,
    anomalies: 0,
    failed: 0,
  };
  // Orders never looked at first (oldest attempt first), then anomalies due for another look.
  const candidates = await deps.db.$queryRaw<Candidate[]>`
    select id::text, total_cents, currency from orders
     where status = 'pending'
       and coalesce(charge_attempted_at, created_at) < now() - make_interval(secs => ${settleAfterSeconds})
       and (reconciled_at is null
            or reconciled_at < now() - make_interval(secs => ${anomalyRecheckSeconds}))
     order by reconciled_at nulls first, coalesce(charge_attempted_at, created_at), id
     limit ${batchSize}`;

  for (const order of candidates) {
    try {
      await reconcileOne(deps, order, settleAfterSeconds, summary);
    } catch (error) {
      if (error instanceof ProviderUnavailableError) {
        summary.unavailable += 1;
        deps.log.error(`reconcile ${order.id}: provider unavailable (${error.message}); next run retries`);
      } else {
        summary.failed += 1;
        deps.log.error(`reconcile ${order.id}: failed; next run retries`, error);
      }
    }
  }
  return summary;
}

async function reconcileOne(
  deps: ReconcileDeps,
  order: Candidate,
  settleAfterSeconds: number,
  summary: ReconcileSummary,
): Promise<void> {
  const answer = answerFromCharges(
    { totalCents: order.total_cents, currency: order.currency },
    await deps.provider.listCharges(order.id),
  );
  if (answer.kind === 'anomaly') {
    summary.anomalies += 1;
    await flagAnomaly(deps.db, order.id);
    deps.log.error(
      `reconcile ${order.id}: ANOMALY — charge ${answer.charge.id} (${answer.charge.amount} ${answer.charge.currency}) does not match the order; left pending`,
    );
    return;
  }
  const outcome = await settle(deps, order, answer, settleAfterSeconds);
  if (outcome === null) summary.skipped += 1;
  else {
    summary.settled[outcome] += 1;
    deps.log.info(`reconcile ${order.id}: ${outcome}`);
  }
}

/**
 * Marks a pending order as an anomaly for a human (the admin trail shows it) and stamps when it was looked at,
 * which sends it to the back of the queue; counted once per order (`reconcile_anomalies`), not once per look.
 */
async function flagAnomaly(db: Database, orderId: string): Promise<void> {
  await db.$transaction(async (tx) => {
    const [row] = await tx.$queryRaw<Array<{ reconciled_outcome: string | null }>>`
      select reconciled_outcome from orders where id = ${orderId}::uuid and status = 'pending' for update`;
    if (!row) return;
    await tx.$executeRaw`
      update orders set reconciled_at = now(), reconciled_outcome = ${ANOMALY} where id = ${orderId}::uuid`;
    if (row.reconciled_outcome !== ANOMALY) await incrementCounter(tx, WorkerCounter.reconcileAnomalies);
  });
}

/** Settles one order under its row lock; null when it is no longer ours to settle. */
async function settle(
  deps: ReconcileDeps,
  order: Candidate,
  answer: Exclude<ProviderAnswer, { kind: 'anomaly' }>,
  settleAfterSeconds: number,
): Promise<ReconcileOutcome | null> {
  return deps.db.$transaction(async (tx) => {
    const [still] = await tx.$queryRaw<Array<{ id: string }>>`
      select id::text from orders
       where id = ${order.id}::uuid and status = 'pending'
         and coalesce(charge_attempted_at, created_at) < now() - make_interval(secs => ${settleAfterSeconds})
       for update`;
    if (!still) return null;

    const base = { orderId: order.id, amountCents: order.total_cents, currency: order.currency };
    let outcome: ReconcileOutcome;
    switch (answer.kind) {
      case 'charged':
        await recordPayment(tx, {
          ...base,
          providerChargeId: answer.charge.id,
          status: 'succeeded',
          amountCents: answer.charge.amount,
          currency: answer.charge.currency,
        });
        await markOrderPaid(tx, order.id);
        await deps.enqueueFulfilment(order.id, tx);
        outcome = ReconcileOutcome.paid;
        break;
      case 'declined':
        await recordPayment(tx, {
          ...base,
          providerChargeId: answer.charge.id,
          status: 'failed',
          failureCode: answer.charge.failure_code ?? 'card_declined',
          failureMessage: answer.charge.failure_message ?? 'Your card was declined.',
        });
        await markOrderPaymentFailed(tx, order.id);
        outcome = ReconcileOutcome.paymentFailed;
        break;
      case 'none':
        await recordPayment(tx, {
          ...base,
          providerChargeId: null,
          status: 'failed',
          failureCode: PaymentFailureCode.abandoned,
          failureMessage: 'No charge reached the provider; the reconciler cancelled the order.',
        });
        await markOrderPaymentFailed(tx, order.id);
        outcome = ReconcileOutcome.abandoned;
        break;
    }
    await tx.$executeRaw`
      update orders set reconciled_at = now(), reconciled_outcome = ${outcome} where id = ${order.id}::uuid`;
    await incrementCounter(tx, WorkerCounter.ordersReconciled[outcome]);
    return outcome;
  });
}

export interface LateChargeDeps {
  db: Database;
  provider: RefundingPaymentProvider;
  log: Logger;
}

/** An order the reconciler gave up (`abandoned`), and when: the late-charge sweep's key. */
interface GivenUpOrder {
  id: string;
  reconciled_at: Date;
}

export interface LateChargeSummary {
  /** Given-up orders asked about. */
  checked: number;
  /** Succeeded charges found on them, and refunded. */
  refunded: number;
  /** The provider could not answer or refund (or another failure, logged): tried again next run. */
  unavailable: number;
}

/**
 * Refunds every succeeded charge that landed on an order the reconciler gave up within the window. Every such
 * order is asked about in every run, in keyset pages of `batchSize` (given up earliest first): after an outage,
 * when late charges happen, no number of newer cancellations pushes an older one out of the sweep.
 */
export async function refundLateCharges(
  deps: LateChargeDeps,
  options: ReconcileOptions = {},
): Promise<LateChargeSummary> {
  const summary: LateChargeSummary = { checked: 0, refunded: 0, unavailable: 0 };
  const { lateChargeWindowSeconds, batchSize } = reconcileSettings(options);
  // The window's start is fixed once per run, so a page boundary never moves while the run pages.
  const [{ since } = { since: new Date() }] = await deps.db.$queryRaw<Array<{ since: Date }>>`
    select now() - make_interval(secs => ${lateChargeWindowSeconds}) as since`;
  await forEachInKeysetPages({
    start: { at: since, id: NIL_UUID },
    pageSize: batchSize,
    readPage: (after) => deps.db.$queryRaw<GivenUpOrder[]>`
      select id::text, reconciled_at from orders
       where status = 'payment_failed' and reconciled_outcome = ${ReconcileOutcome.abandoned}
         and (reconciled_at, id) > (${after.at}, ${after.id}::uuid)
       order by reconciled_at, id
       limit ${batchSize}`,
    keyOf: (order) => ({ at: order.reconciled_at, id: order.id }),
    visit: ({ id }) => refundLateChargesOf(deps, id, summary),
  });
  return summary;
}

async function refundLateChargesOf(deps: LateChargeDeps, id: string, summary: LateChargeSummary) {
  summary.checked += 1;
  try {
    const late = (await deps.provider.listCharges(id)).filter(
      (charge) => charge.status === 'succeeded' && !charge.refunded,
    );
    for (const charge of late) {
      await deps.provider.refund({ chargeId: charge.id, idempotencyKey: providerRefundKey(charge.id) });
      await incrementCounter(deps.db, WorkerCounter.lateChargesRefunded);
      summary.refunded += 1;
      deps.log.error(
        `reconcile ${id}: ANOMALY — charge ${charge.id} (${charge.amount} ${charge.currency}) landed after the order was given up; refunded`,
      );
    }
  } catch (error) {
    // Any failure leaves the order for the next run and lets the rest go on.
    summary.unavailable += 1;
    deps.log.error(`reconcile ${id}: the late-charge check failed; next run retries`, error);
  }
}

/**
 * One scheduled run: settle the pending orders, refund what landed on orders given up recently, then queue
 * fulfilment for paid orders that have none.
 */
export async function runReconcile(
  deps: ReconcileDeps & LateChargeDeps & StrandedPaidDeps,
  options: ReconcileOptions & StrandedPaidOptions = {},
): Promise<{ pending: ReconcileSummary; lateCharges: LateChargeSummary; strandedPaid: StrandedPaidSummary }> {
  const pending = await reconcilePendingOrders(deps, options);
  const lateCharges = await refundLateCharges(deps, options);
  const strandedPaid = await shipStrandedPaidOrders(deps, options);
  return { pending, lateCharges, strandedPaid };
}

export async function scheduleReconcile(boss: PgBoss, cron: string | null): Promise<void> {
  if (cron === null) {
    await boss.unschedule(Queue.reconcile);
    return;
  }
  await boss.schedule(Queue.reconcile, cron, {}, { tz: 'UTC' });
}

export async function workReconcile(
  boss: PgBoss,
  deps: ReconcileDeps & LateChargeDeps & StrandedPaidDeps,
  options: ReconcileOptions & StrandedPaidOptions & { pollingIntervalSeconds: number },
): Promise<void> {
  await boss.work(Queue.reconcile, { pollingIntervalSeconds: options.pollingIntervalSeconds }, () =>
    runReconcile(deps, options),
  );
}

/** pg-boss's states of an order's fulfilment jobs, for the stranded-paid sweep. */
export function fulfilmentJobStatesOf(boss: PgBoss) {
  return async (orderId: string) => (await findFulfilmentJobs(boss, orderId)).map((job) => job.state);
}

/** For the pg-boss enqueue inside a Prisma transaction. */
export function fulfilmentEnqueuer(boss: PgBoss) {
  return async (orderId: string, tx: Prisma.TransactionClient) => {
    await enqueueFulfilment(boss, orderId, prismaTransactionDb(tx));
  };
}
