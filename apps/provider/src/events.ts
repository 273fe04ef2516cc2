/**
 * Events, Stripe-style: every charge outcome and refund is recorded as an event in the same transaction as the
 * write it describes, together with its webhook outbox row. So an event exists if and only if its charge/refund
 * committed, and a committed event is never lost for delivery (the outbox row commits with it).
 */
import { context, propagation } from '@opentelemetry/api';
import type { ChargeObject } from './charges.ts';
import type { Queryable } from './db.ts';
import { newId } from './ids.ts';

export type EventType = 'charge.succeeded' | 'charge.failed' | 'charge.refunded';

export interface EventObject {
  id: string;
  object: 'event';
  type: EventType;
  /** Unix seconds. */
  created: number;
  data: { object: ChargeObject };
}

/** Where new events are to be delivered; `undefined`: record them, deliver nothing. */
export interface Outbox {
  webhookUrl: string | undefined;
}

// One round trip: the event, and its delivery row when there is an endpoint. `payload` is `json` (not jsonb), so
// Postgres keeps the exact text: the bytes delivered and signed are the bytes serialized here.
const RECORD_SQL = `
WITH event AS (
  INSERT INTO provider.events (id, type, charge_id, payload, traceparent) VALUES ($1, $2, $3, $4::json, $6)
  RETURNING id, seq
)
INSERT INTO provider.webhook_deliveries (event_id, event_seq, url)
SELECT id, seq, $5::text FROM event WHERE $5::text IS NOT NULL`;

/** Records the event (and its outbox row). `db` must be the transaction that wrote the charge/refund. */
export async function recordChargeEvent(
  db: Queryable,
  type: EventType,
  charge: ChargeObject,
  created: number,
  outbox: Outbox,
): Promise<EventObject> {
  // Explicit key order, as Stripe sends it.
  const event: EventObject = { id: newId('evt'), object: 'event', type, created, data: { object: charge } };
  // The trace of the API request that caused the event, so its webhook continues that trace.
  const trace: { traceparent?: string } = {};
  propagation.inject(context.active(), trace);
  await db.query(RECORD_SQL, [
    event.id,
    type,
    charge.id,
    JSON.stringify(event),
    outbox.webhookUrl ?? null,
    trace.traceparent ?? null,
  ]);
  return event;
}

export interface DeliveryState {
  url: string;
  /** delivered | pending | failed (gave up after the last attempt) */
  status: 'delivered' | 'pending' | 'failed';
  attempts: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  delivered_at: string | null;
  failed_at: string | null;
  last_status: number | null;
  last_error: string | null;
}

export interface EventWithDelivery {
  id: string;
  type: EventType;
  charge: string;
  created: number;
  /** `null` when no webhook URL was configured at the time the event was recorded. */
  delivery: DeliveryState | null;
}

interface EventRow {
  id: string;
  type: EventType;
  charge_id: string;
  created_at: Date;
  url: string | null;
  attempts: number | null;
  next_attempt_at: Date | null;
  last_attempt_at: Date | null;
  delivered_at: Date | null;
  failed_at: Date | null;
  last_status: number | null;
  last_error: string | null;
}

const iso = (date: Date | null): string | null => (date === null ? null : date.toISOString());

/** Which events `GET /v1/events` lists (Stripe's parameters of the same names). */
export interface EventsFilter {
  charge?: string;
  limit: number;
  /** Events with a webhook delivery: false, not delivered (still being retried, or given up); true, delivered. */
  deliverySuccess?: boolean;
  /** Unix seconds: only events created at or after. */
  createdGte?: number;
}

/**
 * Events oldest first (the newest `limit` that match), with their delivery state, and whether older ones match
 * too (`hasMore`, read as one row past the limit).
 */
export async function listEvents(
  db: Queryable,
  filter: EventsFilter,
): Promise<{ events: EventWithDelivery[]; hasMore: boolean }> {
  const result = await db.query<EventRow>(
    `SELECT e.id, e.type, e.charge_id, e.created_at, d.url, d.attempts, d.next_attempt_at,
            d.last_attempt_at, d.delivered_at, d.failed_at, d.last_status, d.last_error
       FROM provider.events e
       LEFT JOIN provider.webhook_deliveries d ON d.event_id = e.id
      WHERE ($1::text IS NULL OR e.charge_id = $1)
        AND ($3::boolean IS NULL OR (d.event_id IS NOT NULL AND (d.delivered_at IS NOT NULL) = $3))
        AND ($4::float8 IS NULL OR e.created_at >= to_timestamp($4))
      ORDER BY e.seq DESC
      LIMIT $2::int + 1`,
    [filter.charge ?? null, filter.limit, filter.deliverySuccess ?? null, filter.createdGte ?? null],
  );
  const hasMore = result.rows.length > filter.limit;
  const rows = result.rows.slice(0, filter.limit).reverse();
  return { events: rows.map(toEventWithDelivery), hasMore };
}

function toEventWithDelivery(row: EventRow): EventWithDelivery {
  return {
    id: row.id,
    type: row.type,
    charge: row.charge_id,
    created: Math.floor(row.created_at.getTime() / 1000),
    delivery:
      row.url === null
        ? null
        : {
            url: row.url,
            status: row.delivered_at !== null ? 'delivered' : row.failed_at !== null ? 'failed' : 'pending',
            attempts: row.attempts ?? 0,
            next_attempt_at:
              row.delivered_at === null && row.failed_at === null ? iso(row.next_attempt_at) : null,
            last_attempt_at: iso(row.last_attempt_at),
            delivered_at: iso(row.delivered_at),
            failed_at: iso(row.failed_at),
            last_status: row.last_status,
            last_error: row.last_error,
          },
  };
}
