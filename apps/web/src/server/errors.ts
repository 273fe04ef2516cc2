/**
 * Business errors of the shop. Each has a stable `reason` (machine-readable, in the tRPC error's
 * `data.reason`) and maps to one tRPC code. These are deterministic: the same request fails the same way,
 * which is what later lets the idempotency layer store and replay them.
 */
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server';

export const ShopErrorReason = {
  unknownProduct: 'unknown_product',
  outOfStock: 'out_of_stock',
  cardDeclined: 'card_declined',
  orderNotFound: 'order_not_found',
} as const;
export type ShopErrorReason = (typeof ShopErrorReason)[keyof typeof ShopErrorReason];

const codeByReason: Record<ShopErrorReason, TRPC_ERROR_CODE_KEY> = {
  unknown_product: 'UNPROCESSABLE_CONTENT',
  out_of_stock: 'UNPROCESSABLE_CONTENT',
  card_declined: 'PAYMENT_REQUIRED',
  order_not_found: 'NOT_FOUND',
};

export class ShopError extends Error {
  override name = 'ShopError';
  readonly code: TRPC_ERROR_CODE_KEY;
  constructor(
    readonly reason: ShopErrorReason,
    message: string,
  ) {
    super(message);
    this.code = codeByReason[reason];
  }
}

/** The provider could not be reached or failed (5xx, timeout): nothing was decided, a retry may succeed. */
export class PaymentProviderUnavailableError extends Error {
  override name = 'PaymentProviderUnavailableError';
}
