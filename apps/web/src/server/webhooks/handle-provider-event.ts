/**
 * Applies one provider event exactly once. The event id is claimed in `processed_events` (its primary key) in
 * the SAME transaction as the effect: a redelivery, however concurrent, finds the row and changes nothing —
 * or waits on the first delivery's uncommitted row and then finds it.
 *
 * A charge event moves an order only if the charge is the order's: its amount and currency, and the charge
 * already recorded for the order if there is one. A charge of 1 cent that names someone's order (created with a
 * leaked API key, or forged) or a second charge for a paid order is an anomaly — counted, logged, and the order
 * left untouched.
 */

import { incrementCounter, PersistedCounter } from '@idem/contracts';
import type { Database, OrderStatus, Prisma } from '@idem/db';
import {
  markOrderPaid,
  markOrderPaymentFailed,
  markOrderRefunded,
  markPendingOrderRefunded,
  recordPayment,
} from '@idem/payments';
import { z } from 'zod';
import { logger } from '../observability/log.ts';
import type { ProviderEvent } from './provider-event.ts';

/** What a charge must agree on with the order it names. */
export interface OrderTerms {
  totalCents: number;
  currency: string;
  /** The provider charge already recorded for the order (pay call or an earlier event), if any. */
  chargeId: string | null;
  status: OrderStatus;
}
export interface ChargeTerms {
  id: string;
  amount: number;
  currency: string;
  status: 'succeeded' | 'failed';
}
export type ChargeMismatch = 'amount_mismatch' | 'currency_mismatch' | 'other_charge' | 'paid_after_cancel';

/** Why the charge is not the order's payment, or null when it is (its amount, currency and recorded charge). */
export function compareChargeWithOrder(order: OrderTerms, charge: ChargeTerms): ChargeMismatch | null {
  // Char(3) in the database; the provider sends lowercase ISO codes.
  if (charge.currency.toLowerCase() !== order.currency.trim().toLowerCase()) return 'currency_mismatch';
  if (charge.amount !== order.totalCents) return 'amount_mismatch';
  // A second charge for one order (its refund must not refund the order; its success is money to give back).
  if (order.chargeId !== null && order.chargeId !== charge.id) return 'other_charge';
  // Money taken for an order already given up (stock released): never a reason to ship; the reconciler's
  // late-charge sweep refunds it, and this makes it visible at once.
  if (charge.status === 'succeeded' && order.status === 'payment_failed') return 'paid_after_cancel';
  return null;
}

export interface WebhookDeps {
  db: Database;
  /** Enqueues the fulfilment job inside `tx`, so it exists if and only if the transaction commits. */
  enqueueFulfilment(orderId: string, tx: Prisma.TransactionClient): Promise<void>;
  /**
   * Claims the event's id inside `tx`: true for its first delivery, false for a redelivery.
   * `claimProcessedEvent` unless a test supplies another.
   */
  claimEvent?: (tx: Prisma.TransactionClient, event: ProviderEvent) => Promise<boolean>;
  /** How a charge is checked against its order; `compareChargeWithOrder` unless a test supplies another. */
  compareCharge?: (order: OrderTerms, charge: ChargeTerms) => ChargeMismatch | null;
}

export type WebhookOutcome =
  | { duplicate: true }
  | {
      duplicate: false;
      effect: 'payment_failed' | 'refunded' | 'fulfilment_queued' | 'no_change' | 'ignored' | 'anomaly';
    };

const CHARGE_EVENTS = new Set(['charge.succeeded', 'charge.failed', 'charge.refunded']);

const orderIdSchema = z.uuid();

export async function handleProviderEvent(deps: WebhookDeps, event: ProviderEvent): Promise<WebhookOutcome> {
  return deps.db.$transaction(async (tx) => {
    if (!(await (deps.claimEvent ?? claimProcessedEvent)(tx, event))) {
      // Counted in the same transaction, for /api/metrics across every web process.
      await incrementCounter(tx, { name: PersistedCounter.webhookDuplicatesDropped, label: 'provider' });
      return { duplicate: true } as const;
    }
    return { duplicate: false, effect: await applyEvent(deps, tx, event) } as const;
  });
}

