import type { KeyStatus } from '~/server/admin/key-rows';

const styles: Record<KeyStatus, { label: string; className: string; title: string }> = {
  in_flight: {
    label: 'in flight',
    className: 'bg-amber-100 text-amber-900',
    title: 'processing, lease live: a request is running',
  },
  stuck: {
    label: 'stuck',
    className: 'bg-red-100 text-red-900',
    title: 'processing, lease ended: the request that claimed it is gone',
  },
  completed: {
    label: 'completed',
    className: 'bg-emerald-100 text-emerald-900',
    title: 'stored answer, replayed to duplicates',
  },
};

export function KeyStatusBadge({ status }: { status: KeyStatus }) {
  const style = styles[status];
  return (
    <span
      className={`whitespace-nowrap rounded-full px-2 py-0.5 text-xs font-medium ${style.className}`}
      title={style.title}
      data-testid="key-status"
    >
      {style.label}
    </span>
  );
}
