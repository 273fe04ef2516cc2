'use client';

import { useQuery } from '@tanstack/react-query';
import type { OrderView } from '~/server/services/order-view';
import { useTRPC } from '~/trpc/react';
import { OrderStatusBadge } from './order-status-badge';

const settled: ReadonlyArray<OrderView['status']> = ['shipped', 'refunded', 'payment_failed'];

/**
 * The order's status as it moves after the pay call: the provider's webhook confirms the payment and queues
 * fulfilment, the worker ships. Polls until the order settles.
 */
export function OrderProgress({
  orderId,
  initialStatus,
}: {
  orderId: string;
  initialStatus: OrderView['status'];
}) {
  const trpc = useTRPC();
  const order = useQuery(
    trpc.orders.byId.queryOptions(
      { id: orderId },
      {
        refetchInterval: (query) =>
          settled.includes(query.state.data?.status ?? initialStatus) ? false : 1_000,
      },
    ),
  );
  const status = order.data?.status ?? initialStatus;
  const emails = order.data?.emails ?? [];
  const steps = [
    { label: 'Order placed', done: true },
    { label: 'Payment confirmed', done: status === 'paid' || status === 'shipped' || status === 'refunded' },
    { label: 'Shipped', done: status === 'shipped' },
  ];
  return (
    <div className="mt-6" aria-live="polite">
      <div className="flex items-center justify-between">
        <h2 className="text-sm font-medium text-stone-600">Progress</h2>
        <OrderStatusBadge status={status} />
      </div>
      {status !== 'payment_failed' && (
        <ol className="mt-3 grid grid-cols-3 gap-2 text-xs" aria-label="Order progress">
          {steps.map((step) => (
            <li
              key={step.label}
              data-done={step.done}
              className={`rounded-lg border px-3 py-2 ${step.done ? 'border-emerald-300 bg-emerald-50 text-emerald-900' : 'border-stone-200 text-stone-500'}`}
            >
              {step.done ? '✓ ' : ''}
              {step.label}
            </li>
          ))}
        </ol>
      )}
      {emails.length > 0 && (
        <ul className="mt-3 space-y-1 text-xs text-stone-600" aria-label="Emails sent">
          {emails.map((email) => (
            <li key={`${email.kind}-${email.createdAt.toISOString()}`} data-testid="email-sent">
              ✉ {email.kind === 'receipt' ? 'Receipt' : email.kind} emailed to {email.recipient}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