/** Claims the event id in `processed_events` (its primary key); false when a delivery already claimed it. */
export async function claimProcessedEvent(
  tx: Prisma.TransactionClient,
  event: ProviderEvent,
): Promise<boolean> {
  const claimed = await tx.$queryRaw<Array<{ id: string }>>`
    insert into processed_events (id, source, type) values (${event.id}, 'provider', ${event.type})
    on conflict (id) do nothing returning id`;
  return claimed.length > 0;
}

async function applyEvent(
  deps: WebhookDeps,
  tx: Prisma.TransactionClient,
  event: ProviderEvent,
): Promise<Extract<WebhookOutcome, { duplicate: false }>['effect']> {
  const charge = event.data.object;
  if (!CHARGE_EVENTS.has(event.type)) return 'ignored';
  const orderId = orderIdSchema.safeParse(charge.order);
  if (!orderId.success) return 'ignored'; // not one of our orders
  const found = await tx.order.findUnique({
    where: { id: orderId.data },
    select: {
      id: true,
      status: true,
      totalCents: true,
      currency: true,
      payment: { select: { providerChargeId: true } },
    },
  });
  if (!found) return 'ignored';
  const order = { ...found, chargeId: found.payment?.providerChargeId ?? null };

  const mismatch = (deps.compareCharge ?? compareChargeWithOrder)(order, charge);
  if (mismatch) {
    // Counted in this transaction (once per event id, like the effect it replaces) for every web process.
    await incrementCounter(tx, { name: PersistedCounter.webhookChargeAnomalies, label: mismatch });
    logger.warn(
      {
        event_id: event.id,
        event_type: event.type,
        order_id: order.id,
        charge_id: charge.id,
        reason: mismatch,
        order_amount: order.totalCents,
        order_currency: order.currency,
        order_charge_id: order.chargeId,
        charge_amount: charge.amount,
        charge_currency: charge.currency,
      },
      'webhook charge does not match its order; order left untouched',
    );
    return 'anomaly';
  }

  switch (event.type) {
    case 'charge.succeeded': {
      await recordSucceededPayment(tx, order.id, charge);
      // pending → paid writes its fulfilment job in the same transaction, whoever makes it (this webhook, the
      // checkout request, the reconciler): an order the request already paid has its job, and a cancelled or
      // refunded one gets none.
      if (!(await markOrderPaid(tx, order.id))) return 'no_change';
      await deps.enqueueFulfilment(order.id, tx);
      return 'fulfilment_queued';
    }
    case 'charge.failed': {
      await recordPayment(tx, {
        orderId: order.id,
        providerChargeId: charge.id,
        status: 'failed',
        amountCents: charge.amount,
        currency: charge.currency,
        failureCode: 'card_declined',
      });
      return (await markOrderPaymentFailed(tx, order.id)) ? 'payment_failed' : 'no_change';
    }
    case 'charge.refunded': {
      if (order.status !== 'pending')
        return (await markOrderRefunded(tx, order.id)) ? 'refunded' : 'no_change';
      // Refunded before the order was marked paid: the charge did succeed (recorded as its payment, so a late
      // charge.succeeded or the request's own answer finds it), and the money is back, so the order ends
      // refunded, its stock released; nothing pays or ships it afterwards.
      await recordSucceededPayment(tx, order.id, charge);
      return (await markPendingOrderRefunded(tx, order.id)) ? 'refunded' : 'no_change';
    }
    default:
      return 'ignored';
  }
}

/** The charge as the order's payment, succeeded: what a charge.succeeded, or a refund of a pending order, records. */
function recordSucceededPayment(
  tx: Prisma.TransactionClient,
  orderId: string,
  charge: Pick<ChargeTerms, 'id' | 'amount' | 'currency'>,
) {
  return recordPayment(tx, {
    orderId,
    providerChargeId: charge.id,
    status: 'succeeded',
    amountCents: charge.amount,
    currency: charge.currency,
  });
}
