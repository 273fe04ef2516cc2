/**
 * Placing an order: price it from the catalog, reserve stock, charge the card, record the payment.
 * This is the one function the idempotency layer wraps; keep every effect of a checkout in here.
 */
import type { Database } from '@idem/db';
import type { PlaceOrderInput } from '~/lib/schemas';
import { ShopError } from '../errors.ts';
import type { PaymentProvider } from '../payments/provider-client.ts';
import { type OrderView, orderViewInclude, toOrderView } from './order-view.ts';

export interface PlaceOrderDeps {
  db: Database;
  provider: PaymentProvider;
}

export async function placeOrder(
  deps: PlaceOrderDeps,
  principalId: string,
  input: PlaceOrderInput,
): Promise<OrderView> {
  const order = await reserveOrder(deps.db, principalId, input);

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
      await tx.payment.create({
        data: {
          orderId: order.id,
          providerChargeId: result.chargeId,
          status: 'failed',
          amountCents: order.totalCents,
          currency: order.currency,
          failureCode: result.code,
          failureMessage: result.message,
        },
      });
      await tx.order.update({ where: { id: order.id }, data: { status: 'payment_failed' } });
      // Give the reserved stock back: nothing was sold.
      for (const item of order.items) {
        await tx.product.update({
          where: { id: item.productId },
          data: { stock: { increment: item.quantity } },
        });
      }
    });
    throw new ShopError('card_declined', result.message);
  }

  const paid = await deps.db.$transaction(async (tx) => {
    await tx.payment.create({
      data: {
        orderId: order.id,
        providerChargeId: result.charge.id,
        status: 'succeeded',
        amountCents: result.charge.amount,
        currency: result.charge.currency,
      },
    });
    return tx.order.update({ where: { id: order.id }, data: { status: 'paid' }, include: orderViewInclude });
  });
  return toOrderView(paid);
}

/** Creates the pending order and takes its stock in one transaction, at catalog prices. */
async function reserveOrder(db: Database, principalId: string, input: PlaceOrderInput) {
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
      include: { items: true },
    });
  });
}
