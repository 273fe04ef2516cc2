import type { Metadata } from 'next';
import Link from 'next/link';
import { OrderStatusBadge } from '~/components/order-status-badge';
import { formatMoney } from '~/lib/money';
import { db } from '~/server/db';
import { getRequestPrincipal } from '~/server/request-principal';
import { listOrdersForPrincipal } from '~/server/services/orders';

export const dynamic = 'force-dynamic';
export const metadata: Metadata = { title: 'Your orders' };

export default async function OrdersPage() {
  const principal = await getRequestPrincipal();
  const orders = principal ? await listOrdersForPrincipal(db, principal.id) : [];
  return (
    <section>
      <h1 className="mb-6 text-2xl font-semibold">Your orders</h1>
      {orders.length === 0 ? (
        <p className="text-stone-600">
          No orders yet.{' '}
          <Link href="/" className="text-brand-700 underline">
            Browse the shop
          </Link>
        </p>
      ) : (
        <ul
          className="divide-y divide-stone-200 rounded-2xl border border-stone-200 bg-white"
          aria-label="Orders"
        >
          {orders.map((order) => (
            <li key={order.id} data-testid="order-row">
              <Link
                href={`/orders/${order.id}`}
                className="flex items-center justify-between gap-4 p-4 hover:bg-stone-50"
              >
                <div>
                  <p className="font-mono text-sm">{order.id.slice(0, 8)}</p>
                  <p className="text-xs text-stone-500">
                    {order.createdAt.toUTCString()} · {order.items.reduce((n, item) => n + item.quantity, 0)}{' '}
                    items
                  </p>
                </div>
                <div className="flex items-center gap-4">
                  <OrderStatusBadge status={order.status} />
                  <span className="w-20 text-right font-medium">
                    {formatMoney(order.totalCents, order.currency)}
                  </span>
                </div>
              </Link>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
