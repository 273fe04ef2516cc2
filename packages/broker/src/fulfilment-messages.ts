/**
 * The checkout's fulfilment as broker messages: one message per "ship this paid order", written to the outbox in
 * the transaction that made the order paid (so it exists if and only if that transaction commits), published by
 * the worker's relay, consumed once per message id by the worker's inbox. The body is the pg-boss job's payload
 * (`fulfilmentJobSchema`): the order and the paying request's trace.
 */
import { createOutbox, type Outbox } from '@idem/idempotency/consumer';
import type { PrismaClientLike, SqlExecutor } from '@idem/idempotency/prisma';
import { type FulfilmentJob, fulfilmentJobSchema } from '@idem/jobs';
import { context, propagation } from '@opentelemetry/api';

/**
 * The message type (the inbox's procedure) and its destination in the outbox, which the worker's publisher
 * prefixes with its namespace (names.ts): the web app writes messages without knowing the broker.
 */
export const FulfilmentMessage = {
  type: 'fulfilment',
  destination: 'fulfilment',
  /** The worker's consumer: the inbox's scope (the key table's rows of scope `worker`, procedure `fulfilment`). */
  consumer: 'worker',
} as const;

/**
 * How long after its publish a message still counts as on its way. A paid order that has not shipped and whose
 * last message was published longer ago than this gets another one from the reconciler's stranded-paid sweep
 * (the message was dead-lettered, or lost with a broker's data): at most one extra message per order per window,
 * each absorbed by fulfilment's own idempotence if the first one turns up after all.
 */
export const MESSAGE_LIVE_SECONDS = 600;

export interface FulfilmentOutbox {
  /** Writes the order's fulfilment message through `tx`, the paying transaction; resolves with the message id. */
  enqueue(orderId: string, tx: SqlExecutor): Promise<string>;
  /**
   * The order's fulfilment messages, in pg-boss's words for the stranded-paid sweep: `created` (not yet
   * published), `active` (published within MESSAGE_LIVE_SECONDS), `expired` (published before that).
   */
  states(orderId: string): Promise<string[]>;
  /** The order's fulfilment messages and their hops, oldest first: for the admin trail. */
  hops(orderId: string): Promise<FulfilmentMessageHops[]>;
  /** The outbox itself: the relay, its backlog, its cleanup. */
  readonly outbox: Outbox;
}

/** Where one fulfilment message has been: written, published (the broker confirmed it), consumed (the inbox). */
export interface FulfilmentMessageHops {
  id: string;
  enqueuedAt: Date;
  publishedAt: Date | null;
  /** When the worker's inbox row committed, with the shipment and the receipt. */
  consumedAt: Date | null;
  /** The paying request's trace (W3C `traceparent`), when it was traced. */
  traceparent: string | null;
}

export function fulfilmentOutbox(db: PrismaClientLike): FulfilmentOutbox {
  const outbox = createOutbox(db);
  return {
    outbox,
    enqueue(orderId, tx) {
      const trace: Record<string, string> = {};
      propagation.inject(context.active(), trace);
      const body: FulfilmentJob = fulfilmentJobSchema.parse({ orderId, ...trace });
      return outbox.enqueue(tx, {
        type: FulfilmentMessage.type,
        destination: FulfilmentMessage.destination,
        body: { ...body },
      });
    },
    async states(orderId) {
      const rows = await db.$queryRawUnsafe<Array<{ state: string }>>(
        `select case when sent_at is null then 'created'
                     when sent_at > now() - make_interval(secs => $3) then 'active'
                     else 'expired' end as state
           from idempotency_outbox
          where type = $1 and body::jsonb ->> 'orderId' = $2`,
        FulfilmentMessage.type,
        orderId,
        MESSAGE_LIVE_SECONDS,
      );
      return rows.map((row) => row.state);
    },
    async hops(orderId) {
      const rows = await db.$queryRawUnsafe<
        Array<{
          id: string;
          created_at: Date;
          sent_at: Date | null;
          consumed_at: Date | null;
          traceparent: string | null;
        }>
      >(
        `select o.id, o.created_at, o.sent_at, k.created_at as consumed_at, o.body::jsonb ->> 'traceparent' as traceparent
           from idempotency_outbox o
           left join idempotency_keys k
             on k.scope = $3 and k.procedure = $1 and k.key = o.id and k.state = 'completed'
          where o.type = $1 and o.body::jsonb ->> 'orderId' = $2
          order by o.seq`,
        FulfilmentMessage.type,
        orderId,
        FulfilmentMessage.consumer,
      );
      return rows.map((row) => ({
        id: row.id,
        enqueuedAt: row.created_at,
        publishedAt: row.sent_at,
        consumedAt: row.consumed_at,
        traceparent: row.traceparent,
      }));
    },
  };
}
