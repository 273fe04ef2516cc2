/**
 * Placing an order: price it from the catalog, reserve stock, charge the card, record the payment.
 * This is the one function the idempotency layer wraps; keep every effect of a checkout in here.
 *
 * It is also safe to run again for the same order id (a retry after a crash, a retry that took over an expired
 * lease, or one that comes back after every key has expired): the order id comes from the caller's intent, an
 * existing order is resumed instead of created twice, a resumed order first asks the provider what happened to
 * it, and the charge carries a key derived from that id — so the card is charged once.
 */

import { createHash } from 'node:crypto';
import { providerChargeKey } from '@idem/contracts';
import { type Database, Prisma } from '@idem/db';
import {
  answerFromCharges,
  beginChargeAttempt,
  type Charge,
  markOrderPaid,
  markOrderPaymentFailed,
  PaymentFailureCode,
  type PaymentProvider,
  ProviderUnavailableError,
  recordPayment,
} from '@idem/payments';
import type { PlaceOrderInput } from '~/lib/schemas';
import { DatabaseBusyError, PaymentProviderUnavailableError, ShopError } from '../errors.ts';
import { logger } from '../observability/log.ts';
import { checkNewOrderLimit, type NewOrderLimit } from './new-order-limit.ts';
import { type OrderView, orderViewInclude, toOrderView } from './order-view.ts';

export interface PlaceOrderDeps {
  db: Database;
  provider: PaymentProvider;
  /** Checked before a new order is reserved (never when resuming one). */
  newOrderLimit: NewOrderLimit;
  /**
   * Writes the order's fulfilment job in `tx`, the transaction that marks it paid: the order cannot become paid
   * without its job, and a failure to write the job leaves it pending (the request answers 5xx and a retry, the
   * webhook or the reconciler pays it again). The app passes `enqueueFulfilmentIn` (server/jobs.ts).
   */
  enqueueFulfilment(orderId: string, tx: Prisma.TransactionClient): Promise<void>;
}

export interface PlaceOrderRequest {
  principalId: string;
  /** Deterministic per intent: see `orderIdForIntent`. */
  orderId: string;
  /** The keyed hash of the client's address (`clientRefOf`), kept on a new order for the per-address limit. */
  clientRef: string | null;
  input: PlaceOrderInput;
}

/**
 * The order id for one intent — (principal, Idempotency-Key, request fingerprint) — as a name-based UUID
 * (RFC 9562 v8 layout over SHA-256). The fingerprint matters once a key has expired: the same key with another
 * cart is another order, while a crashed attempt retried with the same request resumes its own order.
 */
