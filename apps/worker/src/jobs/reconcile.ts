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
 */

import { incrementCounter, WorkerCounter } from '@idem/contracts';
import type { Database, Prisma } from '@idem/db';
import { enqueueFulfilment, type PgBoss, prismaTransactionDb, Queue } from '@idem/jobs';
import {
  answerFromCharges,
  markOrderPaid,
  markOrderPaymentFailed,
  PaymentFailureCode,
  type PaymentProvider,
  type ProviderAnswer,
  ProviderUnavailableError,
  recordPayment,
} from '@idem/payments';
import type { Logger } from '../log.ts';

export const DEFAULT_RECONCILE_CRON = '* * * * *';

export interface ReconcileOptions {
  /**
   * How old an order's last charge attempt must be before the reconciler settles it. Default 300 s: far past the
   * checkout's 10 s provider timeout and its 30 s lease, so no live request can still be charging it.
   */
  settleAfterSeconds?: number;
  /** Orders per run. Default 100. */
  batchSize?: number;
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
}

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
  const settleAfterSeconds = options.settleAfterSeconds ?? 300;
  const summary: ReconcileSummary = {
    settled: { paid: 0, payment_failed: 0, abandoned: 0 },
    skipped: 0,
    unavailable: 0,
    anomalies: 0,
  };
  const candidates = await deps.db.$queryRaw<Candidate[]>`
    select id::text, total_cents, currency from orders
     where status = 'pending'
       and coalesce(charge_attempted_at, created_at) < now() - make_interval(secs => ${settleAfterSeconds})
     order by created_at
     limit ${options.batchSize ?? 100}`;

  for (const order of candidates) {
    let answer: ProviderAnswer;
    try {
      answer = answerFromCharges(
        { totalCents: order.total_cents, currency: order.currency },
        await deps.provider.listCharges(order.id),
      );
    } catch (error) {
      if (!(error instanceof ProviderUnavailableError)) throw error;
      summary.unavailable += 1;
      deps.log.error(`reconcile ${order.id}: provider unavailable (${error.message}); next run retries`);
      continue;
    }
    if (answer.kind === 'anomaly') {
      summary.anomalies += 1;
      deps.log.error(
        `reconcile ${order.id}: ANOMALY — charge ${answer.charge.id} (${answer.charge.amount} ${answer.charge.currency}) does not match the order; left pending`,
      );
      continue;
    }
    const outcome = await settle(deps, order, answer, settleAfterSeconds);
    if (outcome === null) summary.skipped += 1;
    else {
      summary.settled[outcome] += 1;
      deps.log.info(`reconcile ${order.id}: ${outcome}`);
    }
  }
  return summary;
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

export async function scheduleReconcile(boss: PgBoss, cron: string | null): Promise<void> {
  if (cron === null) {
    await boss.unschedule(Queue.reconcile);
    return;
  }
  await boss.schedule(Queue.reconcile, cron, {}, { tz: 'UTC' });
}

export async function workReconcile(
  boss: PgBoss,
  deps: ReconcileDeps,
  options: ReconcileOptions & { pollingIntervalSeconds: number },
): Promise<void> {
  await boss.work(Queue.reconcile, { pollingIntervalSeconds: options.pollingIntervalSeconds }, () =>
    reconcilePendingOrders(deps, options),
  );
}

/** For the pg-boss enqueue inside a Prisma transaction. */
export function fulfilmentEnqueuer(boss: PgBoss) {
  return async (orderId: string, tx: Prisma.TransactionClient) => {
    await enqueueFulfilment(boss, orderId, prismaTransactionDb(tx));
  };
}
