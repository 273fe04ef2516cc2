/**
 * One key's trail, every hop where a duplicate could have slipped through, on one page:
 *
 *   ① browser intent  the key itself: made once per intent in the browser, sent with every retry
 *   ② API request     its key row (state, lease, replays) and any admin evictions of it
 *   ③ provider charge our payment row, the key we sent the processor, and the charges it holds for the order
 *   ④ webhook events  the processor's events for those charges, their delivery attempts, our processed_events
 *   ⑤ jobs            pg-boss fulfilment jobs for the order — or, with QUEUE_URL, its broker messages' hops
 *                     (outbox → published → consumed by the worker's inbox) —, the shipment and the outbox emails
 *
 * Only `checkout.placeOrder` has ③–⑤; its order id is derived from (scope, key, fingerprint). The processor is
 * asked through its API (as a real one would be) and pg-boss through @idem/jobs; when either cannot be reached
 * its step says so instead of failing the page.
 */
import { providerChargeKey } from '@idem/contracts';
import type { Database, Prisma } from '@idem/db';
import { type FulfilmentJobRecord, findFulfilmentJobs, traceIdOf } from '@idem/jobs';
import { env } from '~/env';
import type { KeyRef } from '~/lib/key-ref';
import { brokerFulfilmentMessages, jobQueue } from '../jobs.ts';
import { logger } from '../observability/log.ts';
import { orderSummaryOf, shipmentViewOf } from '../services/order-view.ts';
import { orderIdForIntent } from '../services/place-order.ts';
import { type KeyView, keyOperations, toKeyView } from './key-rows.ts';
import { ORDER_PROCEDURE } from './key-search.ts';
import {
  createProviderReader,
  type ProviderChargeRecord,
  type ProviderEventRecord,
  type ProviderReader,
} from './provider-reader.ts';

/** Where the trail's outside steps come from; tests pass their own. */
export interface KeyTrailSources {
  provider: ProviderReader;
  fulfilmentJobs(orderId: string): Promise<FulfilmentJobRecord[]>;
}

function defaultSources(): KeyTrailSources {
  return {
    provider: createProviderReader({ baseUrl: env.PROVIDER_URL, secretKey: env.PROVIDER_SECRET_KEY }),
    fulfilmentJobs: env.QUEUE_URL
      ? brokerMessageRecords
      : async (orderId) => findFulfilmentJobs(await jobQueue(), orderId),
  };
}

/** With QUEUE_URL: the order's broker messages, each as a job whose note tells its hops. */
async function brokerMessageRecords(orderId: string): Promise<FulfilmentJobRecord[]> {
  const at = (date: Date | null) => (date ? date.toISOString() : 'not yet');
  return (await brokerFulfilmentMessages.hops(orderId)).map((message) => ({
    id: message.id,
    state: message.consumedAt ? 'completed' : message.publishedAt ? 'active' : 'created',
    retryCount: 0,
    createdOn: message.enqueuedAt,
    startedOn: message.publishedAt,
    completedOn: message.consumedAt,
    output: {
      note: `broker message: published ${at(message.publishedAt)}, consumed by the worker's inbox ${at(message.consumedAt)}`,
    },
    traceId: traceIdOf(message.traceparent),
  }));
}

export interface AuditEventView {
  id: string;
  createdAt: Date;
  actor: string;
  actorEmail: string;
  action: string;
  rule: string | null;
  /** The row as it was, without the stored response body. */
  before: Record<string, unknown> | null;
}

export interface ProviderCharge {
  id: string;
  amount: number;
  currency: string;
  status: string;
  failureCode: string | null;
  refunded: boolean;
  createdAt: Date;
}

export interface ProviderEventView {
  id: string;
  type: string;
  createdAt: Date;
  delivery: {
    attempts: number;
    deliveredAt: Date | null;
    failedAt: Date | null;
    lastStatus: number | null;
    lastError: string | null;
  } | null;
  /** When our webhook receiver applied it (processed_events), null if it has not (yet). */
  processedAt: Date | null;
}

