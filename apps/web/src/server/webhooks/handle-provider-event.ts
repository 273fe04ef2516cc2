/**
 * Applies one provider event exactly once. The event id is claimed in `processed_events` (its primary key) in
 * the SAME transaction as the effect: a redelivery, however concurrent, finds the row and changes nothing —
 * or waits on the first delivery's uncommitted row and then finds it.
 */
import type { Database, Prisma } from '@idem/db';
import { markOrderPaid, markOrderPaymentFailed, markOrderRefunded, recordPayment } from '@idem/payments';
import { z } from 'zod';
import { PersistedCounter } from '../observability/persisted-counters.ts';
import { testHooks } from '../test-hooks.ts';
import type { ProviderEvent } from './provider-event.ts';

export interface WebhookDeps {
  db: Database;
  /** Enqueues the fulfilment job inside `tx`, so it exists if and only if the transaction commits. */
  enqueueFulfilment(orderId: string, tx: Prisma.TransactionClient): Promise<void>;
}

export type WebhookOutcome =
  | { duplicate: true }
  | {
      duplicate: false;
      effect: 'paid' | 'payment_failed' | 'refunded' | 'fulfilment_queued' | 'no_change' | 'ignored';
    };

const orderIdSchema = z.uuid();

export async function handleProviderEvent(deps: WebhookDeps, event: ProviderEvent): Promise<WebhookOutcome> {
  return deps.db.$transaction(async (tx) => {
    if (!testHooks.webhookDedupeDisabled) {
      const claimed = await tx.$queryRaw<Array<{ id: string }>>`
        insert into processed_events (id, source, type) values (${event.id}, 'provider', ${event.type})
        on conflict (id) do nothing returning id`;
      if (claimed.length === 0) {
        // Counted in the same transaction, for /api/metrics across every web process.
        await tx.$executeRaw`
          insert into operational_counters as c (name, label, value, updated_at)
          values (${PersistedCounter.webhookDuplicatesDropped}, 'provider', 1, now())
          on conflict (name, label) do update set value = c.value + 1, updated_at = now()`;
        return { duplicate: true } as const;
      }
    }
    return { duplicate: false, effect: await applyEvent(deps, tx, event) } as const;
  });
}

async function applyEvent(
  deps: WebhookDeps,
  tx: Prisma.TransactionClient,
  event: ProviderEvent,
): Promise<Extract<WebhookOutcome, { duplicate: false }>['effect']> {
  const charge = event.data.object;
  const orderId = orderIdSchema.safeParse(charge.order);
  if (!orderId.success) return 'ignored'; // not one of our orders
  const order = await tx.order.findUnique({ where: { id: orderId.data }, select: { id: true } });
  if (!order) return 'ignored';

  switch (event.type) {
    case 'charge.succeeded': {
      await recordPayment(tx, {
        orderId: order.id,
        providerChargeId: charge.id,
        status: 'succeeded',
        amountCents: charge.amount,
        currency: charge.currency,
      });
      const becamePaid = await markOrderPaid(tx, order.id);
      const { status } = await tx.order.findUniqueOrThrow({
        where: { id: order.id },
        select: { status: true },
      });
      // Fulfilment is driven by the provider's confirmation, not by the pay call; never for a refunded order.
      if (status !== 'paid') return becamePaid ? 'paid' : 'no_change';
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
    case 'charge.refunded':
      return (await markOrderRefunded(tx, order.id)) ? 'refunded' : 'no_change';
    default:
      return 'ignored';
  }
}
