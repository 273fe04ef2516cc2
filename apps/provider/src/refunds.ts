/**
 * Refunds: full, once, of a succeeded charge. Like charges, nothing here knows about HTTP or idempotency; the
 * caller runs it in a transaction (the refund, the charge update and the `charge.refunded` event commit together).
 */
import { z } from 'zod';
import { CHARGE_COLUMNS, type ChargeRow, type StoredResponse, toChargeObject } from './charges.ts';
import type { Queryable } from './db.ts';
import { ApiError } from './errors.ts';
import { type Outbox, recordChargeEvent } from './events.ts';
import { newId } from './ids.ts';
import { parseParams, type RequestBody } from './params.ts';

export const RefundParamsSchema = z.strictObject({
  charge: z.string({ error: 'charge must be a string' }).min(1, 'charge must not be empty').max(255),
});

export type RefundParams = z.infer<typeof RefundParamsSchema>;

export function parseRefundParams(body: RequestBody): RefundParams {
  return parseParams(RefundParamsSchema, body);
}

export interface RefundObject {
  id: string;
  object: 'refund';
  charge: string;
  amount: number;
  status: 'succeeded';
}

/**
 * Refunds the charge in full. The guarded UPDATE is the whole concurrency story: of two concurrent refunds, the
 * second blocks on the row lock, re-checks `NOT refunded` against the committed row, matches nothing and gets
 * `charge_already_refunded`. A refund never happens twice and never of a failed charge.
 */
export async function createRefund(
  db: Queryable,
  params: RefundParams,
  outbox: Outbox,
): Promise<StoredResponse> {
  const updated = await db.query<ChargeRow & { refunded_at: Date }>(
    `UPDATE provider.charges SET refunded = true, refunded_at = now()
      WHERE id = $1 AND status = 'succeeded' AND NOT refunded
      RETURNING ${CHARGE_COLUMNS}, refunded_at`,
    [params.charge],
  );
  const row = updated.rows[0];
  if (row === undefined) throw await notRefundable(db, params.charge);

  const charge = toChargeObject(row);
  const refund: RefundObject = {
    id: newId('re'),
    object: 'refund',
    charge: charge.id,
    amount: charge.amount,
    status: 'succeeded',
  };
  await db.query(`INSERT INTO provider.refunds (id, charge_id, amount, status) VALUES ($1, $2, $3, $4)`, [
    refund.id,
    refund.charge,
    refund.amount,
    refund.status,
  ]);
  await recordChargeEvent(
    db,
    'charge.refunded',
    charge,
    Math.floor(row.refunded_at.getTime() / 1000),
    outbox,
  );
  return { status: 200, body: JSON.stringify(refund) };
}

/** Why the guarded UPDATE matched nothing: no such charge (404), a failed charge, or one already refunded. */
async function notRefundable(db: Queryable, id: string): Promise<ApiError> {
  const result = await db.query<{ status: string; refunded: boolean }>(
    'SELECT status, refunded FROM provider.charges WHERE id = $1',
    [id],
  );
  const row = result.rows[0];
  if (row === undefined) {
    return new ApiError(404, 'invalid_request_error', `No such charge: '${id}'`, {
      code: 'resource_missing',
      param: 'charge',
    });
  }
  if (row.refunded) {
    return new ApiError(400, 'invalid_request_error', `Charge ${id} has already been refunded.`, {
      code: 'charge_already_refunded',
    });
  }
  return new ApiError(
    400,
    'invalid_request_error',
    `Charge ${id} cannot be refunded: it did not succeed (status ${row.status}).`,
    { code: 'charge_not_refundable' },
  );
}
