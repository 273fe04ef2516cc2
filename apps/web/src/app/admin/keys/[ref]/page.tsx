import type { Metadata } from 'next';
import Link from 'next/link';
import { notFound } from 'next/navigation';
import type { ReactNode } from 'react';
import { decodeKeyRef } from '~/lib/key-ref';
import { formatMoney } from '~/lib/money';
import { getKeyTrail, type KeyTrail } from '~/server/admin/key-trail';
import { requireAdminPage } from '~/server/admin-page';
import { db } from '~/server/db';
import { AdminHeader } from '../../admin-header';
import { EvictionRule } from '../../eviction-rule';
import { countOf, formatUtc } from '../../format';
import { KeyStatusBadge } from '../../key-status-badge';
import { TrailEvict } from './trail-evict';

export const dynamic = 'force-dynamic';
export const metadata: Metadata = { title: 'Key trail' };

/** One hop of the trail: its place, its name, and what keeps a duplicate from slipping through it there. */
interface Hop {
  n: number;
  title: string;
  guard: string;
}

/** The hops a purchase passes, in order (the charge's guard names the order's own provider key). */
const HOPS = {
  intent: {
    n: 1,
    title: 'Browser intent',
    guard: 'One key per purchase intent, kept beside the cart in localStorage and sent with every retry.',
  },
  request: {
    n: 2,
    title: 'API request — the idempotency record',
    guard:
      "The primary key (principal, procedure, key): one INSERT … ON CONFLICT claims it; duplicates are replayed, 409'd or 422'd.",
  },
  charge: (providerKey: string) => ({
    n: 3,
    title: 'Provider charge',
    guard: `Charged with the key derived from the order, ${providerKey}, made before the money moves: a retried charge is the same charge.`,
  }),
  webhooks: {
    n: 4,
    title: 'Webhook events',
    guard:
      'Each event id is claimed in processed_events in the same transaction as its effect: a redelivery changes nothing.',
  },
  jobs: {
    n: 5,
    title: 'Jobs',
    guard:
      "Fulfilment is enqueued in the transaction that marks the order paid (the pay call's, the webhook's or the reconciler's); a redelivered job finds its shipment (unique order_id) and receipt (unique order_id, kind) already there.",
  },
} satisfies Record<string, Hop | ((providerKey: string) => Hop)>;

export default async function KeyTrailPage({ params }: { params: Promise<{ ref: string }> }) {
  const admin = await requireAdminPage();
  const ref = decodeKeyRef((await params).ref);
  if (!ref) notFound();
  const trail = await getKeyTrail(db, ref);
  const isOrder = trail.orderId !== null;

  return (
    <>
      <AdminHeader email={admin.email} title="Key trail" />
      <p className="-mt-4 mb-8 text-sm text-stone-600">
        Every place a duplicate of this request could have slipped through, in order.{' '}
        <Link href="/admin" className="text-brand-700 underline">
          Back to the dashboard
        </Link>
      </p>
      <ol className="space-y-4" aria-label="Trail">
        <Step hop={HOPS.intent}>
          <Facts
            rows={[
              [
                'Idempotency-Key',
                <code key="k" data-testid="trail-key">
                  {ref.key}
                </code>,
              ],
              ['Principal (scope)', <code key="s">{ref.scope}</code>],
              ['Procedure', <code key="p">{ref.procedure}</code>],
              ['Log key_hash', trail.key ? <code key="h">{trail.key.keyHash}</code> : '—'],
              [
                'Request fingerprint',
                trail.fingerprint ? <code key="f">{trail.fingerprint}</code> : 'unknown',
              ],
            ]}
          />
        </Step>

        <Step
          hop={HOPS.request}
          status={trail.key ? <KeyStatusBadge status={trail.key.status} /> : <Chip tone="stone">no row</Chip>}
        >
          {trail.key ? (
            <>
              <Facts
                rows={[
                  ['State', trail.key.state],
                  [
                    'Stored answer',
                    trail.key.httpStatus === null
                      ? 'none yet'
                      : `HTTP ${trail.key.httpStatus}, ${trail.key.responseBytes ?? 0} bytes`,
                  ],
                  ['Lease owner', trail.key.leaseOwner ?? '—'],
                  ['Lease until', formatUtc(trail.key.lockedUntil)],
                  ['Replays served', String(trail.key.replayCount)],
                  ['Created', formatUtc(trail.key.createdAt)],
                  [
                    'Expires',
                    `${formatUtc(trail.key.expiresAt)}${trail.key.expired ? ' (past retention)' : ''}`,
                  ],
                ]}
              />
              <div className="mt-4 space-y-3" data-testid="trail-evict">
                <TrailEvict target={trail.key} />
                {trail.key.status !== 'completed' && <EvictionRule />}
              </div>
            </>
          ) : (
            <p className="text-sm text-stone-600">
              There is no row for this key now: it was evicted, cleaned up after its retention window, or
              released after a transient failure. The next request with this key runs as new.
            </p>
          )}
          {trail.evictions.length > 0 && (
            <div className="mt-4">
              <p className="text-sm font-semibold">Audit log</p>
              <ul className="mt-1 space-y-1 text-sm" data-testid="audit-events">
                {trail.evictions.map((event) => (
                  <li key={event.id} data-testid="audit-event">
                    {formatUtc(event.createdAt)} — <strong>evicted</strong> by {event.actorEmail} (
                    {event.rule === 'lease_expired' ? 'lease had expired' : 'explicitly confirmed'}); the row
                    was <code>{String(event.before?.state ?? '?')}</code>, lease until{' '}
                    <code>{String(event.before?.lockedUntil ?? '—')}</code>
                  </li>
                ))}
              </ul>
            </div>
          )}
        </Step>

        {isOrder ? (
          <OrderSteps trail={trail} />
        ) : (
          <li className="rounded-xl border border-dashed border-stone-300 p-5 text-sm text-stone-500">
            {trail.fingerprint
              ? `${ref.procedure} has no downstream effects the trail knows of (provider, webhooks, jobs are checkout.placeOrder's).`
              : 'Without the request fingerprint the order this key named cannot be derived.'}
          </li>
        )}
      </ol>
    </>
  );
}

