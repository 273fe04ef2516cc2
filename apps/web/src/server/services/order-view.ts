/** The public shape of an order, shared by checkout, confirmation and history. */
import type { Prisma } from '@idem/db';

export const orderViewInclude = {
  items: { orderBy: { name: 'asc' } },
  payment: true,
  shipment: true,
  emails: { orderBy: { createdAt: 'asc' } },
} as const satisfies Prisma.OrderInclude;

type OrderWithDetails = Prisma.OrderGetPayload<{ include: typeof orderViewInclude }>;

export function toOrderView(order: OrderWithDetails) {
  return {
    id: order.id,
    status: order.status,
    email: order.email,
    totalCents: order.totalCents,
    currency: order.currency,
    createdAt: order.createdAt,
    items: order.items.map((item) => ({
      sku: item.sku,
      name: item.name,
      quantity: item.quantity,
      unitPriceCents: item.unitPriceCents,
    })),
    shipment: order.shipment
      ? { carrier: order.shipment.carrier, createdAt: order.shipment.createdAt }
      : null,
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
