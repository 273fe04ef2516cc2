/**
 * The Fetch adapter's body reading (src/fetch/handler.ts), on the run's Postgres: a JSON body that arrives in
 * several chunks is the same request as in one, a request without a body is fingerprinted as none, and a
 * declared length past the limit on a request without a body is still a 413.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetchIdempotency } from '../src/fetch/index.ts';
import { fingerprintHttpRequest } from '../src/http/fingerprint.ts';
import { IdempotencyErrorCode } from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable(2);
});
afterAll(async () => {
  await db.$disconnect();
});

function route() {
  const fingerprints: string[] = [];
  const handler = createFetchIdempotency({
    store: createPrismaIdempotencyStore(db),
    getScope: (request) => request.headers.get('x-principal'),
  }).external(
    async (_request, { fingerprint }) => {
      fingerprints.push(fingerprint);
      return new Response('ok', { status: 201 });
    },
    { procedure: 'orders.create', maxBodyBytes: 100 },
  );
  return { handler, fingerprints };
}

const chunks = (...parts: string[]) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const part of parts) controller.enqueue(new TextEncoder().encode(part));
      controller.close();
    },
  });

describe('the Fetch adapter reads the body', () => {
  it('a JSON body in three chunks: the bytes put together in order, the same request as in one piece', async () => {
    const { handler, fingerprints } = route();
    const scope = uniqueScope();
    const post = (body: BodyInit) =>
      handler(
        new Request('http://app.test/orders', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-principal': scope, 'idempotency-key': 'k' },
          body,
          duplex: 'half',
        } as RequestInit),
      );
    const first = await post(chunks('{"sku":', '"book","quan', 'tity":2}'));
    expect(first.status).toBe(201);
    expect(fingerprints).toEqual([
      fingerprintHttpRequest('orders.create', 'POST /orders', {
        kind: 'json',
        value: { sku: 'book', quantity: 2 },
      }),
    ]);
    const replay = await post('{"quantity":2,"sku":"book"}');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });

  it('no body: fingerprinted as none', async () => {
    const { handler, fingerprints } = route();
    const response = await handler(
      new Request('http://app.test/orders', {
        method: 'POST',
        headers: { 'x-principal': uniqueScope(), 'idempotency-key': 'k' },
      }),
    );
    expect(response.status).toBe(201);
    expect(fingerprints).toEqual([fingerprintHttpRequest('orders.create', 'POST /orders', { kind: 'none' })]);
  });

  it('a declared Content-Length past the limit on a request without a body: 413, nothing run', async () => {
    const { handler, fingerprints } = route();
    const response = await handler(
      new Request('http://app.test/orders', {
        method: 'POST',
        headers: { 'x-principal': uniqueScope(), 'idempotency-key': 'k', 'content-length': '101' },
      }),
    );
    expect(response.status).toBe(413);
    expect(await response.json()).toMatchObject({ code: IdempotencyErrorCode.bodyTooLarge });
    expect(fingerprints).toEqual([]);
  });
});
