import type { Database } from '@idem/db';
import { fingerprintRequest } from '@idem/idempotency';
import { TRPCError } from '@trpc/server';
import superjson from 'superjson';
import { ShopError } from '../errors.ts';
import { orderViewInclude, toOrderView } from './order-view.ts';
import { orderIdForIntent } from './place-order.ts';

/** The procedure whose fingerprint names the order (the path the idempotency middleware fingerprints). */
export const PLACE_ORDER_PATH = 'checkout.placeOrder';

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

export interface IntentLookup {
  /** The intent's Idempotency-Key. */
  key: string;
  /** The payload the browser sent under it, as it sent it. */
  payload: unknown;
}

/**
 * "What happened to my order?" for a browser intent that is not re-sent (too old, or unresolved): the order that
 * intent made, or null if it made none. The order id is derived exactly as the checkout derives it — from the
 * caller's principal, the key and the idempotency middleware's fingerprint of `checkout.placeOrder` + the payload
 * (the router's transformer, superjson). While the server still holds the key's row, the fingerprint stored
 * there names the order too, so a browser whose copy of the payload differs from what it sent still finds it.
 * Everything is in the caller's own scope: nobody finds another principal's order. Reads only.
 */
export async function findOrderForIntent(db: Database, principalId: string, intent: IntentLookup) {
  let fingerprint: string;
  try {
    fingerprint = fingerprintRequest(PLACE_ORDER_PATH, intent.payload, superjson);
  } catch {
    throw new TRPCError({
      code: 'BAD_REQUEST',
      message: 'The payload cannot be fingerprinted: it is nested too deeply or is not valid JSON text.',
    });
  }
  const fingerprints = [fingerprint];
  const keyRow = await db.idempotencyKey.findUnique({
    where: { scope_procedure_key: { scope: principalId, procedure: PLACE_ORDER_PATH, key: intent.key } },
    select: { fingerprint: true },
  });
  if (keyRow && keyRow.fingerprint !== fingerprint) fingerprints.push(keyRow.fingerprint);
  const orderIds = fingerprints.map((each) =>
    orderIdForIntent({ scope: principalId, key: intent.key, fingerprint: each }),
  );
  const order = await db.order.findFirst({
    where: { id: { in: orderIds }, principal: principalId },
    select: { id: true, status: true },
  });
  return { order };
}
