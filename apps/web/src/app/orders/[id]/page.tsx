import type { Metadata } from 'next';
import Link from 'next/link';
import { notFound } from 'next/navigation';
import { OrderProgress } from '~/components/order-progress';
import { formatMoney } from '~/lib/money';
import { orderIdInput } from '~/lib/schemas';
import { db } from '~/server/db';
import { getRequestPrincipal } from '~/server/request-principal';
import { getOrderForPrincipal } from '~/server/services/orders';

export const dynamic = 'force-dynamic';
export const metadata: Metadata = { title: 'Your order' };

export default async function OrderPage({ params }: { params: Promise<{ id: string }> }) {
  const parsed = orderIdInput.safeParse(await params);
  const principal = await getRequestPrincipal();
  if (!parsed.success || !principal) notFound();
  const order = await getOrderForPrincipal(db, principal.id, parsed.data.id).catch(() => null);
  if (!order) notFound();

  const paid = order.payment?.status === 'succeeded';
  return (
    <article className="mx-auto max-w-2xl rounded-2xl border border-stone-200 bg-white p-8">
      <div className="flex items-start justify-between gap-4">
        <div>
          <h1 className="text-2xl font-semibold">
            {paid ? 'Thank you — your order is confirmed' : 'Order details'}
          </h1>
          <p className="mt-1 text-sm text-stone-500">
            Order{' '}
            <span className="font-mono" data-testid="order-id">
              {order.id}
            </span>
          </p>
        </div>
      </div>
      <OrderProgress orderId={order.id} initialStatus={order.status} />
      {order.payment?.failureMessage && (
        <p role="alert" className="mt-4 rounded-lg bg-red-50 px-4 py-3 text-sm text-red-800">
          {order.payment.failureMessage}
        </p>
      )}
      <ul className="mt-6 divide-y divide-stone-200 text-sm">
        {order.items.map((item) => (
          <li key={item.sku} className="flex justify-between py-2">
            <span>
              {item.quantity} × {item.name}
            </span>
            <span>{formatMoney(item.unitPriceCents * item.quantity, order.currency)}</span>
          </li>
        ))}
      </ul>
      <p className="mt-4 flex justify-between border-t border-stone-200 pt-4 font-semibold">
        <span>Total</span>
        <span data-testid="order-total">{formatMoney(order.totalCents, order.currency)}</span>
      </p>
      <dl className="mt-6 grid grid-cols-[auto_1fr] gap-x-6 gap-y-1 text-sm text-stone-600">
        <dt>Receipt to</dt>
        <dd>{order.email}</dd>
        <dt>Placed</dt>
        <dd>{order.createdAt.toUTCString()}</dd>
        {order.payment?.providerChargeId && (
          <>
            <dt>Charge</dt>
            <dd className="font-mono">{order.payment.providerChargeId}</dd>
          </>
        )}
      </dl>
      <div className="mt-8 flex gap-4 text-sm">
        <Link href="/orders" className="text-brand-700 underline">
          All orders
        </Link>
        <Link href="/" className="text-brand-700 underline">
          Continue shopping
        </Link>
      </div>
    </article>
  );
}