export interface JobView {
  id: string;
  state: string;
  retryCount: number;
  createdOn: Date;
  startedOn: Date | null;
  completedOn: Date | null;
  /** What the handler returned (the fulfilment's note), if it finished. */
  note: string | null;
  /** The purchase's trace, and where to see it (`IDEM_TRACE_URL`), when the paying request was traced. */
  trace: { id: string; url: string | null } | null;
}

export interface KeyTrail {
  ref: KeyRef;
  key: KeyView | null;
  evictions: AuditEventView[];
  /** From the row, or from the last eviction's copy of it when the row is gone. */
  fingerprint: string | null;
  order: {
    id: string;
    status: string;
    email: string;
    totalCents: number;
    currency: string;
    createdAt: Date;
    items: Array<{ sku: string; name: string; quantity: number }>;
    /** When the last charge attempt started, and what the payment reconciler decided (if it settled it). */
    chargeAttemptedAt: Date | null;
    reconciled: { at: Date; outcome: string } | null;
  } | null;
  /** The order id this key names (placeOrder only), whether or not the order exists. */
  orderId: string | null;
  payment: {
    status: string;
    providerChargeId: string | null;
    amountCents: number;
    currency: string;
    failureCode: string | null;
    createdAt: Date;
  } | null;
  provider: {
    /** False when the processor could not be asked (unreachable, or an answer that is not its API's). */
    available: boolean;
    /** The Idempotency-Key sent with the order's charge (the processor does not list its key records). */
    idempotencyKey: string;
    charges: ProviderCharge[];
    events: ProviderEventView[];
  } | null;
  jobs: { available: boolean; items: JobView[] } | null;
  shipment: { carrier: string; createdAt: Date } | null;
  emails: Array<{ kind: string; recipient: string; subject: string; createdAt: Date }>;
}

export async function getKeyTrail(
  db: Database,
  ref: KeyRef,
  sources: KeyTrailSources = defaultSources(),
): Promise<KeyTrail> {
  const row = await keyOperations(db).findKey(ref);
  const key = row ? toKeyView(row) : null;
  const evictions = await listEvictions(db, ref);
  const fingerprint = key?.fingerprint ?? fingerprintFrom(evictions[0]?.before);

  const empty: KeyTrail = {
    ref,
    key,
    evictions,
    fingerprint,
    order: null,
    orderId: null,
    payment: null,
    provider: null,
    jobs: null,
    shipment: null,
    emails: [],
  };
  if (ref.procedure !== ORDER_PROCEDURE || !fingerprint) return empty;

  const orderId = orderIdForIntent({ scope: ref.scope, key: ref.key, fingerprint });
  const order = await db.order.findUnique({
    where: { id: orderId },
    include: { items: { orderBy: { name: 'asc' } }, payment: true, shipment: true, emails: true },
  });
  const [provider, jobs] = await Promise.all([
    providerTrail(db, sources.provider, orderId),
    jobTrail(sources, orderId),
  ]);
  return {
    ...empty,
    orderId,
    order: order
      ? {
          ...orderSummaryOf(order),
          items: order.items.map((item) => ({ sku: item.sku, name: item.name, quantity: item.quantity })),
          chargeAttemptedAt: order.chargeAttemptedAt,
          reconciled:
            order.reconciledAt && order.reconciledOutcome
              ? { at: order.reconciledAt, outcome: order.reconciledOutcome }
              : null,
        }
      : null,
    payment: order?.payment
      ? {
          status: order.payment.status,
          providerChargeId: order.payment.providerChargeId,
          amountCents: order.payment.amountCents,
          currency: order.payment.currency,
          failureCode: order.payment.failureCode,
          createdAt: order.payment.createdAt,
        }
      : null,
    provider,
    jobs,
    shipment: shipmentViewOf(order?.shipment ?? null),
    emails: (order?.emails ?? [])
      .map((email) => ({
        kind: email.kind,
        recipient: email.recipient,
        subject: email.subject,
        createdAt: email.createdAt,
      }))
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime()),
  };
}

export const EVICT_ACTION = 'idempotency_key.evict';

