/**
 * The order invariant, written once: where every order must be once the asynchronous half has had its time.
 *   - nothing is `pending` or `paid`-and-unshipped past its time (`ordersPastTheirTime` in @idem/payments, which
 *     the web app's metric and admin page count too);
 *   - with the provider asked (`provider` given): the money the provider kept for the order (succeeded charges
 *     not refunded) is the order's amount when it is paid or shipped, and 0 when it was cancelled
 *     (`payment_failed`) or refunded — for orders created within `moneyWindowSeconds` (one provider call each).
 * `pnpm idem:audit` prints the violations of a live database; the fault suites assert there are none.
 */
import type { Database } from '@idem/db';
import { DEFAULT_SETTLE_WITHIN_SECONDS, ordersPastTheirTime, type PaymentProvider } from '@idem/payments';

export const ViolationKind = {
  pendingTooLong: 'pending_too_long',
  paidNotShipped: 'paid_not_shipped',
  /** Paid or shipped, but the provider kept another amount than the order's (0, or a second charge). */
  paidMoneyMismatch: 'paid_money_mismatch',
  /** Cancelled or refunded, but the provider kept money for it. */
  cancelledMoneyKept: 'cancelled_money_kept',
} as const;
export type ViolationKind = (typeof ViolationKind)[keyof typeof ViolationKind];

export interface Violation {
  orderId: string;
  kind: ViolationKind;
  detail: string;
}

export interface AuditOptions {
  /** How long an order may take to reach its next state. Default 900 s (the reconciler waits 300 s, runs each minute). */
  settleWithinSeconds?: number;
  /** Orders created this recently get their money checked at the provider. Default 86 400 s. */
  moneyWindowSeconds?: number;
}

export interface AuditDeps {
  db: Database;
  /** Without it, only the database's own invariants are checked. */
  provider?: Pick<PaymentProvider, 'listCharges'>;
}

export async function auditOrders(deps: AuditDeps, options: AuditOptions = {}): Promise<Violation[]> {
  const settleWithin = options.settleWithinSeconds ?? DEFAULT_SETTLE_WITHIN_SECONDS;
  const violations: Violation[] = [];

  const stuck = await ordersPastTheirTime(deps.db, settleWithin);
  for (const order of stuck)
    violations.push({
      orderId: order.id,
      kind: order.status === 'pending' ? ViolationKind.pendingTooLong : ViolationKind.paidNotShipped,
      detail: `${order.status} since ${order.since.toISOString()}`,
    });

  if (!deps.provider) return violations;
  const recent = await deps.db.$queryRaw<Array<{ id: string; status: string; total_cents: number }>>`
    select id::text, status::text, total_cents from orders
     where status <> 'pending'
       and created_at > now() - make_interval(secs => ${options.moneyWindowSeconds ?? 86_400})
     order by created_at, id`;
  for (const order of recent) {
    const kept = (await deps.provider.listCharges(order.id))
      .filter((charge) => charge.status === 'succeeded' && !charge.refunded)
      .reduce((sum, charge) => sum + charge.amount, 0);
    const owed = order.status === 'paid' || order.status === 'shipped' ? order.total_cents : 0;
    if (kept === owed) continue;
    violations.push({
      orderId: order.id,
      kind: owed === 0 ? ViolationKind.cancelledMoneyKept : ViolationKind.paidMoneyMismatch,
      detail: `${order.status}: the provider kept ${kept}, the order is owed ${owed}`,
    });
  }
  return violations;
}
