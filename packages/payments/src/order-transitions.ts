/**
 * The only ways an order's status changes. Each is an absolute, guarded write (`WHERE status IN …`), so it can
 * be applied twice, late or out of order without moving an order backwards: pending → paid → shipped →
 * refunded, pending → payment_failed, and pending → refunded (the charge was refunded before anyone marked the
 * order paid). The pay call and the provider's webhooks share these.
 */
import type { Prisma } from '@idem/db';

type Tx = Prisma.TransactionClient;

/**
 * Stamps the start of a charge attempt on a pending order (the database's clock). The reconciler leaves an order
 * alone until its last attempt is old enough to have finished, and re-checks the stamp under the row lock before
 * it decides, so it never settles an order while a charge for it may still be running. False: the order is no
 * longer pending (the reconciler, a webhook or another attempt decided it) — do not charge.
 */
export async function beginChargeAttempt(tx: Tx, orderId: string): Promise<boolean> {
  const count = await tx.$executeRaw`
    update orders set charge_attempted_at = now() where id = ${orderId}::uuid and status = 'pending'`;
  return count === 1;
}

/** pending → paid. True when this call made the change. */
export async function markOrderPaid(tx: Tx, orderId: string): Promise<boolean> {
  const { count } = await tx.order.updateMany({
    where: { id: orderId, status: 'pending' },
    data: { status: 'paid' },
  });
  return count === 1;
}

/** pending → payment_failed, giving the reserved stock back exactly once (only the call that moved it). */
export async function markOrderPaymentFailed(tx: Tx, orderId: string): Promise<boolean> {
  const { count } = await tx.order.updateMany({
    where: { id: orderId, status: 'pending' },
    data: { status: 'payment_failed' },
  });
  if (count === 0) return false;
  await releaseStock(tx, orderId);
  return true;
}

/**
 * pending → refunded, giving the reserved stock back exactly once: the order's charge was refunded before the
 * order was marked paid (the refund's webhook overtook the success's, or a refund from the provider's dashboard
 * while the request still waited). The money is back, so nothing may pay or ship the order afterwards.
 */
export async function markPendingOrderRefunded(tx: Tx, orderId: string): Promise<boolean> {
  const { count } = await tx.order.updateMany({
    where: { id: orderId, status: 'pending' },
    data: { status: 'refunded' },
  });
  if (count === 0) return false;
  await releaseStock(tx, orderId);
  return true;
}

async function releaseStock(tx: Tx, orderId: string): Promise<void> {
  const items = await tx.orderItem.findMany({ where: { orderId } });
  for (const item of items) {
    await tx.product.update({ where: { id: item.productId }, data: { stock: { increment: item.quantity } } });
  }
}

/** paid or shipped → refunded. */
export async function markOrderRefunded(tx: Tx, orderId: string): Promise<boolean> {
  const { count } = await tx.order.updateMany({
    where: { id: orderId, status: { in: ['paid', 'shipped'] } },
    data: { status: 'refunded' },
  });
  return count === 1;
}

/** Records the provider's answer for an order once; a second writer (webhook or retry) changes nothing. */
export async function recordPayment(
  tx: Tx,
  payment: {
    orderId: string;
    providerChargeId: string | null;
    status: 'succeeded' | 'failed';
    amountCents: number;
    currency: string;
    failureCode?: string;
    failureMessage?: string;
  },
): Promise<void> {
  await tx.payment.createMany({ data: [payment], skipDuplicates: true });
}