export function orderIdForIntent(intent: { scope: string; key: string; fingerprint: string }): string {
  const bytes = createHash('sha256')
    .update(`order\0${intent.scope}\0${intent.key}\0${intent.fingerprint}`)
    .digest();
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x80; // version 8
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

export async function placeOrder(deps: PlaceOrderDeps, request: PlaceOrderRequest): Promise<OrderView> {
  const { input } = request;
  const existing = await deps.db.order.findUnique({
    where: { id: request.orderId },
    include: orderViewInclude,
  });
  if (existing && existing.principal !== request.principalId)
    throw new Error('Order id collision across principals.');
  // A previous attempt, the provider's webhook or the reconciler decided this order: answer with that.
  if (existing && existing.status !== 'pending') return decidedOrder(existing);
  const reserved = existing ?? (await reserveOrder(deps, request));
  // Another attempt of this intent (one that took over the key while this one was slow, or the other way round)
  // reserved the order between our read and our insert: resume that order like any other existing one.
  if (reserved === alreadyReserved) return placeOrder(deps, request);
  const order = reserved;

  if (existing) {
    // A resumed order may have been charged by an attempt whose answer was lost, perhaps days ago, when every
    // idempotency key along the way may have expired: the provider's record is the truth, so ask it first.
    const answer = answerFromCharges(order, await askProvider(() => deps.provider.listCharges(order.id)));
    if (answer.kind === 'charged') return settlePaid(deps, order.id, answer.charge);
    if (answer.kind === 'declined') {
      const { charge } = answer;
      await settleFailed(deps.db, order, {
        providerChargeId: charge.id,
        failureCode: charge.failure_code ?? 'card_declined',
        failureMessage: charge.failure_message ?? 'Your card was declined.',
      });
      throw failureOf(charge.failure_code, charge.failure_message);
    }
    if (answer.kind === 'anomaly')
      throw new Error(`Order ${order.id}: the provider holds a charge that does not match the order.`);
    // Nothing charged yet. Stamp the attempt (the reconciler waits for it); if the order was decided meanwhile,
    // answer with that decision instead of charging.
    if (!(await beginChargeAttempt(deps.db, order.id)))
      return decidedOrder(
        await deps.db.order.findUniqueOrThrow({ where: { id: order.id }, include: orderViewInclude }),
      );
  }

  // The provider key is derived from the order, so it exists before the money moves: a retried charge
  // for this order can never become a second charge while the provider remembers the key.
  const result = await askProvider(() =>
    deps.provider.charge({
      amountCents: order.totalCents,
      currency: order.currency,
      source: input.cardToken,
      orderId: order.id,
      idempotencyKey: providerChargeKey(order.id),
    }),
  );

  if (result.outcome === 'succeeded') {
    // Only a charge for this order, of its amount and currency, pays for it. Anything else is an anomaly for a
    // human (the reconciler flags the order), never a reason to ship.
    if (result.charge.order !== order.id || answerFromCharges(order, [result.charge]).kind !== 'charged')
      throw new Error(
        `Order ${order.id}: the provider answered the charge with ${result.charge.id} (${result.charge.amount} ${result.charge.currency}, order ${result.charge.order}), which does not match the order.`,
      );
    return settlePaid(deps, order.id, result.charge);
  }
  // Declined by the issuer, or refused by the provider (an unknown card token): final either way, so the
  // failure is recorded, the stock released and the answer stored — never a 500 that leaves stock reserved.
  const failure =
    result.outcome === 'declined'
      ? { providerChargeId: result.chargeId, failureCode: result.code, failureMessage: result.message }
      : { providerChargeId: null, failureCode: result.code, failureMessage: result.message };
  await settleFailed(deps.db, order, failure);
  throw failureOf(failure.failureCode, failure.failureMessage);
}

type OrderWithView = Prisma.OrderGetPayload<{ include: typeof orderViewInclude }>;

/** A decided order as this request's answer: its view, or the error its failed payment stands for. */
function decidedOrder(order: OrderWithView): OrderView {
  if (order.status === 'payment_failed')
    throw failureOf(order.payment?.failureCode ?? null, order.payment?.failureMessage ?? null);
  return toOrderView(order);
}

/** The customer-facing error for a failed payment, by its stored failure code. */
function failureOf(failureCode: string | null | undefined, failureMessage: string | null | undefined) {
  switch (failureCode) {
    case PaymentFailureCode.abandoned:
      return new ShopError(
        'payment_abandoned',
        'This order was cancelled because its payment never completed. Nothing was charged; please order again.',
      );
    case PaymentFailureCode.invalidSource:
      return new ShopError('card_invalid', 'This card cannot be used. Check the card details and try again.');
    case PaymentFailureCode.rejected:
      return new ShopError(
        'payment_rejected',
        'The payment provider refused this payment. Nothing was charged.',
      );
    default:
      return new ShopError('card_declined', failureMessage ?? 'Your card was declined.');
  }
}

/** The provider's "nothing decided" as tRPC's 503, so clients retry with the same key. */
async function askProvider<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ProviderUnavailableError) throw new PaymentProviderUnavailableError(error.message);
    throw error;
  }
}

/**
 * Records the succeeded charge and marks the order paid, with its fulfilment job when this is the transition
 * that paid it; the webhook may have done all of it already (idempotent). An order that was cancelled meanwhile (the reconciler gave it up while this request was frozen past its wait)
 * keeps its decision: this request answers with it, and the charge that landed late is the reconciler's to
 * refund (it looks again at the orders it gave up) — logged here as the anomaly it is.
 */
async function settlePaid(deps: PlaceOrderDeps, orderId: string, charge: Charge): Promise<OrderView> {
  const settled = await inTransaction(deps.db, async (tx) => {
    await recordPayment(tx, {
      orderId,
      providerChargeId: charge.id,
      status: 'succeeded',
      amountCents: charge.amount,
      currency: charge.currency,
    });
    if (await markOrderPaid(tx, orderId)) await deps.enqueueFulfilment(orderId, tx);
    return tx.order.findUniqueOrThrow({ where: { id: orderId }, include: orderViewInclude });
  });
  if (settled.status === 'payment_failed') {
    logger.error(
      { orderId, chargeId: charge.id, amountCents: charge.amount, currency: charge.currency },
      'charge succeeded on a cancelled order; the reconciler refunds it',
    );
  }
  return decidedOrder(settled);
}

