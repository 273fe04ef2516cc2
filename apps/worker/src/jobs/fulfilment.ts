/**
 * The fulfilment job: ship a paid order and put ONE receipt in the outbox — exactly once per order, however
 * often the job is delivered. Three effects, in this order:
 *
 *   tx 1  (c) orders.status paid → shipped   UPDATE … WHERE status = 'paid'  (takes the order's row lock)
 *         (a) one shipment                   INSERT … ON CONFLICT (order_id) DO NOTHING
 *   tx 2  (b) one receipt email              INSERT … ON CONFLICT (order_id, kind) DO NOTHING
 *
 * Why this order survives a crash between any two steps, followed by redelivery:
 * - before tx 1 commits: nothing happened; the order is still `paid` and the next delivery does everything.
 * - after tx 1, before the receipt: the order is `shipped` with its shipment; the next delivery sees `shipped`,
 *   skips tx 1 and writes the missing receipt. (That is why `shipped` means "ensure the receipt", not "done".)
 * - after the receipt, before the job is acknowledged: the next delivery's receipt insert hits the unique
 *   (order_id, 'receipt') and does nothing.
 * Two deliveries at once: the second UPDATE waits on the first's row lock, then finds `shipped` and updates
 * nothing; the second receipt insert waits on the first's unique-index entry, then does nothing.
 *
 * On a broker (QUEUE_URL), `fulfilOrderIn(tx, …)` runs the same steps in ONE transaction, the message's: they
 * commit with its inbox row (@idem/idempotency/consumer) or not at all.
 */
import { incrementCounterSql, WorkerCounter } from '@idem/contracts';
import type { Database, OrderStatus } from '@idem/db';
import type { PrismaTransactionLike } from '@idem/idempotency/prisma';
import {
  type FulfilmentJob,
  fulfilmentJobSchema,
  type JobWithMetadata,
  type PgBoss,
  Queue,
} from '@idem/jobs';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { consoleLogger, type Logger } from '../log.ts';

const tracer = trace.getTracer('@idem/worker');

export const CARRIER = 'Idem Post';

export interface FulfilOptions {
  log?: Logger;
}

export interface FulfilmentResult {
  orderId: string;
  /** The order's status when this delivery found it; `missing` if there is no such order. */
  found: OrderStatus | 'missing';
  shipmentCreated: boolean;
  receiptCreated: boolean;
  /** What happened, in words (also the log line). */
  note: string;
}

/**
 * Where the steps run: `queries` for reads and single statements, `transaction` for tx 1. A job runs each step
 * in a transaction of its own; a broker message runs them all in its transaction.
 */
type Queries = PrismaTransactionLike<Database>;
interface Steps {
  queries: Queries;
  transaction<T>(fn: (tx: Queries) => Promise<T>): Promise<T>;
}

/** A pg-boss job's fulfilment: each step commits on its own (see above). */
export function fulfilOrder(
  db: Database,
  orderId: string,
  options: FulfilOptions = {},
): Promise<FulfilmentResult> {
  return fulfil({ queries: db, transaction: (fn) => db.$transaction(fn) }, orderId, options);
}

/** A broker message's fulfilment: every step in `tx`, which commits with the message's inbox row. */
export function fulfilOrderIn(
  tx: Queries,
  orderId: string,
  options: FulfilOptions = {},
): Promise<FulfilmentResult> {
  return fulfil({ queries: tx, transaction: (fn) => fn(tx) }, orderId, options);
}

async function fulfil(steps: Steps, orderId: string, options: FulfilOptions): Promise<FulfilmentResult> {
  const db = steps.queries;
  const log = options.log ?? consoleLogger;
  const done = (result: Omit<FulfilmentResult, 'orderId'>): FulfilmentResult => {
    log.info(`fulfilment ${orderId}: ${result.note}`);
    return { orderId, ...result };
  };

  const order = await db.order.findUnique({ where: { id: orderId }, select: { status: true } });
  if (!order)
    return done({ found: 'missing', shipmentCreated: false, receiptCreated: false, note: 'no such order' });
  const found = order.status;

  let status = found;
  let shipmentCreated = false;
  if (status === 'paid') {
    shipmentCreated = await shipPaidOrder(steps, orderId);
    // Not shipped by us: another delivery got there first (→ shipped) or the order moved on (e.g. refunded).
    status = shipmentCreated ? 'shipped' : await currentStatus(db, orderId);
  }

  if (status !== 'shipped') {
    const why: Record<Exclude<OrderStatus, 'shipped'>, string> = {
      pending: 'not paid yet',
      paid: 'still paid after the shipment step', // unreachable: shipPaidOrder either ships or the status moved
      payment_failed: 'payment failed',
      refunded: 'refunded',
    };
    return done({
      found,
      shipmentCreated: false,
      receiptCreated: false,
      note: `nothing to do: order ${status} (${why[status]})`,
    });
  }

  const receiptCreated = await writeReceipt(db, orderId, !shipmentCreated);

  const parts = [
    shipmentCreated ? 'shipped' : 'already shipped',
    receiptCreated ? 'receipt written' : 'receipt already in the outbox',
  ];
  return done({ found, shipmentCreated, receiptCreated, note: parts.join('; ') });
}

async function currentStatus(db: Queries, orderId: string): Promise<OrderStatus> {
  const order = await db.order.findUniqueOrThrow({ where: { id: orderId }, select: { status: true } });
  return order.status;
}