async function listEvictions(db: Database, ref: KeyRef): Promise<AuditEventView[]> {
  const target: Prisma.InputJsonValue = { scope: ref.scope, procedure: ref.procedure, key: ref.key };
  const rows = await db.$queryRawUnsafe<
    Array<{
      id: string;
      created_at: Date;
      actor: string;
      actor_email: string;
      action: string;
      before: Record<string, unknown> | null;
      detail: { rule?: unknown } | null;
    }>
  >(
    `select id::text, created_at, actor, actor_email, action, before - 'response' as before, detail
     from admin_audit_events where action = $1 and target @> $2::jsonb
     order by created_at desc limit 50`,
    EVICT_ACTION,
    JSON.stringify(target),
  );
  return rows.map((row) => ({
    id: row.id,
    createdAt: row.created_at,
    actor: row.actor,
    actorEmail: row.actor_email,
    action: row.action,
    rule: typeof row.detail?.rule === 'string' ? row.detail.rule : null,
    before: row.before,
  }));
}

function fingerprintFrom(before: Record<string, unknown> | null | undefined): string | null {
  const value = before?.fingerprint;
  return typeof value === 'string' ? value.trim() : null;
}

async function providerTrail(
  db: Database,
  reader: ProviderReader,
  orderId: string,
): Promise<NonNullable<KeyTrail['provider']>> {
  const idempotencyKey = providerChargeKey(orderId);
  let charges: ProviderChargeRecord[];
  let events: ProviderEventRecord[];
  try {
    charges = await reader.listCharges(orderId);
    events = (await Promise.all(charges.map((charge) => reader.listEvents(charge.id)))).flat();
  } catch (error) {
    logger.warn({ err: error, order_id: orderId }, 'key trail: the provider could not be asked');
    return { available: false, idempotencyKey, charges: [], events: [] };
  }
  const processed = await db.processedEvent.findMany({
    where: { id: { in: events.map((event) => event.id) } },
    select: { id: true, processedAt: true },
  });
  const processedAt = new Map(processed.map((row) => [row.id, row.processedAt]));
  return {
    available: true,
    idempotencyKey,
    charges: charges.map((charge) => ({
      id: charge.id,
      amount: charge.amount,
      currency: charge.currency,
      status: charge.status,
      failureCode: charge.failure_code,
      refunded: charge.refunded,
      createdAt: fromUnixSeconds(charge.created),
    })),
    events: events
      .map((event) => ({
        id: event.id,
        type: event.type,
        createdAt: fromUnixSeconds(event.created),
        delivery: event.delivery
          ? {
              attempts: event.delivery.attempts,
              deliveredAt: fromIso(event.delivery.delivered_at),
              failedAt: fromIso(event.delivery.failed_at),
              lastStatus: event.delivery.last_status,
              lastError: event.delivery.last_error,
            }
          : null,
        processedAt: processedAt.get(event.id) ?? null,
      }))
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime()),
  };
}

const fromUnixSeconds = (seconds: number): Date => new Date(seconds * 1000);
const fromIso = (value: string | null): Date | null => (value === null ? null : new Date(value));

async function jobTrail(sources: KeyTrailSources, orderId: string): Promise<NonNullable<KeyTrail['jobs']>> {
  let records: FulfilmentJobRecord[];
  try {
    records = await sources.fulfilmentJobs(orderId);
  } catch (error) {
    logger.warn({ err: error, order_id: orderId }, 'key trail: the job queue could not be asked');
    return { available: false, items: [] };
  }
  return {
    available: true,
    items: records.map((record) => ({
      id: record.id,
      state: record.state,
      retryCount: record.retryCount,
      createdOn: record.createdOn,
      startedOn: record.startedOn,
      completedOn: record.completedOn,
      note: noteOf(record.output),
      trace: record.traceId
        ? { id: record.traceId, url: env.traceUrl?.replace('{traceId}', record.traceId) ?? null }
        : null,
    })),
  };
}

function noteOf(output: unknown): string | null {
  if (output && typeof output === 'object' && 'note' in output && typeof output.note === 'string')
    return output.note;
  return null;
}
