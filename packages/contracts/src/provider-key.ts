/**
 * The Idempotency-Key the shop sends to the card processor for an order's charge. It is derived from the order
 * id alone, so it exists before the money moves and every retry of the charge — by the checkout, the
 * reconciler or a person — carries the same key.
 */
export function providerChargeKey(orderId: string): string {
  return `order_${orderId}`;
}

/** The Idempotency-Key of the refund of one charge: one refund per charge, however often it is asked for. */
export function providerRefundKey(chargeId: string): string {
  return `refund_${chargeId}`;
}