/** tx 1: the status change and the shipment commit together, or neither does. */
async function shipPaidOrder(steps: Steps, orderId: string): Promise<boolean> {
  return steps.transaction(async (tx) => {
    // Absolute and forward-only: only a `paid` order becomes `shipped`; the row lock serialises deliveries.
    const updated = await tx.$executeRaw`
      update orders set status = 'shipped' where id = ${orderId}::uuid and status = 'paid'`;
    if (updated !== 1) return false;
    await tx.$executeRaw`
      insert into shipments (id, order_id, carrier) values (gen_random_uuid(), ${orderId}::uuid, ${CARRIER})
      on conflict (order_id) do nothing`;
    return true;
  });
}

/**
 * tx 2 (one statement): the receipt, only for a shipped order, at most once per order (kind `receipt`, unique
 * (order_id, kind)). When the receipt is already there and this delivery shipped nothing either
 * (`nothingShippedHere`), the delivery was a duplicate the unique keys absorbed: the same statement counts it in
 * `operational_counters` (job_duplicates_dropped), so the count commits if and only if the delivery's last step did.
 */
async function writeReceipt(db: Queries, orderId: string, nothingShippedHere: boolean): Promise<boolean> {
  const order = await db.order.findUniqueOrThrow({
    where: { id: orderId },
    select: {
      totalCents: true,
      currency: true,
      items: {
        select: { name: true, sku: true, quantity: true, unitPriceCents: true },
        orderBy: { sku: 'asc' },
      },
    },
  });
  const { subject, body } = renderReceipt(orderId, order);
  const counter = WorkerCounter.fulfilmentDuplicatesDropped;
  const rows = await db.$queryRawUnsafe<Array<{ inserted: number }>>(
    `with receipt as (
       insert into outbox_emails (id, order_id, kind, recipient, subject, body)
       select gen_random_uuid(), o.id, 'receipt', o.email, $2, $3
       from orders o where o.id = $1::uuid and o.status = 'shipped'
       on conflict (order_id, kind) do nothing
       returning 1
     ), duplicate as (
       ${incrementCounterSql(`select $5, $6, 1, now()
         where $4::boolean and not exists (select 1 from receipt)
           and exists (select 1 from orders where id = $1::uuid and status = 'shipped')`)}
     )
     select count(*)::int as inserted from receipt`,
    orderId,
    subject,
    body,
    nothingShippedHere,
    counter.name,
    counter.label,
  );
  return rows[0]?.inserted === 1;
}

interface ReceiptOrder {
  totalCents: number;
  currency: string;
  items: Array<{ name: string; sku: string; quantity: number; unitPriceCents: number }>;
}

export function renderReceipt(orderId: string, order: ReceiptOrder): { subject: string; body: string } {
  const money = new Intl.NumberFormat('en-US', {
    style: 'currency',
    currency: order.currency.trim().toUpperCase(),
  });
  const format = (cents: number) => money.format(cents / 100);
  const lines = order.items.map(
    (item) =>
      `  ${item.quantity} × ${item.name} (${item.sku}) at ${format(item.unitPriceCents)} = ${format(item.quantity * item.unitPriceCents)}`,
  );
  return {
    subject: `Your Idem order ${orderId.slice(0, 8)} has shipped: ${format(order.totalCents)}`,
    body: [
      'Thank you for your order. It is on its way.',
      '',
      `Order ${orderId}`,
      ...lines,
      `Total: ${format(order.totalCents)}`,
      '',
      `Carrier: ${CARRIER}`,
    ].join('\n'),
  };
}

/**
 * One delivery of a fulfilment job, as a consumer span that continues the trace of the request that paid the
 * order (the job's `traceparent`); no-op without an OpenTelemetry SDK. A handler error fails the job, so pg-boss
 * retries it with backoff.
 */
export function fulfilmentJobHandler(db: Database, log: Logger) {
  return async (job: JobWithMetadata<unknown>) => {
    const parsed = fulfilmentJobSchema.safeParse(job.data);
    if (!parsed.success) {
      // Retrying cannot fix a malformed payload: complete the job, say so loudly.
      log.error(`fulfilment job ${job.id}: invalid payload ${JSON.stringify(job.data)}; dropped`);
      return { dropped: 'invalid payload' };
    }
    const data: FulfilmentJob = parsed.data;
    const paying = propagation.extract(context.active(), data);
    return tracer.startActiveSpan('fulfilment', { kind: SpanKind.CONSUMER }, paying, async (span) => {
      span.setAttribute('messaging.message.id', job.id);
      try {
        return await fulfilOrder(db, data.orderId, { log });
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        log.error(
          `fulfilment ${data.orderId} (job ${job.id}, attempt ${job.retryCount + 1} of ${job.retryLimit + 1}) failed; will retry`,
          error,
        );
        throw error;
      } finally {
        span.end();
      }
    });
  };
}

export interface FulfilmentWorkerOptions {
  /** Parallel polling loops on this process. */
  concurrency: number;
  pollingIntervalSeconds: number;
  log: Logger;
}

/** Subscribes to the fulfilment queue. A handler error fails the job → pg-boss retries it with backoff. */
export async function workFulfilment(
  boss: PgBoss,
  db: Database,
  options: FulfilmentWorkerOptions,
): Promise<void> {
  const { log } = options;
  const handle = fulfilmentJobHandler(db, log);
  for (let i = 0; i < options.concurrency; i += 1) {
    await boss.work(
      Queue.fulfilment,
      { includeMetadata: true, batchSize: 1, pollingIntervalSeconds: options.pollingIntervalSeconds },
      async (jobs) => {
        const results = [];
        for (const job of jobs) results.push(await handle(job));
        return results.length === 1 ? results[0] : results;
      },
    );
  }
}