function OrderSteps({ trail }: { trail: KeyTrail }) {
  const provider = trail.provider;
  const jobs = trail.jobs;
  const chargeCount = provider?.charges.length ?? 0;
  return (
    <>
      <Step
        hop={HOPS.charge(provider?.idempotencyKey ?? 'order_<id>')}
        status={
          <Chip tone={chargeCount === 1 ? 'green' : chargeCount === 0 ? 'stone' : 'red'}>
            {countOf(chargeCount, 'charge')}
          </Chip>
        }
      >
        <Facts
          rows={[
            [
              'Order',
              trail.order ? (
                <code key="o" data-testid="trail-order-id">
                  {trail.order.id}
                </code>
              ) : (
                `${trail.orderId} (not created)`
              ),
            ],
            ['Order status', trail.order?.status ?? '—'],
            [
              'Reconciler',
              trail.order?.reconciled
                ? `settled ${trail.order.reconciled.outcome} from the provider's record, ${formatUtc(trail.order.reconciled.at)}`
                : trail.order?.status === 'pending'
                  ? 'pending: settled from the provider’s record 5 min after the last charge attempt'
                  : 'not needed',
            ],
            ['Total', trail.order ? formatMoney(trail.order.totalCents, trail.order.currency) : '—'],
            ['Items', trail.order?.items.map((item) => `${item.quantity} × ${item.name}`).join(', ') || '—'],
            [
              'Our payment record',
              trail.payment
                ? `${trail.payment.status}${trail.payment.failureCode ? ` (${trail.payment.failureCode})` : ''}, charge ${trail.payment.providerChargeId ?? '—'}`
                : 'none',
            ],
            [
              'Charges at the provider',
              provider?.available
                ? `${provider.charges.length} for this order`
                : 'the provider could not be asked (see the server log)',
            ],
          ]}
        />
        {provider && provider.charges.length > 0 && (
          <ul className="mt-3 space-y-1 text-sm" data-testid="provider-charges">
            {provider.charges.map((charge) => (
              <li key={charge.id}>
                <code>{charge.id}</code> — {charge.status}
                {charge.refunded ? ', refunded' : ''}, {formatMoney(charge.amount, charge.currency)},{' '}
                {formatUtc(charge.createdAt)}
              </li>
            ))}
          </ul>
        )}
      </Step>

      <Step
        hop={HOPS.webhooks}
        status={<Chip tone="stone">{countOf(provider?.events.length ?? 0, 'event')}</Chip>}
      >
        {provider && provider.events.length > 0 ? (
          <ul className="space-y-2 text-sm" data-testid="webhook-events">
            {provider.events.map((event) => (
              <li key={event.id} className="rounded-lg bg-stone-50 px-3 py-2">
                <code>{event.type}</code> <code className="text-stone-500">{event.id}</code>
                <p className="text-xs text-stone-600">
                  {event.delivery
                    ? `${countOf(event.delivery.attempts, 'delivery attempt')}${event.delivery.deliveredAt ? `, delivered ${formatUtc(event.delivery.deliveredAt)}` : event.delivery.failedAt ? ', given up' : ', pending'}${event.delivery.lastStatus ? ` (last HTTP ${event.delivery.lastStatus})` : ''}`
                    : 'no webhook endpoint was configured'}
                  {' · '}
                  {event.processedAt ? `applied once, ${formatUtc(event.processedAt)}` : 'not applied (yet)'}
                </p>
              </li>
            ))}
          </ul>
        ) : (
          <p className="text-sm text-stone-500">No events for this order&apos;s charges.</p>
        )}
      </Step>

      <Step hop={HOPS.jobs} status={<Chip tone="stone">{countOf(jobs?.items.length ?? 0, 'job')}</Chip>}>
        {jobs?.available === false && (
          <p className="text-sm text-stone-500">The job queue could not be asked (see the server log).</p>
        )}
        {jobs && jobs.items.length > 0 && (
          <ul className="space-y-1 text-sm" data-testid="jobs">
            {jobs.items.map((job) => (
              <li key={job.id}>
                <code>fulfilment</code> <code className="text-stone-500">{job.id.slice(0, 8)}</code> —{' '}
                {job.state}
                {job.retryCount > 0 ? ` after ${countOf(job.retryCount, 'retry', 'retries')}` : ''}, created{' '}
                {formatUtc(job.createdOn)}
                {job.note ? <span className="text-stone-600"> · {job.note}</span> : null}
                {job.trace ? (
                  <span className="text-stone-600">
                    {' · trace '}
                    {job.trace.url ? (
                      <a className="underline" href={job.trace.url} data-testid="trace-link">
                        <code>{job.trace.id}</code>
                      </a>
                    ) : (
                      <code>{job.trace.id}</code>
                    )}
                  </span>
                ) : null}
              </li>
            ))}
          </ul>
        )}
        <Facts
          className="mt-3"
          rows={[
            [
              'Shipment',
              trail.shipment ? `${trail.shipment.carrier}, ${formatUtc(trail.shipment.createdAt)}` : 'none',
            ],
            [
              'Outbox emails',
              trail.emails.length > 0
                ? trail.emails.map((email) => `${email.kind} → ${email.recipient}`).join(', ')
                : 'none',
            ],
          ]}
        />
      </Step>
    </>
  );
}

