import type { Database } from '@idem/db';
import { ShopError } from '../errors.ts';
import { orderViewInclude, toOrderView } from './order-view.ts';

/** An order is visible only to the principal that placed it; anyone else gets the same "not found". */
export async function getOrderForPrincipal(db: Database, principalId: string, orderId: string) {
  const order = await db.order.findFirst({
    where: { id: orderId, principal: principalId },
    include: orderViewInclude,
  });
  if (!order) throw new ShopError('order_not_found', 'No such order.');
  return toOrderView(order);
}

export async function listOrdersForPrincipal(db: Database, principalId: string, limit = 50) {
  const orders = await db.order.findMany({
    where: { principal: principalId },
    orderBy: { createdAt: 'desc' },
    take: limit,
    include: orderViewInclude,
  });
  return orders.map(toOrderView);
}
