/**
 * Placing an order: price it from the catalog, reserve stock, charge the card, record the payment.
 * This is the one function the idempotency layer wraps; keep every effect of a checkout in here.
 *
 * It is also safe to run again for the same order id (a retry after a crash, or a retry that took over an
 * expired lease): the order id comes from the caller's Idempotency-Key, an existing order is resumed instead
 * of created twice, and the provider charge carries a key derived from that id, so the card is charged once.
 */
import { createHash } from 'node:crypto';
import type { Database } from '@idem/db';
import type { PlaceOrderInput } from '~/lib/schemas';
import { ShopError } from '../errors.ts';
import type { PaymentProvider } from '../payments/provider-client.ts';
import { markOrderPaid, markOrderPaymentFailed, recordPayment } from './order-transitions.ts';
import { type OrderView, orderViewInclude, toOrderView } from './order-view.ts';

export interface PlaceOrderDeps {
  db: Database;
  provider: PaymentProvider;
}

export interface PlaceOrderRequest {
  principalId: string;
  /** Deterministic per intent: see `orderIdForIntent`. */
  orderId: string;
  input: PlaceOrderInput;
}

/**
 * The order id for one intent — (principal, Idempotency-Key, request fingerprint) — as a name-based UUID
 * (RFC 9562 v8 layout over SHA-256). The fingerprint matters once a key has expired: the same key with another
 * cart is another order, while a crashed attempt retried with the same request resumes its own order.
 */
export function orderIdForIntent(intent: { scope: string; key: string; fingerprint: string }): string {
  const bytes = createHash('sha256')
    .update(`order\0${intent.scope}\0${intent.key}\0${intent.fingerprint}`)
    .digest();
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x80; // version 8
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

export async function placeOrder(deps: PlaceOrderDeps, request: PlaceOrderRequest): Promise<OrderView> {
  const { input } = request;
  const existing = await deps.db.order.findUnique({
    where: { id: request.orderId },
    include: orderViewInclude,
  });
  if (existing && existing.principal !== request.principalId)
    throw new Error('Order id collision across principals.');
  // A previous attempt (or the provider's webhook) got this far: finish it rather than start again.
  if (existing && existing.status !== 'pending' && existing.status !== 'payment_failed')
    return toOrderView(existing);
  if (existing?.status === 'payment_failed') {
    throw new ShopError('card_declined', existing.payment?.failureMessage ?? 'Your card was declined.');
  }
  const order = existing ?? (await reserveOrder(deps.db, request));

  // The provider key is derived from the order, so it exists before the money moves: a retried charge
  // for this order can never become a second charge.
  const result = await deps.provider.charge({
    amountCents: order.totalCents,
    currency: order.currency,
    source: input.cardToken,
    orderId: order.id,
    idempotencyKey: `order_${order.id}`,
  });

  if (result.outcome === 'declined') {
    await deps.db.$transaction(async (tx) => {
      await recordPayment(tx, {
        orderId: order.id,
        providerChargeId: result.chargeId,
        status: 'failed',
        amountCents: order.totalCents,
        currency: order.currency,
        failureCode: result.code,
        failureMessage: result.message,
      });
      // Nothing was sold: the transition gives the reserved stock back (once, even if the webhook got here first).
      await markOrderPaymentFailed(tx, order.id);
    });
    throw new ShopError('card_declined', result.message);
  }

  // The provider's charge.succeeded webhook may have recorded all this already: both writes are idempotent.
  const paid = await deps.db.$transaction(async (tx) => {
    await recordPayment(tx, {
      orderId: order.id,
      providerChargeId: result.charge.id,
      status: 'succeeded',
      amountCents: result.charge.amount,
      currency: result.charge.currency,
    });
    await markOrderPaid(tx, order.id);
    return tx.order.findUniqueOrThrow({ where: { id: order.id }, include: orderViewInclude });
  });
  return toOrderView(paid);
}

/** Creates the pending order and takes its stock in one transaction, at catalog prices. */
async function reserveOrder(db: Database, { principalId, orderId, input }: PlaceOrderRequest) {
  return db.$transaction(async (tx) => {
    const skus = input.items.map((item) => item.sku);
    const products = await tx.product.findMany({ where: { sku: { in: skus } } });
    const bySku = new Map(products.map((product) => [product.sku, product]));

    const lines = input.items.map((item) => {
      const product = bySku.get(item.sku);
      if (!product) throw new ShopError('unknown_product', `There is no product with SKU "${item.sku}".`);
      return { product, quantity: item.quantity };
    });

    for (const { product, quantity } of lines) {
      // A conditional decrement is atomic: two checkouts cannot both take the last unit.
      const taken = await tx.product.updateMany({
        where: { id: product.id, stock: { gte: quantity } },
        data: { stock: { decrement: quantity } },
      });
      if (taken.count === 0) {
        throw new ShopError('out_of_stock', `Only ${product.stock} × ${product.name} left in stock.`);
      }
    }

    const currencies = new Set(lines.map(({ product }) => product.currency));
    const [currency] = currencies;
    if (currencies.size !== 1 || !currency) throw new Error('The catalog mixes currencies in one order.');

    return tx.order.create({
      data: {
        id: orderId,
        principal: principalId,
        email: input.email,
        currency,
        totalCents: lines.reduce((sum, { product, quantity }) => sum + product.priceCents * quantity, 0),
        items: {
          create: lines.map(({ product, quantity }) => ({
            productId: product.id,
            sku: product.sku,
            name: product.name,
            quantity,
            unitPriceCents: product.priceCents,
          })),
        },
      },
      include: orderViewInclude,
    });
  });
}
