/**
 * How many new orders one principal may place in a window. Past it, card testing (hundreds of declined
 * checkouts, each an order, a provider charge and a key row kept for days) and a runaway client stop at a 429
 * with Retry-After, before anything is reserved, charged or stored. Only a new order counts: resuming an order
 * of the same intent, and a replay of a stored answer, are never limited.
 */
import type { Prisma } from '@idem/db';
import { OrderLimitError } from '../errors.ts';

export interface NewOrderLimit {
  /** New orders per principal within the window. */
  max: number;
  windowSeconds: number;
}

/**
 * Throws `OrderLimitError` when `principal` has placed `limit.max` orders within the window; its Retry-After is
 * when the oldest of them leaves it. Read in the reserving transaction, before any stock is taken; new orders of
 * one principal that start at the same moment may pass it together (at most the in-flight cap of them).
 */
export async function checkNewOrderLimit(
  tx: Prisma.TransactionClient,
  principal: string,
  limit: NewOrderLimit,
): Promise<void> {
  const [recent] = await tx.$queryRaw<Array<{ placed: number; retry_after: number | null }>>`
    select count(*)::int as placed,
           ceil(extract(epoch from min(created_at) + make_interval(secs => ${limit.windowSeconds}) - now()))::int
             as retry_after
      from (select created_at from orders
             where principal = ${principal}
               and created_at > now() - make_interval(secs => ${limit.windowSeconds})
             order by created_at desc
             limit ${limit.max}) as latest`;
  if ((recent?.placed ?? 0) < limit.max) return;
  throw new OrderLimitError(limit, Math.max(1, recent?.retry_after ?? limit.windowSeconds));
}
