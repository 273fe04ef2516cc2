/**
 * Business errors of the shop. Each is a TRPCError with the right code from the moment it is thrown, so every
 * layer between the service and the wire (the idempotency middleware in particular, which stores and replays
 * deterministic errors) sees the same code; `reason` is the stable machine-readable detail (`data.reason`).
 */
import { type TRPC_ERROR_CODE_KEY, TRPCError } from '@trpc/server';

export const ShopErrorReason = {
  unknownProduct: 'unknown_product',
  outOfStock: 'out_of_stock',
  cardDeclined: 'card_declined',
  /** The provider refused to attempt the charge: an unknown or invalid card token. */
  cardInvalid: 'card_invalid',
  /** The provider refused the payment for another final reason (nothing was charged). */
  paymentRejected: 'payment_rejected',
  /** The order's payment never completed and the reconciler gave it up: nothing was charged, stock is back. */
  paymentAbandoned: 'payment_abandoned',
  orderNotFound: 'order_not_found',
  /** Past the limit on new orders per principal or per client address: nothing was done; retry after Retry-After. */
  tooManyOrders: 'too_many_orders',
  /** Too many of the principal's orders still wait for their payment: nothing was done; retry after Retry-After. */
  tooManyPendingOrders: 'too_many_pending_orders',
} as const;
export type ShopErrorReason = (typeof ShopErrorReason)[keyof typeof ShopErrorReason];

const codeByReason: Record<ShopErrorReason, TRPC_ERROR_CODE_KEY> = {
  unknown_product: 'UNPROCESSABLE_CONTENT',
  out_of_stock: 'UNPROCESSABLE_CONTENT',
  card_declined: 'PAYMENT_REQUIRED',
  card_invalid: 'PAYMENT_REQUIRED',
  payment_rejected: 'PAYMENT_REQUIRED',
  payment_abandoned: 'PAYMENT_REQUIRED',
  order_not_found: 'NOT_FOUND',
  too_many_orders: 'TOO_MANY_REQUESTS',
  too_many_pending_orders: 'TOO_MANY_REQUESTS',
};

export class ShopError extends TRPCError {
  override name = 'ShopError';
  constructor(
    readonly reason: ShopErrorReason,
    message: string,
  ) {
    super({ code: codeByReason[reason], message });
  }
}

/**
 * Past a limit on new orders (services/new-order-limit.ts): 429, not stored (the key is released: the same key
 * succeeds once the limit has room), with the seconds the route sends as Retry-After.
 */
export class OrderLimitError extends ShopError {
  override name = 'OrderLimitError';
  constructor(
    which: OrderLimitKind,
    limit: { max: number; maxPerClient: number; maxPending: number; windowSeconds: number },
    readonly retryAfterSeconds: number,
  ) {
    const minutes = Math.round(limit.windowSeconds / 60);
    const retry = `Nothing was done; retry after ${retryAfterSeconds} seconds.`;
    const byKind: Record<OrderLimitKind, [ShopErrorReason, string]> = {
      pending: [
        'too_many_pending_orders',
        `Too many orders waiting for their payment: at most ${limit.maxPending} at once for one customer. ${retry}`,
      ],
      principal: [
        'too_many_orders',
        `Too many new orders: at most ${limit.max} in ${minutes} minutes for one customer. ${retry}`,
      ],
      client: [
        'too_many_orders',
        `Too many new orders from this network address: at most ${limit.maxPerClient} in ${minutes} minutes. ${retry}`,
      ],
    };
    super(...byKind[which]);
  }
}

/** Which limit a new order ran into: pending orders of its principal, or new orders of its principal or address. */
export type OrderLimitKind = 'pending' | 'principal' | 'client';

/**
 * The provider could not be reached or failed (5xx, timeout): nothing was decided. 503, so clients retry —
 * with the same Idempotency-Key, which makes the retry safe.
 */
export class PaymentProviderUnavailableError extends TRPCError {
  override name = 'PaymentProviderUnavailableError';
  constructor(message: string) {
    super({ code: 'SERVICE_UNAVAILABLE', message });
  }
}

/**
 * The database could not give the checkout a transaction in time (every pooled connection busy under a burst)
 * or the transaction ran out of time: it was rolled back, nothing was decided. 503, so clients retry with the
 * same Idempotency-Key.
 */
export class DatabaseBusyError extends TRPCError {
  override name = 'DatabaseBusyError';
  constructor(cause: unknown) {
    super({ code: 'SERVICE_UNAVAILABLE', message: 'The database is busy; nothing was decided.', cause });
  }
}

/** The business reason of an error, also when it is a replay of a stored one (its cause carries the reason). */
export function reasonOf(error: TRPCError): string | undefined {
  if (error instanceof ShopError) return error.reason;
  const cause: unknown = error.cause;
  if (cause && typeof cause === 'object' && 'reason' in cause && typeof cause.reason === 'string')
    return cause.reason;
  return undefined;
}