function Step({
  hop: { n, title, guard },
  status,
  children,
}: {
  hop: Hop;
  status?: ReactNode;
  children: ReactNode;
}) {
  return (
    <li className="rounded-xl border border-stone-200 bg-white p-5" data-testid={`trail-step-${n}`}>
      <div className="flex items-start justify-between gap-3">
        <div className="flex min-w-0 flex-1 items-start gap-3">
          <span
            aria-hidden
            className="grid size-7 shrink-0 place-items-center rounded-full bg-brand-600 text-sm font-semibold text-white"
          >
            {n}
          </span>
          <div>
            <h2 className="font-semibold">{title}</h2>
            <p className="text-xs text-stone-500">{guard}</p>
          </div>
        </div>
        <div className="shrink-0">{status}</div>
      </div>
      <div className="mt-4 pl-10">{children}</div>
    </li>
  );
}

function Facts({ rows, className = '' }: { rows: Array<[string, ReactNode]>; className?: string }) {
  return (
    <dl className={`grid grid-cols-[max-content_1fr] gap-x-6 gap-y-1 text-sm ${className}`}>
      {rows.map(([label, value]) => (
        <div key={label} className="contents">
          <dt className="text-stone-500">{label}</dt>
          <dd className="break-all">{value}</dd>
        </div>
      ))}
    </dl>
  );
}

function Chip({ tone, children }: { tone: 'green' | 'red' | 'stone'; children: ReactNode }) {
  const className = {
    green: 'bg-emerald-100 text-emerald-900',
    red: 'bg-red-100 text-red-900',
    stone: 'bg-stone-100 text-stone-700',
  }[tone];
  return <span className={`rounded-full px-2 py-0.5 text-xs font-medium ${className}`}>{children}</span>;
}
