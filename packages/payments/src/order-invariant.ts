/**
 * The part of the order invariant the database alone can check: nothing `pending` longer than the settle time
 * after its last charge attempt (the reconciler decides it after 5 min), nothing `paid` and unshipped that long
 * after its payment (its fulfilment job, or the reconciler's stranded-paid sweep, ships it). The worker's audit
 * (`pnpm idem:audit`) lists these and adds the provider's side; the web app counts them for its metric and its
 * admin page.
 */
import type { Database } from '@idem/db';

/** How long an order may take to reach its next state: the reconciler waits 300 s and runs each minute. */
export const DEFAULT_SETTLE_WITHIN_SECONDS = 900;

export interface OrderPastItsTime {
  id: string;
  status: 'pending' | 'paid';
  /** Its last charge attempt (pending) or its payment (paid). */
  since: Date;
}

type Queryable = Pick<Database, '$queryRaw'>;

/** Every order past its time, oldest first. */
export function ordersPastTheirTime(
  db: Queryable,
  settleWithinSeconds = DEFAULT_SETTLE_WITHIN_SECONDS,
): Promise<OrderPastItsTime[]> {
  return db.$queryRaw<OrderPastItsTime[]>`
    select o.id::text, o.status::text, coalesce(o.charge_attempted_at, o.created_at) as since
      from orders o
     where o.status = 'pending'
       and coalesce(o.charge_attempted_at, o.created_at) < now() - make_interval(secs => ${settleWithinSeconds})
    union all
    select o.id::text, o.status::text, p.created_at as since
      from orders o join payments p on p.order_id = o.id and p.status = 'succeeded'
     where o.status = 'paid' and p.created_at < now() - make_interval(secs => ${settleWithinSeconds})
     order by since`;
}

/** How many orders are past their time, by state: one pass each over the pending and the paid orders. */
export async function countOrdersPastTheirTime(
  db: Queryable,
  settleWithinSeconds = DEFAULT_SETTLE_WITHIN_SECONDS,
): Promise<{ pending: number; paid: number }> {
  const [row] = await db.$queryRaw<Array<{ pending: number; paid: number }>>`
    select (select count(*)::int from orders
             where status = 'pending'
               and coalesce(charge_attempted_at, created_at) < now() - make_interval(secs => ${settleWithinSeconds}))
             as pending,
           (select count(*)::int from orders o join payments p on p.order_id = o.id and p.status = 'succeeded'
             where o.status = 'paid' and p.created_at < now() - make_interval(secs => ${settleWithinSeconds}))
             as paid`;
  return { pending: row?.pending ?? 0, paid: row?.paid ?? 0 };
}
