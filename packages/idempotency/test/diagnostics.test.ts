/**
 * The steps of a key's life on `node:diagnostics_channel` (core/diagnostics.ts), and the OpenTelemetry spans
 * built from them (`@idem/idempotency/otel`): which steps each kind of request publishes, that messages name the
 * key only by its hash, and that nothing is published to a process that stopped listening.
 */
import { channel } from 'node:diagnostics_channel';
import type { Database } from '@idem/db';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { logKeyHash } from '../src/core/log-key-hash.ts';
import { IDEMPOTENCY_STEP_CHANNELS, type IdempotencyStepMessage } from '../src/index.ts';
import { traceIdempotency } from '../src/otel/index.ts';
import { connectWithOwnTable } from './support/db.ts';
import { createTestTRPC, freshIdentity, requestContext, trpcFailure } from './support/trpc.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup() {
  const { t, idempotency } = createTestTRPC(db, { waitForInFlightMs: 0 });
  let hold: Promise<void> | undefined;
  const input = z.object({ n: z.number() });
  const router = t.router({
    pay: t.procedure
      .concat(idempotency.external())
      .input(input)
      .mutation(async ({ input }) => {
        await hold;
        if (input.n < 0) throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'down' });
        return { paid: input.n };
      }),
    note: t.procedure
      .concat(idempotency.transactional())
      .input(input)
      .mutation(async ({ input }) => {
        if (input.n < 0) throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'down' });
        return { noted: input.n };
      }),
  });
  const caller = (key: string, principal: string) =>
    t.createCallerFactory(router)(requestContext(key, principal));
  return {
    caller,
    holdWhile<T>(run: () => Promise<T>) {
      let release = () => {};
      hold = new Promise((resolve) => {
        release = resolve;
      });
      return { running: run(), release };
    },
  };
}

/** Every step message published while `run` runs. */
async function stepsDuring(run: () => Promise<void>): Promise<IdempotencyStepMessage[]> {
  const seen: IdempotencyStepMessage[] = [];
  const listen = (message: unknown) => seen.push(message as IdempotencyStepMessage);
  const channels = Object.values(IDEMPOTENCY_STEP_CHANNELS).map((name) => channel(name));
  for (const each of channels) each.subscribe(listen);
  try {
    await run();
  } finally {
    for (const each of channels) each.unsubscribe(listen);
  }
  return seen;
}

describe('diagnostics channels', () => {
  it('external: claimed and stored, then replayed, then a payload mismatch; messages carry the key hash only', async () => {
    const { caller } = setup();
    const { principal, key } = freshIdentity();
    const steps = await stepsDuring(async () => {
      await caller(key, principal).pay({ n: 1 });
      await caller(key, principal).pay({ n: 1 });
      await trpcFailure(caller(key, principal).pay({ n: 2 }));
    });
    expect(steps.map((step) => step.step)).toEqual(['claimed', 'stored', 'replayed', 'payload-mismatch']);
    for (const step of steps) {
      expect(step).toMatchObject({ procedure: 'pay', mode: 'external', keyHash: logKeyHash(principal, key) });
      expect(JSON.stringify(step)).not.toContain(key);
      expect(JSON.stringify(step)).not.toContain(principal);
    }
    expect(steps[0]?.takeover).toBe(false);
  });

  it('external: a duplicate of a running request is in flight; a failure that is not stored releases the key', async () => {
    const { caller, holdWhile } = setup();
    const { principal, key } = freshIdentity();
    const claimed = channel(IDEMPOTENCY_STEP_CHANNELS.claimed);
    let onClaimed = () => {};
    const firstClaimed = new Promise<void>((resolve) => {
      onClaimed = resolve;
    });
    claimed.subscribe(onClaimed);
    const steps = await stepsDuring(async () => {
      const first = holdWhile(() => caller(key, principal).pay({ n: 1 }));
      await firstClaimed;
      claimed.unsubscribe(onClaimed);
      const refusal = await trpcFailure(caller(key, principal).pay({ n: 1 }));
      expect(refusal.code).toBe('CONFLICT');
      first.release();
      await first.running;
      const other = freshIdentity();
      await trpcFailure(caller(other.key, other.principal).pay({ n: -1 }));
    });
    const names = steps.map((step) => step.step);
    expect(names.filter((name) => name === 'in-flight').length).toBeGreaterThan(0);
    expect(names.filter((name) => name !== 'in-flight')).toEqual([
      'claimed',
      'stored',
      'claimed',
      'released',
    ]);
  });

  it('transactional: claimed and stored on commit; claimed and released on a rolled-back failure', async () => {
    const { caller } = setup();
    const stored = freshIdentity();
    const failed = freshIdentity();
    const steps = await stepsDuring(async () => {
      await caller(stored.key, stored.principal).note({ n: 1 });
      await trpcFailure(caller(failed.key, failed.principal).note({ n: -1 }));
    });
    expect(steps.map((step) => [step.step, step.mode])).toEqual([
      ['claimed', 'transactional'],
      ['stored', 'transactional'],
      ['claimed', 'transactional'],
      ['released', 'transactional'],
    ]);
  });
});

describe('@idem/idempotency/otel', () => {
  it('one span per keyed request, its outcome and steps; none once stopped (control)', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const stop = traceIdempotency({ tracer: provider.getTracer('test') });
    const { caller } = setup();
    const { principal, key } = freshIdentity();
    try {
      await caller(key, principal).pay({ n: 1 });
      await caller(key, principal).pay({ n: 1 });
      await trpcFailure(caller(key, principal).pay({ n: 2 }));
    } finally {
      stop();
    }
    const spans = exporter.getFinishedSpans();
    expect(spans.map((span) => span.name)).toEqual(['idempotency pay', 'idempotency pay', 'idempotency pay']);
    expect(spans.map((span) => span.attributes)).toEqual([
      {
        'idem.procedure': 'pay',
        'idem.mode': 'external',
        'idem.key_hash': logKeyHash(principal, key),
        'idem.outcome': 'executed',
        'idem.replayed': false,
      },
      expect.objectContaining({ 'idem.outcome': 'replayed', 'idem.replayed': true }),
      expect.objectContaining({ 'idem.outcome': 'mismatch', 'idem.replayed': false }),
    ]);
    expect(spans.map((span) => span.events.map((event) => event.name))).toEqual([
      ['idem.claimed', 'idem.stored'],
      ['idem.replayed'],
      ['idem.payload-mismatch'],
    ]);
    // A refusal is an answer, not a server error.
    expect(spans[2]?.status.code).toBe(0);

    const again = freshIdentity();
    await caller(again.key, again.principal).pay({ n: 1 });
    expect(exporter.getFinishedSpans()).toHaveLength(3);
  });
});
