import type { IdempotentMutationState } from '@idem/idempotency/react';

/** What the Pay button says in each state of the payment. */
function ButtonLabel({
  state,
  total,
}: {
  state: IdempotentMutationState<unknown, unknown, unknown>;
  total: string;
}) {
  switch (state.status) {
    case 'sending':
      return <>Processing payment…</>;
    case 'retrying':
      return (
        <>
          Connection problem — retrying ({state.attempt} of {state.maxAttempts})…
        </>
      );
    case 'succeeded':
    case 'replayed':
      return <>Paid — opening your order…</>;
    default:
      return <>Pay {total}</>;
  }
}

/**
 * An earlier attempt was sent and its outcome never arrived. Nothing new is charged from here: checking re-sends
 * the ORIGINAL payment with its original key (the server answers with what happened, or runs it once), and only
 * an explicit "start a new purchase" gives a new key.
 */
function InDoubt({
  busy,
  onCheck,
  onStartOver,
}: {
  busy: boolean;
  onCheck: () => void;
  onStartOver: () => void;
}) {
  return (
    <div
      role="alert"
      data-testid="payment-in-doubt"
      className="mt-4 rounded-lg border border-amber-300 bg-amber-50 p-4 text-sm"
    >
      <p className="font-medium text-amber-900">We could not confirm your last payment.</p>
      <p className="mt-1 text-amber-900">
        It may or may not have gone through. Checking is safe: you will never be charged twice for it.
      </p>
      <div className="mt-3 flex flex-wrap gap-3">
        <button
          type="button"
          disabled={busy}
          onClick={onCheck}
          className="rounded-lg bg-amber-600 px-3 py-2 font-medium text-white hover:bg-amber-700 disabled:opacity-60"
        >
          Check payment status
        </button>
        <button
          type="button"
          disabled={busy}
          onClick={onStartOver}
          className="rounded-lg border border-amber-400 px-3 py-2 font-medium text-amber-900 hover:bg-amber-100 disabled:opacity-60"
        >
          Start a new purchase
        </button>
      </div>
    </div>
  );
}

export const PaymentStatus = { ButtonLabel, InDoubt };
