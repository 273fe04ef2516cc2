/**
 * How many new orders one customer may start. Past a limit, card testing (hundreds of declined checkouts, each an
 * order, a provider charge and a key row kept for days), a script that mints a guest session per checkout, stock
 * held by orders that never pay, and a runaway client stop at a 429 with Retry-After, before anything is
 * reserved, charged or stored. Only a new order counts: resuming an order of the same intent, and a replay of a
 * stored answer, are never limited.
 */
import { Prisma } from '@idem/db';
import { OrderLimitError } from '../errors.ts';

export interface NewOrderLimit {
  /** New orders per principal within the window. */
  max: number;
  /** New orders per client address (`clientRef`) within the window, whatever the principal. */
  maxPerClient: number;
  windowSeconds: number;
  /** Orders of one principal still `pending` (stock reserved, payment not decided) at once. */
  maxPending: number;
}

/** Who starts the order: its principal, and the keyed hash of its network address when it is known. */
export interface OrderStarter {
  principal: string;
  clientRef: string | null;
}

/**
 * Throws `OrderLimitError` when the starter is past a limit: `limit.maxPending` orders of the principal still
 * pending (retry once one is decided), or `limit.max` orders of the principal, or `limit.maxPerClient` from its
 * address, within the window (retry when the oldest leaves it). Read in the reserving transaction, before any
 * stock is taken; new orders that start at the same moment may pass together (at most the in-flight cap of them).
 */
export async function checkNewOrderLimit(
  tx: Prisma.TransactionClient,
  starter: OrderStarter,
  limit: NewOrderLimit,
): Promise<void> {
  const [pending] = await tx.$queryRaw<Array<{ count: number }>>`
    select count(*)::int as count
      from (select 1 from orders
             where principal = ${starter.principal} and status = 'pending'
             limit ${limit.maxPending}) as open`;
  if ((pending?.count ?? 0) >= limit.maxPending)
    throw new OrderLimitError('pending', limit, PENDING_RETRY_AFTER_SECONDS);

  const byPrincipal = await windowCount(tx, 'principal', starter.principal, limit.max, limit.windowSeconds);
  if (byPrincipal) throw new OrderLimitError('principal', limit, byPrincipal.retryAfterSeconds);
  if (starter.clientRef === null) return;
  const byClient = await windowCount(
    tx,
    'client',
    starter.clientRef,
    limit.maxPerClient,
    limit.windowSeconds,
  );
  if (byClient) throw new OrderLimitError('client', limit, byClient.retryAfterSeconds);
}

/** A pending order is decided within seconds (the provider's answer) or by the reconciler within minutes. */
const PENDING_RETRY_AFTER_SECONDS = 30;

/** When `max` orders of `value` fall in the window: the seconds until the oldest of them leaves it; else null. */
async function windowCount(
  tx: Prisma.TransactionClient,
  column: 'principal' | 'client',
  value: string,
  max: number,
  windowSeconds: number,
): Promise<{ retryAfterSeconds: number } | null> {
  const whose = column === 'principal' ? Prisma.sql`principal = ${value}` : Prisma.sql`client_ref = ${value}`;
  const [recent] = await tx.$queryRaw<Array<{ placed: number; retry_after: number | null }>>`
    select count(*)::int as placed,
           ceil(extract(epoch from min(created_at) + make_interval(secs => ${windowSeconds}) - now()))::int
             as retry_after
      from (select created_at from orders
             where ${whose}
               and created_at > now() - make_interval(secs => ${windowSeconds})
             order by created_at desc
             limit ${max}) as latest`;
  if ((recent?.placed ?? 0) < max) return null;
  return { retryAfterSeconds: Math.max(1, recent?.retry_after ?? windowSeconds) };
}
