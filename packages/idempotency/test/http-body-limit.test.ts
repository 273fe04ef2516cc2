/**
 * The plain-HTTP adapters read a bounded body (issue 29, item 2): the Fetch adapter read and fingerprinted any body
 * whole before the handler ran (64 MiB read whole, the event loop blocked up to 8.1 s on canonical JSON of its
 * base64). A route now reads at most `maxBodyBytes` (1 MiB by default): past it, 413 `idempotency_body_too_large`,
 * nothing run, nothing claimed, the rest of the body never pulled; a body that is not JSON is hashed as it
 * arrives. The controls are the same requests on a route that opts out (`maxBodyBytes: Infinity`).
 */
import type { Database } from '@idem/db';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpressIdempotency } from '../src/express/index.ts';
import { createFetchIdempotency, DEFAULT_MAX_BODY_BYTES } from '../src/fetch/index.ts';
import { IdempotencyErrorCode } from '../src/index.ts';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';
import { listen } from './support/listen.ts';

type Tx = PrismaTransactionLike<Database>;
let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable(4);
});
afterAll(async () => {
  await db.$disconnect();
});

const MiB = 1_048_576;
const CHUNK = 64 * 1024;
/**
 * What a stream pulls from its source ahead of the reader: the body's and its clone's queues (3 chunks here).
 * A bound on the stream's mechanics, not on time.
 */
const READ_AHEAD = 8 * CHUNK;

/** A body of `total` bytes made as it is pulled, counting what was pulled: no Content-Length is sent. */
function countedBody(total: number) {
  const counted = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (counted.pulled >= total) return controller.close();
      const chunk = new Uint8Array(Math.min(CHUNK, total - counted.pulled)).fill(counted.pulled % 251);
      counted.pulled += chunk.length;
      controller.enqueue(chunk);
    },
    cancel() {
      counted.cancelled = true;
    },
  });
  return { stream, counted };
}

function upload(scope: string, key: string, body: BodyInit, headers: Record<string, string> = {}) {
  return new Request('http://app.test/uploads', {
    method: 'POST',
    headers: {
      'x-principal': scope,
      'idempotency-key': key,
      'content-type': 'application/octet-stream',
      ...headers,
    },
    body,
    duplex: 'half',
  } as RequestInit);
}

describe('the Fetch adapter reads at most maxBodyBytes', () => {
  let runs = 0;
  const routeWith = (maxBodyBytes?: number) =>
    createFetchIdempotency<Tx>({
      store: createPrismaIdempotencyStore(db),
      getScope: (request) => request.headers.get('x-principal'),
    }).external(
      async (request) => {
        runs += 1;
        return Response.json({ bytes: (await request.arrayBuffer()).byteLength });
      },
      { procedure: 'uploads.create', ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }) },
    );

  it('a streamed 16 MiB body → 413 once past 1 MiB (plus the stream’s read-ahead), nothing run; the same key then works (nothing was claimed)', async () => {
    const route = routeWith();
    const scope = uniqueScope();
    const big = countedBody(16 * MiB);
    const refused = await route(upload(scope, 'k-big', big.stream));
    expect(refused.status).toBe(413);
    expect(await refused.json()).toMatchObject({
      type: 'urn:idem:problem:idempotency_body_too_large',
      status: 413,
      code: IdempotencyErrorCode.bodyTooLarge,
    });
    expect(big.counted.pulled).toBeLessThanOrEqual(DEFAULT_MAX_BODY_BYTES + READ_AHEAD);
    expect(big.counted.cancelled).toBe(true);
    const before = runs;
    const small = await route(upload(scope, 'k-big', new Uint8Array(10)));
    expect(small.status).toBe(200);
    expect(runs).toBe(before + 1);
  });

  it('a declared Content-Length past the limit → 413 before the adapter reads a byte (what was pulled is the stream’s own read-ahead)', async () => {
    const route = routeWith();
    const declared = countedBody(16 * MiB);
    const before = runs;
    const refused = await route(
      upload(uniqueScope(), 'k-declared', declared.stream, { 'content-length': String(16 * MiB) }),
    );
    expect(refused.status).toBe(413);
    expect(declared.counted.pulled).toBeLessThanOrEqual(READ_AHEAD);
    expect(runs).toBe(before);
  });

  it('CONTROL (maxBodyBytes: Infinity): the same 16 MiB body is pulled whole and run', async () => {
    const route = routeWith(Number.POSITIVE_INFINITY);
    const big = countedBody(16 * MiB);
    const response = await route(upload(uniqueScope(), 'k-control', big.stream));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ bytes: 16 * MiB });
    expect(big.counted.pulled).toBe(16 * MiB);
  });

  it('a body that is not JSON is hashed as it arrives: the same bytes replay, one other byte is another request (422)', async () => {
    const route = routeWith();
    const scope = uniqueScope();
    const bytes = new Uint8Array(300_000).fill(7);
    expect((await route(upload(scope, 'k-hash', bytes))).status).toBe(200);
    const replay = await route(upload(scope, 'k-hash', bytes.slice()));
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const changed = bytes.slice();
    changed[299_999] = 8;
    expect((await route(upload(scope, 'k-hash', changed))).status).toBe(422);
  });

  it('a negative or non-numeric maxBodyBytes is a setup error', () => {
    expect(() => routeWith(-1)).toThrow(/maxBodyBytes/);
    expect(() => routeWith(Number.NaN)).toThrow(/maxBodyBytes/);
  });
});

describe('the Express middleware applies the same limit to what its body parser left', () => {
  it('a raw body past maxBodyBytes → 413, the handler never runs; CONTROL: under the limit it runs', async () => {
    let runs = 0;
    const idempotency = createExpressIdempotency<Tx>({
      store: createPrismaIdempotencyStore(db),
      getScope: (req) => req.get('x-principal'),
    });
    const app = express();
    app.post(
      '/uploads',
      express.raw({ type: '*/*', limit: '10mb' }),
      idempotency.external({ maxBodyBytes: 100_000 }),
      (_req, res) => {
        runs += 1;
        res.sendStatus(201);
      },
    );
    const server = await listen(app);
    try {
      const url = `${server.url}/uploads`;
      const send = (key: string, size: number) =>
        fetch(url, {
          method: 'POST',
          headers: {
            'x-principal': uniqueScope(),
            'idempotency-key': key,
            'content-type': 'application/octet-stream',
          },
          body: new Uint8Array(size),
        });
      const refused = await send('k-express-big', 200_000);
      expect(refused.status).toBe(413);
      expect(((await refused.json()) as { code: string }).code).toBe(IdempotencyErrorCode.bodyTooLarge);
      expect(runs).toBe(0);
      expect((await send('k-express-small', 50_000)).status).toBe(201);
      expect(runs).toBe(1);
    } finally {
      await server.close();
    }
  });
});
