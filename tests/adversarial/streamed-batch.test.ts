/**
 * Issue 12, item 6: an idempotent mutation on a streamed response (`trpc-accept: application/jsonl`, what
 * httpBatchStreamLink sends, a batch of one). tRPC writes the status and headers of such a response before any
 * result exists, so the idempotency layer cannot set them: a replay has no `Idempotent-Replayed`, a 409 no
 * `Retry-After`, and a 422 travels as HTTP 200.
 *
 * CONTROL: the handler wired without telling the library the response is streamed (as the app was) → the
 * three broken answers above.
 * PROTECTED: `isStreamed` + `streamedResponseMeta` → HTTP 400 with a message that says what to send instead,
 * nothing claimed, nothing run; the same call without `trpc-accept` still works (200, then a replay with
 * `Idempotent-Replayed: true`).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type CheckoutServers, startCheckoutServers } from '../../apps/web/test/helpers/checkout-servers.ts';
import { connect, deferred, uniqueScope, waitUntil } from '../../packages/idempotency/test/support/db.ts';
import { fetchRequestHandler, superjson } from '../../packages/idempotency/test/support/server-peers.ts';
import { createTestTRPC, keyRows } from '../../packages/idempotency/test/support/trpc.ts';

let db: Database;
beforeAll(() => {
  db = connect();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup({ toldStreamed }: { toldStreamed: boolean }) {
  const { t, idempotency } = createTestTRPC(db);
  let executions = 0;
  let gate: Promise<void> | null = null;
  const router = t.router({
    placeOrder: t.procedure
      .concat(idempotency.external())
      .input(z.object({ sku: z.string() }))
      .mutation(async ({ input }) => {
        executions += 1;
        if (gate) await gate;
        return { orderId: executions, sku: input.sku };
      }),
  });

  function post(
    input: { sku: string },
    key: string,
    principal: string,
    { stream, via = 'trpc-accept' }: { stream: boolean; via?: 'trpc-accept' | 'accept' },
  ) {
    const headers = new Headers({ 'content-type': 'application/json', 'Idempotency-Key': key });
    // httpBatchStreamLink sends trpc-accept; tRPC also streams for a plain `Accept: application/jsonl`.
    if (stream) headers.set(via, via === 'accept' ? 'text/html, application/jsonl' : 'application/jsonl');
    // httpBatchStreamLink always sends a batch (of one here); a plain call is what httpLink sends.
    const url = stream
      ? 'http://localhost/api/trpc/placeOrder?batch=1'
      : 'http://localhost/api/trpc/placeOrder';
    const body = JSON.stringify(stream ? { 0: superjson.serialize(input) } : superjson.serialize(input));
    return fetchRequestHandler({
      endpoint: '/api/trpc',
      req: new Request(url, { method: 'POST', headers, body }),
      router,
      createContext: ({ resHeaders, info }) => ({
        headers,
        resHeaders,
        principalId: principal,
        batched: info.calls.length > 1,
        streamed: toldStreamed && info.accept === 'application/jsonl',
      }),
      ...(toldStreamed ? { responseMeta: (opts) => idempotency.streamedResponseMeta(opts) } : {}),
    });
  }

  return {
    post,
    executions: () => executions,
    setGate: (promise: Promise<void> | null) => {
      gate = promise;
    },
  };
}

describe('streamed batch of one idempotent call', () => {
  it('CONTROL: replay without Idempotent-Replayed, 409 without Retry-After, 422 as HTTP 200', async () => {
    const { post, executions, setGate } = setup({ toldStreamed: false });
    const principal = uniqueScope();
    const stream = { stream: true };

    const key = randomUUID();
    const first = await post({ sku: 'mug' }, key, principal, stream);
    expect(first.status).toBe(200);
    await first.text();
    const replay = await post({ sku: 'mug' }, key, principal, stream);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('Idempotent-Replayed')).toBeNull();
    await replay.text();
    expect(executions()).toBe(1);

    const mismatch = await post({ sku: 'lamp' }, key, principal, stream);
    expect(mismatch.status).toBe(200);
    expect(await mismatch.text()).toContain('UNPROCESSABLE_CONTENT');

    const gate = deferred();
    setGate(gate.promise);
    const slowKey = randomUUID();
    const running = post({ sku: 'mug' }, slowKey, principal, stream).then(async (response) => {
      await response.text();
      return response;
    });
    await waitUntil(() => executions() === 2);
    const conflict = await post({ sku: 'mug' }, slowKey, principal, stream);
    expect(conflict.status).toBe(200);
    expect(conflict.headers.get('Retry-After')).toBeNull();
    expect(await conflict.text()).toContain('CONFLICT');
    gate.resolve();
    await running;
  });

  it('PROTECTED: HTTP 400 that says what to send, nothing claimed, nothing run (trpc-accept or Accept)', async () => {
    const { post, executions } = setup({ toldStreamed: true });
    const principal = uniqueScope();
    for (const via of ['trpc-accept', 'accept'] as const) {
      const response = await post({ sku: 'mug' }, randomUUID(), principal, { stream: true, via });
      expect(response.status, via).toBe(400);
      const text = await response.text();
      expect(text).toContain('BAD_REQUEST');
      expect(text).toContain('cannot be sent on a streamed response');
      expect(text).toContain('without trpc-accept');
    }
    expect(executions()).toBe(0);
    expect(await keyRows(db, principal)).toEqual([]);
  });

  it('PROTECTED: the same call without trpc-accept works: 200, then a replay with Idempotent-Replayed', async () => {
    const { post, executions } = setup({ toldStreamed: true });
    const principal = uniqueScope();
    const key = randomUUID();
    const first = await post({ sku: 'mug' }, key, principal, { stream: false });
    expect(first.status).toBe(200);
    const firstBody = await first.text();
    const replay = await post({ sku: 'mug' }, key, principal, { stream: false });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await replay.text()).toBe(firstBody);
    expect(executions()).toBe(1);
  });
});

describe("the app's route", () => {
  let servers: CheckoutServers;
  beforeAll(async () => {
    await seedDatabase(db);
    servers = await startCheckoutServers(process.env.DATABASE_URL ?? '');
  });
  afterAll(async () => {
    await servers?.close();
  });

  it('a streamed checkout.placeOrder → HTTP 400, nothing claimed: the same key sent plainly then runs', async () => {
    const key = randomUUID();
    const order = {
      items: [{ sku: 'MUG-STONE', quantity: 1 }],
      email: 'alice@example.com',
      cardToken: 'tok_visa',
    };
    const headers = {
      'content-type': 'application/json',
      authorization: `Bearer ${demoUsers[0]?.token}`,
      'idempotency-key': key,
    };
    const streamed = await fetch(`${servers.app.url}/api/trpc/checkout.placeOrder?batch=1`, {
      method: 'POST',
      headers: { ...headers, 'trpc-accept': 'application/jsonl' },
      body: JSON.stringify({ 0: superjson.serialize(order) }),
    });
    expect(streamed.status).toBe(400);
    expect(await streamed.text()).toContain('cannot be sent on a streamed response');

    const plain = await fetch(`${servers.app.url}/api/trpc/checkout.placeOrder`, {
      method: 'POST',
      headers,
      body: JSON.stringify(superjson.serialize(order)),
    });
    expect(plain.status).toBe(200);
    expect(plain.headers.get('Idempotent-Replayed')).toBeNull();
  });
});
