/**
 * One key's trail, every hop where a duplicate could have slipped through, on one page:
 *
 *   ① browser intent  the key itself: made once per purchase intent in the browser, sent with every retry
 *   ② API request     its key row (state, lease, replays) and any admin evictions of it
 *   ③ provider charge our payment row, and the provider's record of the key we derived (`order_<order id>`)
 *   ④ webhook events  the provider's events for that charge, their delivery attempts, our processed_events
 *   ⑤ jobs            pg-boss fulfilment jobs for the order, the shipment and the outbox emails
 *
 * Only `checkout.placeOrder` has ③–⑤; its order id is derived from (scope, key, fingerprint). The provider is
 * simulated in this repo and keeps its tables in the `provider` schema of the same database; a real processor
 * would be asked through its API. Both the provider's and pg-boss's tables are optional here (to_regclass).
 */
import type { Database, Prisma } from '@idem/db';
import { DEFAULT_SCHEMA } from '@idem/jobs';
import type { KeyRef } from '~/lib/key-ref';
import { orderIdForIntent } from '../services/place-order.ts';
import { type KeyView, keyOperations, toKeyView } from './key-rows.ts';
import { ORDER_PROCEDURE } from './key-search.ts';

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
  archived: boolean;
  /** What the handler returned (the fulfilment's note), if it finished. */
  note: string | null;
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
    /** False when the provider's tables are not in this database (a real processor: see its dashboard). */
    available: boolean;
    idempotencyKey: string;
    keyRecord: { responseStatus: number | null; createdAt: Date } | null;
    charges: ProviderCharge[];
    events: ProviderEventView[];
  } | null;
  jobs: { available: boolean; items: JobView[] } | null;
  shipment: { carrier: string; createdAt: Date } | null;
  emails: Array<{ kind: string; recipient: string; subject: string; createdAt: Date }>;
}

export async function getKeyTrail(db: Database, ref: KeyRef): Promise<KeyTrail> {
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
  const [provider, jobs] = await Promise.all([providerTrail(db, orderId), jobTrail(db, orderId)]);
  return {
    ...empty,
    orderId,
    order: order
      ? {
          id: order.id,
          status: order.status,
          email: order.email,
          totalCents: order.totalCents,
          currency: order.currency,
          createdAt: order.createdAt,
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
    shipment: order?.shipment
      ? { carrier: order.shipment.carrier, createdAt: order.shipment.createdAt }
      : null,
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

async function tableExists(db: Database, name: string): Promise<boolean> {
  const rows = await db.$queryRawUnsafe<Array<{ found: boolean }>>(
    'select to_regclass($1) is not null as found',
    name,
  );
  return rows[0]?.found ?? false;
}

async function providerTrail(db: Database, orderId: string): Promise<NonNullable<KeyTrail['provider']>> {
  // The key the app derives for the charge, before the money moves (services/place-order.ts).
  const idempotencyKey = `order_${orderId}`;
  if (!(await tableExists(db, 'provider.charges'))) {
    return { available: false, idempotencyKey, keyRecord: null, charges: [], events: [] };
  }
  const [keyRows, charges] = await Promise.all([
    db.$queryRawUnsafe<Array<{ response_status: number | null; created_at: Date }>>(
      'select response_status, created_at from provider.idempotency_keys where key = $1 order by created_at limit 1',
      idempotencyKey,
    ),
    db.$queryRawUnsafe<
      Array<{
        id: string;
        amount: number;
        currency: string;
        status: string;
        failure_code: string | null;
        refunded: boolean;
        created_at: Date;
      }>
    >(
      `select id, amount, currency, status, failure_code, refunded, created_at
       from provider.charges where order_ref = $1 order by created_at, seq`,
      orderId,
    ),
  ]);
  const events = charges.length
    ? await db.$queryRawUnsafe<
        Array<{
          id: string;
          type: string;
          created_at: Date;
          attempts: number | null;
          delivered_at: Date | null;
          failed_at: Date | null;
          last_status: number | null;
          last_error: string | null;
          has_delivery: boolean;
          processed_at: Date | null;
        }>
      >(
        `select e.id, e.type, e.created_at, d.attempts, d.delivered_at, d.failed_at, d.last_status, d.last_error,
                d.event_id is not null as has_delivery, p.processed_at
         from provider.events e
         left join provider.webhook_deliveries d on d.event_id = e.id
         left join processed_events p on p.id = e.id
         where e.charge_id = any($1::text[])
         order by e.seq`,
        charges.map((charge) => charge.id),
      )
    : [];
  return {
    available: true,
    idempotencyKey,
    keyRecord: keyRows[0]
      ? { responseStatus: keyRows[0].response_status, createdAt: keyRows[0].created_at }
      : null,
    charges: charges.map((charge) => ({
      id: charge.id,
      amount: charge.amount,
      currency: charge.currency,
      status: charge.status,
      failureCode: charge.failure_code,
      refunded: charge.refunded,
      createdAt: charge.created_at,
    })),
    events: events.map((event) => ({
      id: event.id,
      type: event.type,
      createdAt: event.created_at,
      delivery: event.has_delivery
        ? {
            attempts: event.attempts ?? 0,
            deliveredAt: event.delivered_at,
            failedAt: event.failed_at,
            lastStatus: event.last_status,
            lastError: event.last_error,
          }
        : null,
      processedAt: event.processed_at,
    })),
  };
}

async function jobTrail(db: Database, orderId: string): Promise<NonNullable<KeyTrail['jobs']>> {
  const schema = DEFAULT_SCHEMA;
  if (!(await tableExists(db, `${schema}.job`))) return { available: false, items: [] };
  const hasArchive = await tableExists(db, `${schema}.archive`);
  const columns = `id::text, state::text, retry_count, created_on, started_on, completed_on, output`;
  const rows = await db.$queryRawUnsafe<
    Array<{
      id: string;
      state: string;
      retry_count: number;
      created_on: Date;
      started_on: Date | null;
      completed_on: Date | null;
      output: unknown;
      archived: boolean;
    }>
  >(
    `select ${columns}, false as archived from ${schema}.job where name = 'fulfilment' and data->>'orderId' = $1
     ${hasArchive ? `union all select ${columns}, true from ${schema}.archive where name = 'fulfilment' and data->>'orderId' = $1` : ''}
     order by created_on`,
    orderId,
  );
  return {
    available: true,
    items: rows.map((row) => ({
      id: row.id,
      state: row.state,
      retryCount: row.retry_count,
      createdOn: row.created_on,
      startedOn: row.started_on,
      completedOn: row.completed_on,
      archived: row.archived,
      note: noteOf(row.output),
    })),
  };
}

function noteOf(output: unknown): string | null {
  if (output && typeof output === 'object' && 'note' in output && typeof output.note === 'string')
    return output.note;
  return null;
}
