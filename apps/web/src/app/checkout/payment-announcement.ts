import { retryReasonOf } from '@idem/idempotency/client';
import type { IdempotentMutationState } from '@idem/idempotency/react';
import type { IntentOutcome } from './payment-status';

/**
 * Where the checkout's payment stands, as the customer meets it. `conflict`: a retry found the same payment
 * still running at the server (409), so the page waits for it; `in-doubt`: an attempt was sent and its
 * outcome never arrived.
 */
export type PaymentStateName =
  | 'idle'
  | 'sending'
  | 'retrying'
  | 'conflict'
  | 'succeeded'
  | 'replayed'
  | 'failed'
  | 'in-doubt'
  | 'unresolved'
  | 'expired'
  | 'in-other-tab';

/**
 * What is said about the payment: `progress` goes to the polite live region (and is shown under the Pay
 * button), `attention` to the alert region, for a state that needs the customer to decide. A failed payment's
 * error is the form's own alert, so it is not repeated here.
 */
export interface PaymentAnnouncement {
  name: PaymentStateName;
  progress: string;
  attention: string;
}

export interface PaymentSituation {
  state: IdempotentMutationState<unknown, unknown, unknown>;
  /** An earlier attempt of this intent is in doubt (read back from storage, e.g. after a reload). */
  inDoubt: boolean;
  inFlightElsewhere: boolean;
  /** Set when the form will not re-send the payment by itself (see `useUnsentIntentCheck`). */
  unsent: { reason: 'expired' | 'unresolved'; outcome: IntentOutcome } | null;
}

const CHARGED_ONCE = 'You will be charged once.';

function outcomeSentence(outcome: IntentOutcome): string {
  switch (outcome.kind) {
    case 'checking':
      return 'Checking what happened to your order…';
    case 'order':
      return 'It placed an order: you can view it.';
    case 'none':
      return 'No order was placed for it, and you were not charged.';
    case 'error':
      return outcome.message;
  }
}

/** The retry in progress: a connection problem, or the same payment still being processed at the server. */
function retryAnnouncement(state: PaymentSituation['state']): PaymentAnnouncement {
  const attempt = `attempt ${state.attempt} of ${state.maxAttempts}`;
  if (retryReasonOf(state.error) === 'in-progress')
    return {
      name: 'conflict',
      progress: `Your payment is still being processed — waiting for its result (${attempt}). ${CHARGED_ONCE}`,
      attention: '',
    };
  return {
    name: 'retrying',
    progress: `Connection problem — retrying your payment (${attempt}). ${CHARGED_ONCE}`,
    attention: '',
  };
}

export function announcePayment({
  state,
  inDoubt,
  inFlightElsewhere,
  unsent,
}: PaymentSituation): PaymentAnnouncement {
  if (inFlightElsewhere)
    return {
      name: 'in-other-tab',
      progress: `This cart is being paid for in another tab. This page follows it. ${CHARGED_ONCE}`,
      attention: '',
    };
  if (unsent?.reason === 'expired')
    return {
      name: 'expired',
      progress: '',
      attention: `Your last payment attempt is too old to retry. ${outcomeSentence(unsent.outcome)}`,
    };
  if (unsent?.reason === 'unresolved')
    return {
      name: 'unresolved',
      progress: '',
      attention:
        'This payment is still being checked. You will not be charged again from this page. Look at your orders before starting a new purchase.',
    };
  switch (state.status) {
    case 'sending':
      return { name: 'sending', progress: 'Sending your payment…', attention: '' };
    case 'retrying':
      return retryAnnouncement(state);
    case 'succeeded':
      return { name: 'succeeded', progress: 'Payment accepted. Opening your order…', attention: '' };
    case 'replayed':
      return {
        name: 'replayed',
        progress: 'This payment had already gone through: you were charged once. Opening your order…',
        attention: '',
      };
    case 'failed':
      return { name: 'failed', progress: '', attention: '' };
    default:
      if (inDoubt || state.status === 'unknown')
        return {
          name: 'in-doubt',
          progress: '',
          attention:
            'We could not confirm your last payment. Checking its status is safe: you will never be charged twice for it.',
        };
      return { name: 'idle', progress: '', attention: '' };
  }
}