/** Records the failed payment; the transition gives the reserved stock back (once, whoever gets there first). */
async function settleFailed(
  db: Database,
  order: { id: string; totalCents: number; currency: string },
  failure: { providerChargeId: string | null; failureCode: string; failureMessage: string },
): Promise<void> {
  await inTransaction(db, async (tx) => {
    await recordPayment(tx, {
      orderId: order.id,
      status: 'failed',
      amountCents: order.totalCents,
      currency: order.currency,
      ...failure,
    });
    await markOrderPaymentFailed(tx, order.id);
  });
}

/**
 * How long a checkout transaction may wait for a pooled connection, and run. A burst of checkouts of one product
 * queues on that product's row (the stock decrement) while holding connections, so Prisma's 2 s default wait
 * turned bursts into 503s; the checkout already waits up to 10 s for the provider, so it waits as long here.
 */
const CHECKOUT_TRANSACTION = { maxWait: 10_000, timeout: 15_000 } as const;

/**
 * One of the checkout's transactions. One that could not start in time (every pooled connection busy) or ran out
 * of time was rolled back and decided nothing: a 503 the client retries with the same key, which resumes this
 * intent's order wherever it got to.
 */
async function inTransaction<T>(
  db: Database,
  work: (tx: Prisma.TransactionClient) => Promise<T>,
): Promise<T> {
  try {
    return await db.$transaction(work, CHECKOUT_TRANSACTION);
  } catch (error) {
    if (error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2028')
      throw new DatabaseBusyError(error);
    throw error;
  }
}

/** reserveOrder's answer when the order id is already taken: by another attempt of the same intent. */
const alreadyReserved = Symbol('already reserved');

/**
 * Creates the pending order and takes its stock in one transaction, at catalog prices; `alreadyReserved` (and
 * nothing taken) when an order with this id committed first. The id is the intent's, so that order is this one.
 */
async function reserveOrder(deps: PlaceOrderDeps, request: PlaceOrderRequest) {
  try {
    return await createReservedOrder(deps, request);
  } catch (error) {
    if (isOrderIdTaken(error)) return alreadyReserved;
    if (isRolledBackBeneathItsItems(error)) throw new DatabaseBusyError(error);
    throw error;
  }
}

/**
 * The order's own items failing their foreign key to it: the order row inserted a moment before is gone, which
 * only happens when the transaction ran out of time and was rolled back between the order's insert and its
 * items' (one nested create, several statements). Nothing was reserved: the same as a busy database.
 */
function isRolledBackBeneathItsItems(error: unknown): boolean {
  return (
    error instanceof Prisma.PrismaClientKnownRequestError &&
    error.code === 'P2003' &&
    error.meta?.modelName === 'Order'
  );
}

function isOrderIdTaken(error: unknown): boolean {
  return (
    error instanceof Prisma.PrismaClientKnownRequestError &&
    error.code === 'P2002' &&
    error.meta?.modelName === 'Order'
  );
}

async function createReservedOrder(
  { db, newOrderLimit }: PlaceOrderDeps,
  { principalId, orderId, clientRef, input }: PlaceOrderRequest,
) {
  return inTransaction(db, async (tx) => {
    await checkNewOrderLimit(tx, { principal: principalId, clientRef }, newOrderLimit);
    const skus = input.items.map((item) => item.sku);
    const products = await tx.product.findMany({ where: { sku: { in: skus } } });
    const bySku = new Map(products.map((product) => [product.sku, product]));

    const lines = input.items.map((item) => {
      const product = bySku.get(item.sku);
      if (!product) throw new ShopError('unknown_product', `There is no product with SKU "${item.sku}".`);
      return { product, quantity: item.quantity };
    });

    for (const { product, quantity } of lines) {
      // A conditional decrement is atomic: two checkouts cannot both take the last unit.
      const taken = await tx.product.updateMany({
        where: { id: product.id, stock: { gte: quantity } },
        data: { stock: { decrement: quantity } },
      });
      if (taken.count === 0) {
        throw new ShopError('out_of_stock', `Only ${product.stock} × ${product.name} left in stock.`);
      }
    }

    const currencies = new Set(lines.map(({ product }) => product.currency));
    const [currency] = currencies;
    if (currencies.size !== 1 || !currency) throw new Error('The catalog mixes currencies in one order.');

    return tx.order.create({
      data: {
        id: orderId,
        principal: principalId,
        clientRef,
        email: input.email,
        currency,
        totalCents: lines.reduce((sum, { product, quantity }) => sum + product.priceCents * quantity, 0),
        items: {
          create: lines.map(({ product, quantity }) => ({
            productId: product.id,
            sku: product.sku,
            name: product.name,
            quantity,
            unitPriceCents: product.priceCents,
          })),
        },
      },
      include: orderViewInclude,
    });
  });
}
