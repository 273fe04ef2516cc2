/**
 * Charge logic: request parameters, Stripe-style test tokens, persistence and the charge object.
 * Nothing here knows about HTTP or idempotency; callers decide in which transaction a charge runs.
 */
import { z } from 'zod';
import type { Queryable } from './db.ts';
import { ApiError } from './errors.ts';
import { type Outbox, recordChargeEvent } from './events.ts';
import { newId } from './ids.ts';
import { parseParams, type RequestBody } from './params.ts';

export type { RequestBody } from './params.ts';

export const MAX_AMOUNT = 99_999_999;

export const ChargeParamsSchema = z.strictObject({
  amount: z
    .number({ error: 'amount must be an integer number of cents' })
    .int('amount must be an integer number of cents')
    .positive('amount must be positive')
    .max(MAX_AMOUNT, `amount must be at most ${MAX_AMOUNT}`),
  currency: z
    .string({ error: 'currency must be a string' })
    .regex(/^[a-z]{3}$/, 'currency must be a three-letter lowercase ISO code, e.g. usd'),
  source: z.string({ error: 'source must be a string' }).min(1, 'source must not be empty').max(255),
  order: z.string({ error: 'order must be a string' }).min(1, 'order must not be empty').max(255),
  description: z.string({ error: 'description must be a string' }).max(1000).optional(),
});

export type ChargeParams = z.infer<typeof ChargeParamsSchema>;

export function parseChargeParams(body: RequestBody): ChargeParams {
  // Form bodies only have strings, so `amount` is coerced for them alone.
  return parseParams(ChargeParamsSchema, body, ['amount']);
}

interface Decline {
  code: string;
  declineCode: string;
  message: string;
}

/**
 * Stripe's test tokens. A Map rather than an object literal so a source such as "constructor" or "__proto__" can
 * never resolve through the prototype chain.
 */
const TEST_TOKENS: ReadonlyMap<string, Decline | null> = new Map<string, Decline | null>([
  ['tok_visa', null],
  ['tok_mastercard', null],
  ['tok_amex', null],
  [
    'tok_chargeDeclined',
    { code: 'card_declined', declineCode: 'generic_decline', message: 'Your card was declined.' },
  ],
  [
    'tok_chargeDeclinedInsufficientFunds',
    {
      code: 'insufficient_funds',
      declineCode: 'insufficient_funds',
      message: 'Your card has insufficient funds.',
    },
  ],
]);

/**
 * Rejects unknown tokens before any key is claimed or charge written: like Stripe, a request naming a missing
 * resource is a 400 and is neither recorded nor stored for replay.
 */
export function assertKnownSource(source: string): void {
  if (!TEST_TOKENS.has(source)) {
    throw new ApiError(400, 'invalid_request_error', `No such token: '${source}'`, {
      code: 'resource_missing',
      param: 'source',
    });
  }
}

export interface ChargeObject {
  id: string;
  object: 'charge';
  amount: number;
  currency: string;
  source: string;
  order: string;
  description: string | null;
  status: 'succeeded' | 'failed';
  failure_code: string | null;
  failure_message: string | null;
  /** Only a succeeded charge can become refunded (in full, once). */
  refunded: boolean;
  created: number;
}

export interface ChargeRow {
  id: string;
  amount: number;
  currency: string;
  source: string;
  order_ref: string;
  description: string | null;
  status: 'succeeded' | 'failed';
  failure_code: string | null;
  failure_message: string | null;
  refunded: boolean;
  created_at: Date;
}

export const CHARGE_COLUMNS =
  'id, amount, currency, source, order_ref, description, status, failure_code, failure_message, refunded, created_at';

export function toChargeObject(row: ChargeRow): ChargeObject {
  // Explicit key order: the serialized object is what gets stored and replayed byte for byte.
  return {
    id: row.id,
    object: 'charge',
    amount: row.amount,
    currency: row.currency,
    source: row.source,
    order: row.order_ref,
    description: row.description,
    status: row.status,
    failure_code: row.failure_code,
    failure_message: row.failure_message,
    refunded: row.refunded,
    created: Math.floor(row.created_at.getTime() / 1000),
  };
}

export const newChargeId = (): string => newId('ch');

/** A response as it is sent and, under an idempotency key, stored: the body is already serialized. */
export interface StoredResponse {
  status: number;
  body: string;
}

/**
 * Records the charge (succeeded, or failed for a declining token) and its `charge.succeeded`/`charge.failed` event
 * (plus the webhook outbox row), and returns the response for it. `db` must be a transaction's client: the charge
 * and its event commit together or not at all.
 * Declines are a completed charge attempt with a deterministic outcome, so they are recorded and returned as 402.
 */
export async function createCharge(
  db: Queryable,
  params: ChargeParams,
  outbox: Outbox,
): Promise<StoredResponse> {
  const decline = TEST_TOKENS.get(params.source);
  if (decline === undefined) assertKnownSource(params.source);

  const result = await db.query<ChargeRow>(
    `INSERT INTO provider.charges
       (id, amount, currency, source, order_ref, description, status, failure_code, failure_message)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     RETURNING ${CHARGE_COLUMNS}`,
    [
      newChargeId(),
      params.amount,
      params.currency,
      params.source,
      params.order,
      params.description ?? null,
      decline ? 'failed' : 'succeeded',
      decline?.code ?? null,
      decline?.message ?? null,
    ],
  );
  const row = result.rows[0];
  if (row === undefined) throw new Error('INSERT … RETURNING returned no row');
  const charge = toChargeObject(row);
  await recordChargeEvent(db, decline ? 'charge.failed' : 'charge.succeeded', charge, charge.created, outbox);

  if (decline) {
    return {
      status: 402,
      body: JSON.stringify({
        error: {
          type: 'card_error',
          code: decline.code,
          decline_code: decline.declineCode,
          message: decline.message,
          charge: row.id,
        },
      }),
    };
  }
  return { status: 200, body: JSON.stringify(charge) };
}

export async function getCharge(db: Queryable, id: string): Promise<ChargeObject | undefined> {
  const result = await db.query<ChargeRow>(`SELECT ${CHARGE_COLUMNS} FROM provider.charges WHERE id = $1`, [
    id,
  ]);
  const row = result.rows[0];
  return row === undefined ? undefined : toChargeObject(row);
}

/** Every charge for an order, succeeded and failed, oldest first. */
export async function listChargesByOrder(db: Queryable, order: string): Promise<ChargeObject[]> {
  const result = await db.query<ChargeRow>(
    `SELECT ${CHARGE_COLUMNS} FROM provider.charges WHERE order_ref = $1 ORDER BY created_at, seq`,
    [order],
  );
  return result.rows.map(toChargeObject);
}
