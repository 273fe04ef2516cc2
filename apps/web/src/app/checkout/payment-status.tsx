import type { IdempotentMutationState } from '@idem/idempotency/react';
import Link from 'next/link';
import type { ReactNode } from 'react';
import type { PaymentStateName } from './payment-announcement';

/** What the Pay button says in each state of the payment (the live region under it says the rest). */
function ButtonLabel({
  name,
  state,
  total,
}: {
  name: PaymentStateName;
  state: IdempotentMutationState<unknown, unknown, unknown>;
  total: string;
}) {
  switch (name) {
    case 'sending':
      return <>Processing payment…</>;
    case 'retrying':
      return (
        <>
          Connection problem — retrying ({state.attempt} of {state.maxAttempts})…
        </>
      );
    case 'conflict':
      return (
        <>
          Still processing — waiting ({state.attempt} of {state.maxAttempts})…
        </>
      );
    case 'succeeded':
      return <>Paid — opening your order…</>;
    case 'replayed':
      return <>Already paid — opening your order…</>;
    default:
      return <>Pay {total}</>;
  }
}

/** Asks the server again what became of the payment: safe, it never charges. */
function CheckButton({ busy, onClick, children }: { busy: boolean; onClick: () => void; children: string }) {
  return (
    <button
      type="button"
      disabled={busy}
      onClick={onClick}
      className="rounded-lg bg-amber-700 px-3 py-2 font-medium text-white hover:bg-amber-800 disabled:opacity-60"
    >
      {children}
    </button>
  );
}

/** Drops the intent's key: the customer's explicit choice to pay for something new. */
function StartOverButton({ disabled, onClick }: { disabled: boolean; onClick: () => void }) {
  return (
    <button
      type="button"
      disabled={disabled}
      onClick={onClick}
      className="rounded-lg border border-amber-400 px-3 py-2 font-medium text-amber-900 hover:bg-amber-100 disabled:opacity-60"
    >
      Start a new purchase
    </button>
  );
}

/** The colours of a notice: amber for a payment that needs the customer, sky for one that only needs patience. */
const NOTICE_TONES = {
  amber: { frame: 'border-amber-300 bg-amber-50', title: 'text-amber-900' },
  sky: { frame: 'border-sky-300 bg-sky-50', title: 'text-sky-900' },
} as const;

/** The frame every payment notice shares: a tinted panel, its title in bold, then what the state adds. */
function Notice({
  testId,
  tone,
  title,
  children,
}: {
  testId: string;
  tone: keyof typeof NOTICE_TONES;
  title: string;
  children: ReactNode;
}) {
  const colours = NOTICE_TONES[tone];
  return (
    <div data-testid={testId} className={`mt-4 rounded-lg border ${colours.frame} p-4 text-sm`}>
      <p className={`font-semibold ${colours.title}`}>{title}</p>
      {children}
    </div>
  );
}

/** The link to the order an unresolved payment turned out to have placed. */
function PlacedOrderLine({ testId, orderId }: { testId: string; orderId: string }) {
  return (
    <p className="mt-1 text-amber-900" data-testid={testId}>
      It placed an order:{' '}
      <Link href={`/orders/${orderId}`} className="font-medium underline">
        view your order
      </Link>
      .
    </p>
  );
}

/** What the customer may do about a payment whose outcome is unknown: ask again (safe), or start over. */
interface CheckOrStartOverProps {
  busy: boolean;
  onCheck: () => void;
  onStartOver: () => void;
}

/** The two actions side by side; both wait while a check is under way. */
function CheckOrStartOver({
  checkLabel,
  busy,
  onCheck,
  onStartOver,
}: CheckOrStartOverProps & { checkLabel: string }) {
  return (
    <div className="mt-3 flex flex-wrap gap-3">
      <CheckButton busy={busy} onClick={onCheck}>
        {checkLabel}
      </CheckButton>
      <StartOverButton disabled={busy} onClick={onStartOver} />
    </div>
  );
}

/**
 * An earlier attempt was sent and its outcome never arrived. Nothing new is charged from here: checking re-sends
 * the ORIGINAL payment with its original key (the server answers with what happened, or runs it once), and only
 * an explicit "start a new purchase" gives a new key.
 */
function InDoubt(actions: CheckOrStartOverProps) {
  return (
    <Notice testId="payment-in-doubt" tone="amber" title="We could not confirm your last payment.">
      <p className="mt-1 text-amber-900">
        It may or may not have gone through. Checking is safe: you will never be charged twice for it.
      </p>
      <CheckOrStartOver checkLabel="Check payment status" {...actions} />
    </Notice>
  );
}

/**
 * The server holds another payment under this intent's key (a 422 to the re-sent attempt): what became of it is
 * still being worked out. The key is kept, so nothing here can charge a second time; starting over is the
 * customer's explicit choice, after looking at their orders.
 */
function StillChecking({ outcome, ...actions }: CheckOrStartOverProps & { outcome: IntentOutcome }) {
  return (
    <Notice testId="payment-still-checking" tone="amber" title="This payment is still being checked.">
      <p className="mt-1 text-amber-900">
        We could not match it with what we have on record yet. You will not be charged again from this page.
        Look at{' '}
        <Link href="/orders" className="underline">
          your orders
        </Link>{' '}
        before starting a new purchase.
      </p>
      {outcome.kind === 'order' && (
        <PlacedOrderLine testId="unresolved-intent-order" orderId={outcome.orderId} />
      )}
      <CheckOrStartOver checkLabel="Check again" {...actions} />
    </Notice>
  );
}

/** What the server says became of an intent too old to re-send. */
export type IntentOutcome =
  | { kind: 'checking' }
  | { kind: 'order'; orderId: string }
  | { kind: 'none' }
  | { kind: 'error'; message: string };

/**
 * The unresolved payment is older than the browser keeps re-sending it: it is never re-sent. The server is asked
 * which order (if any) it made; the customer sees that order, or that none was placed, and may start over.
 */
function Expired({ outcome, onStartOver }: { outcome: IntentOutcome; onStartOver: () => void }) {
  return (
    <Notice testId="payment-expired" tone="amber" title="Your last payment attempt is too old to retry.">
      {outcome.kind === 'checking' && (
        <p className="mt-1 text-amber-900">Checking what happened to your order…</p>
      )}
      {outcome.kind === 'order' && (
        <PlacedOrderLine testId="expired-intent-order" orderId={outcome.orderId} />
      )}
      {outcome.kind === 'none' && (
        <p className="mt-1 text-amber-900" data-testid="expired-intent-no-order">
          No order was placed for it, and you were not charged.
        </p>
      )}
      {outcome.kind === 'error' && <p className="mt-1 text-amber-900">{outcome.message}</p>}
      <div className="mt-3">
        <StartOverButton disabled={outcome.kind === 'checking'} onClick={onStartOver} />
      </div>
    </Notice>
  );
}

/**
 * Another tab of this browser is paying for this cart right now. No new purchase is offered here: paying joins
 * that payment (same key), and this page follows its outcome.
 */
function InOtherTab() {
  return (
    <Notice testId="payment-in-other-tab" tone="sky" title="This cart is being paid for in another tab.">
      <p className="mt-1 text-sky-900">
        Wait for it to finish: this page follows it, and you will be charged once.
      </p>
    </Notice>
  );
}

/**
 * The panels show the states that need the customer, in words (not colour alone). None is a live region: the
 * checkout's two live regions announce every state once (`announcePayment`).
 */
export const PaymentStatus = { ButtonLabel, InDoubt, StillChecking, Expired, InOtherTab };
