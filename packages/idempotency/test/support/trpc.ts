/** A tRPC setup of the tests' own, like an app's: superjson, a principal in the context, fetch-style headers. */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { initTRPC, TRPCError } from '@trpc/server';
import superjson from 'superjson';
import { expect } from 'vitest';
import type { IdempotencyOptions, IdempotencyStore } from '../../src/index.ts';
import {
  createPrismaIdempotencyStore,
  type PrismaStoreOptions,
  type PrismaTransactionLike,
} from '../../src/prisma/index.ts';
import { createIdempotency, type IdempotencyEvent } from '../../src/trpc/index.ts';
import { uniqueScope } from './db.ts';

export interface TestContext {
  headers: Headers;
  resHeaders: Headers;
  principalId: string | null;
  /** Set by the HTTP adapter when the request carried several operations. */
  batched?: boolean;
  /** Set by the HTTP adapter when the response is streamed (`trpc-accept: application/jsonl`). */
  streamed?: boolean;
}

type TestStore = IdempotencyStore<PrismaTransactionLike<Database>>;

/**
 * `wrapStore`: a test-supplied store around the Prisma one (a control that changes what the handler sees).
 * `storeOptions`: e.g. `{ leaseRenewal: false }`, so that a lease ends under a running request.
 */
export function createTestTRPC(
  db: Database,
  defaults?: IdempotencyOptions,
  {
    wrapStore,
    storeOptions,
  }: { wrapStore?: (store: TestStore) => TestStore; storeOptions?: PrismaStoreOptions } = {},
) {
  // isDev: false → no stack in error shapes, so an error's HTTP body is the same on the first response and
  // on its replays.
  const t = initTRPC.context<TestContext>().create({ transformer: superjson, isDev: false });
  const events: IdempotencyEvent[] = [];
  const store = createPrismaIdempotencyStore(db, storeOptions);
  const idempotency = createIdempotency<TestContext, PrismaTransactionLike<Database>>({
    store: wrapStore ? wrapStore(store) : store,
    transformer: superjson,
    getScope: (ctx) => ctx.principalId,
    getRequestHeaders: (ctx) => ctx.headers,
    getResponseHeaders: (ctx) => ctx.resHeaders,
    isBatched: (ctx) => ctx.batched === true,
    isStreamed: (ctx) => ctx.streamed === true,
    defaults,
    onEvent: (event) => events.push(event),
  });
  return { t, idempotency, events, store };
}

/** One request's context: the key header (null → none), the principal and fresh response headers. */
export function requestContext(key: string | null, principalId: string | null): TestContext {
  const headers = new Headers();
  if (key !== null) headers.set('Idempotency-Key', key);
  return { headers, resHeaders: new Headers(), principalId };
}

/** A fresh principal and key for one test. */
export function freshIdentity() {
  return { principal: uniqueScope(), key: randomUUID() };
}

/** Awaits a promise that must reject with a TRPCError, and returns that error. */
export async function trpcFailure(promise: Promise<unknown>): Promise<TRPCError> {
  const outcome = await promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  if (outcome.ok) throw new Error(`expected a TRPCError, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.error).toBeInstanceOf(TRPCError);
  return outcome.error as TRPCError;
}

/** Rows the store holds for a principal. */
export async function keyRows(db: Database, scope: string) {
  return db.$queryRawUnsafe<
    Array<{ procedure: string; key: string; state: string; response: string | null; replay_count: number }>
  >(
    'select procedure, key, state, response, replay_count from idempotency_keys where scope = $1 order by created_at',
    scope,
  );
}
