/** The public shape of an order, shared by checkout, confirmation and history. */
import type { Order, Prisma, Shipment } from '@idem/db';

export const orderViewInclude = {
  items: { orderBy: { name: 'asc' } },
  payment: true,
  shipment: true,
  emails: { orderBy: { createdAt: 'asc' } },
} as const satisfies Prisma.OrderInclude;

type OrderWithDetails = Prisma.OrderGetPayload<{ include: typeof orderViewInclude }>;

/**
 * The order's own fields every view of it starts with (this view, the admin key trail): who it is for, where it
 * stands, how much, since when. Spread first, so each view's keys keep this order.
 */
export function orderSummaryOf(
  order: Pick<Order, 'id' | 'status' | 'email' | 'totalCents' | 'currency' | 'createdAt'>,
) {
  return {
    id: order.id,
    status: order.status,
    email: order.email,
    totalCents: order.totalCents,
    currency: order.currency,
    createdAt: order.createdAt,
  };
}

/** The order's shipment as its views show it (carrier and when), or null before it has shipped. */
export function shipmentViewOf(shipment: Pick<Shipment, 'carrier' | 'createdAt'> | null) {
  return shipment ? { carrier: shipment.carrier, createdAt: shipment.createdAt } : null;
}

export function toOrderView(order: OrderWithDetails) {
  return {
    ...orderSummaryOf(order),
    items: order.items.map((item) => ({
      sku: item.sku,
      name: item.name,
      quantity: item.quantity,
      unitPriceCents: item.unitPriceCents,
    })),
    shipment: shipmentViewOf(order.shipment),
    emails: order.emails.map((email) => ({
      kind: email.kind,
      recipient: email.recipient,
      createdAt: email.createdAt,
    })),
    payment: order.payment
      ? {
          status: order.payment.status,
          providerChargeId: order.payment.providerChargeId,
          failureMessage: order.payment.failureMessage,
        }
      : null,
  };
}

export type OrderView = ReturnType<typeof toOrderView>;
