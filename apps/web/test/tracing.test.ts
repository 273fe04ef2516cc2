/**
 * One purchase is one trace (issue 31): the browser's `traceparent` → the checkout's API span → the idempotency
 * span → the provider call → the provider's own span → the fulfilment job, whose payload carries the trace to
 * the worker, and the provider's webhook carries it back to the app. All in one process here (the routes, the
 * provider and the job handler), with an in-memory exporter,
 * so the links are exact. A replay is one short idempotency span marked replayed, with no provider call under it.
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { traceIdempotency } from '@idem/idempotency/otel';
import { findFulfilmentJobs } from '@idem/jobs';
import { fulfilmentJobHandler } from '@idem/worker';
import { context, propagation, type Span, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CheckoutServers, startCheckoutServers } from './helpers/checkout-servers.ts';

const [alice] = demoUsers;
// Read once, when the app's environment is first imported (by startCheckoutServers below).
process.env.IDEM_TRACE_URL = 'https://traces.example/trace/{traceId}';
const SKU = `IDEMTRACE-${randomUUID().slice(0, 8).toUpperCase()}`;
const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 2 });
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let servers: CheckoutServers | undefined;
let stopTracing = () => {};

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  stopTracing = traceIdempotency();
  await seedDatabase(db);
  await db.product.create({
    data: { sku: SKU, name: 'Traced item', description: 'test', priceCents: 900, stock: 100 },
  });
  servers = await startCheckoutServers(process.env.DATABASE_URL ?? '', { webhooks: true });
});

afterAll(async () => {
  stopTracing();
  trace.disable();
  propagation.disable();
  context.disable();
  await servers?.close();
  await db.$disconnect();
});

/** The purchase as a browser that traces sends it: its own span, and `traceparent` on the request. */
async function purchase(browserSpan: Span, key: string) {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    authorization: `Bearer ${alice?.token}`,
    'idempotency-key': key,
  };
  propagation.inject(trace.setSpan(context.active(), browserSpan), headers);
  const response = await fetch(`${servers?.app.url}/api/trpc/checkout.placeOrder`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      json: { items: [{ sku: SKU, quantity: 1 }], email: 'trace@example.com', cardToken: 'tok_visa' },
    }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { result: { data: { json: { id: string } } } }).result.data.json.id;
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe('tracing', () => {
  it('one purchase is one connected trace, down to the fulfilment job; a replay is a short span marked replayed', async () => {
    const browser = provider.getTracer('browser').startSpan('browser: Pay');
    const traceId = browser.spanContext().traceId;
    const key = randomUUID();
    const orderId = await purchase(browser, key);

    // The job carries the trace; the worker's handler continues it.
    const [job] = await findFulfilmentJobs(await (await import('~/server/jobs')).jobQueue(), orderId);
    const [row] = await db.$queryRawUnsafe<Array<{ data: Record<string, unknown> }>>(
      'select data from pgboss.job where id = $1::uuid',
      job?.id,
    );
    const data = row?.data ?? {};
    expect(data.traceparent).toEqual(expect.stringContaining(traceId));
    const delivery = { id: job?.id ?? '', name: 'fulfilment', data, retryCount: 0, retryLimit: 5 };
    await fulfilmentJobHandler(db, { info: () => {}, error: () => {} })(
      delivery as Parameters<ReturnType<typeof fulfilmentJobHandler>>[0],
    );

    // The provider's charge.succeeded webhook comes back with the purchase's trace.
    await expect
      .poll(() => exporter.getFinishedSpans().some((span) => span.name === 'POST /api/webhooks/provider'))
      .toBe(true);
    const spans = exporter.getFinishedSpans();
    const named = (name: string) => spans.find((span) => span.name === name);
    const api = named('POST /api/trpc/checkout.placeOrder');
    const idem = named('idempotency checkout.placeOrder');
    const calls = spans.filter((span) => span.name === 'provider POST /v1/charges');
    const fulfilment = named('fulfilment');
    console.log(
      `[tracing] one purchase: ${spans.length} spans: ${spans.map((span) => span.name).join(', ')}`,
    );
    expect(spans.every((span) => span.spanContext().traceId === traceId)).toBe(true);
    expect(parentOf(api as ReadableSpan)).toBe(browser.spanContext().spanId);
    expect(parentOf(idem as ReadableSpan)).toBe(api?.spanContext().spanId);
    expect(idem?.attributes).toMatchObject({ 'idem.outcome': 'executed', 'idem.replayed': false });
    expect(idem?.events.map((event) => event.name)).toEqual(['idem.claimed', 'idem.stored']);
    // The provider call (client) and the provider's own span (server), one the child of the other.
    const [client, server] = [calls.find((span) => span.kind === 2), calls.find((span) => span.kind === 1)];
    expect(parentOf(server as ReadableSpan)).toBe(client?.spanContext().spanId);
    expect(fulfilment?.kind).toBe(4);
    // The webhook's span continues the provider's span that recorded the event.
    expect(parentOf(named('POST /api/webhooks/provider') as ReadableSpan)).toBe(server?.spanContext().spanId);
    expect(spans.some((span) => span.spanContext().spanId === parentOf(fulfilment as ReadableSpan))).toBe(
      true,
    );

    // The admin key trail names the purchase's trace beside its job, and links it.
    const { getKeyTrail } = await import('~/server/admin/key-trail');
    const [user] = await db.user.findMany({ where: { email: alice?.email ?? '' } });
    const trail = await getKeyTrail(db, { scope: `user:${user?.id}`, procedure: 'checkout.placeOrder', key });
    expect(trail.jobs?.items[0]?.trace).toEqual({
      id: traceId,
      url: `https://traces.example/trace/${traceId}`,
    });

    exporter.reset();
    expect(await purchase(browser, key)).toBe(orderId);
    browser.end();
    const replay = exporter.getFinishedSpans();
    expect(replay.every((span) => span.spanContext().traceId === traceId)).toBe(true);
    expect(replay.find((span) => span.name === 'idempotency checkout.placeOrder')?.attributes).toMatchObject({
      'idem.outcome': 'replayed',
      'idem.replayed': true,
    });
    expect(replay.filter((span) => span.name.startsWith('provider '))).toEqual([]);
  });
});
