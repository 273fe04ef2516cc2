/**
 * @idem/payments — the shop's money path, shared by the web app (checkout, webhooks) and the worker
 * (reconciler): the provider client, what the provider's record says about an order, and the order's
 * state transitions.
 */
export { PaymentFailureCode } from './failure-codes.ts';
export {
  countOrdersPastTheirTime,
  DEFAULT_SETTLE_WITHIN_SECONDS,
  type OrderPastItsTime,
  ordersPastTheirTime,
} from './order-invariant.ts';
export {
  beginChargeAttempt,
  markOrderPaid,
  markOrderPaymentFailed,
  markOrderRefunded,
  markPendingOrderRefunded,
  recordPayment,
} from './order-transitions.ts';
export { answerFromCharges, type ProviderAnswer } from './provider-answer.ts';
export {
  type Charge,
  type ChargeRequest,
  type ChargeResult,
  createProviderClient,
  type PaymentProvider,
  ProviderUnavailableError,
  type RefundingPaymentProvider,
} from './provider-client.ts';
