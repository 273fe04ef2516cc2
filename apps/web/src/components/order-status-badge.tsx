import type { OrderView } from '~/server/services/order-view';

const styles: Record<OrderView['status'], { label: string; className: string }> = {
  pending: { label: 'Pending', className: 'bg-amber-100 text-amber-900' },
  paid: { label: 'Paid', className: 'bg-emerald-100 text-emerald-900' },
  payment_failed: { label: 'Payment failed', className: 'bg-red-100 text-red-900' },
  shipped: { label: 'Shipped', className: 'bg-sky-100 text-sky-900' },
  refunded: { label: 'Refunded', className: 'bg-stone-200 text-stone-800' },
};

export function OrderStatusBadge({ status }: { status: OrderView['status'] }) {
  const style = styles[status];
  return (
    <span
      className={`rounded-full px-3 py-1 text-xs font-medium ${style.className}`}
      data-testid="order-status"
    >
      {style.label}
    </span>
  );
}
