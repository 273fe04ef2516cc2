/**
 * The plain HTTP guard (src/http/guard.ts) through the Fetch adapter, on the run's Postgres: the route's
 * settings checked when the route is built (maxBodyBytes, replayedHeaders, problemDocsUrl), the default route
 * name and the fingerprinted target, and where an error goes — the handler's to onError (console.error by
 * default), a transaction that cannot open to a 503 with the database's error to onError.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createFetchIdempotency } from '../src/fetch/index.ts';
import { fingerprintHttpRequest } from '../src/http/fingerprint.ts';
import { DEFAULT_MAX_BODY_BYTES, NEVER_STORED_HEADERS } from '../src/http/guard.ts';
import { IdempotencyErrorCode } from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable(1);
});
afterAll(async () => {
  await db.$disconnect();
});

function adapter(config: { onError?: (error: unknown) => void; problemDocsUrl?: string } = {}) {
  return createFetchIdempotency({
    store: createPrismaIdempotencyStore(db),
    getScope: (request) => request.headers.get('x-principal'),
    ...config,
  });
}

function request(scope: string, key: string, init: { method?: string; body?: string; target?: string } = {}) {
  return new Request(`http://app.test${init.target ?? '/orders'}`, {
    method: init.method ?? 'POST',
    headers: { 'content-type': 'application/json', 'x-principal': scope, 'idempotency-key': key },
    body: init.body ?? '{"sku":"book"}',
  });
}

describe('route settings, checked when the route is built', () => {
  it('maxBodyBytes: a negative number or NaN is refused; 0 and Infinity are sizes', () => {
    const idempotency = adapter();
    const ok = async () => new Response('ok');
    expect(() => idempotency.external(ok, { maxBodyBytes: -1 })).toThrow(
      new TypeError('maxBodyBytes must be a number of bytes (0 or more), not -1.'),
    );
    expect(() => idempotency.transactional(ok, { maxBodyBytes: Number.NaN })).toThrow(/not NaN\.$/);
    expect(() => idempotency.external(ok, { maxBodyBytes: 0 })).not.toThrow();
    expect(() => idempotency.external(ok, { maxBodyBytes: Number.POSITIVE_INFINITY })).not.toThrow();
    expect(DEFAULT_MAX_BODY_BYTES).toBe(1_048_576);
  });

  it('maxBodyBytes 0: any body is 413, an empty one passes', async () => {
    const route = adapter().external(async () => new Response('ok', { status: 201 }), { maxBodyBytes: 0 });
    const scope = uniqueScope();
    const refused = await route(request(scope, 'k-0'));
    expect(refused.status).toBe(413);
    expect(await refused.json()).toMatchObject({ code: IdempotencyErrorCode.bodyTooLarge });
    expect((await route(request(scope, 'k-empty', { body: '' }))).status).toBe(201);
  });

  it('the default limit: a body of exactly 1 MiB passes, one byte more is 413', async () => {
    const route = adapter().external(async () => new Response('ok', { status: 201 }));
    const scope = uniqueScope();
    const json = (size: number) => `"${'x'.repeat(size - 2)}"`;
    expect((await route(request(scope, 'k-max', { body: json(DEFAULT_MAX_BODY_BYTES) }))).status).toBe(201);
    expect((await route(request(scope, 'k-over', { body: json(DEFAULT_MAX_BODY_BYTES + 1) }))).status).toBe(
      413,
    );
  });

  it('replayedHeaders naming a credential header (any case) is refused, each named', () => {
    const idempotency = adapter();
    const ok = async () => new Response('ok');
    expect(NEVER_STORED_HEADERS).toEqual(['set-cookie', 'authorization', 'proxy-authorization', 'cookie']);
    expect(() =>
      idempotency.external(ok, { replayedHeaders: ['Content-Type', 'Set-Cookie', 'AUTHORIZATION'] }),
    ).toThrow(
      new TypeError(
        "replayedHeaders may not name set-cookie, authorization: a replay would hand the first client's credentials to whoever sends its key.",
      ),
    );
    for (const name of ['Proxy-Authorization', 'cookie'])
      expect(() => idempotency.transactional(ok, { replayedHeaders: [name] }), name).toThrow(TypeError);
  });

  it('replayedHeaders are matched case-insensitively, and replace the default list', async () => {
    const route = adapter().external(
      async () =>
        new Response('ok', {
          status: 201,
          headers: { 'x-order-id': '7', location: '/orders/7', etag: '"7"' },
        }),
      { replayedHeaders: ['X-Order-ID'] },
    );
    const scope = uniqueScope();
    await route(request(scope, 'k-h'));
    const replay = await route(request(scope, 'k-h'));
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('x-order-id')).toBe('7');
    expect(replay.headers.get('location')).toBeNull();
    expect(replay.headers.get('etag')).toBeNull();
  });

  it('problemDocsUrl: http and https URLs are taken; a space or a < in it is refused', () => {
    expect(() => adapter({ problemDocsUrl: 'http://docs.test/errors' })).not.toThrow();
    expect(() => adapter({ problemDocsUrl: 'https://docs.test/errors' })).not.toThrow();
    for (const bad of ['https://docs.test/a b', 'https://docs.test/<x', 'mailto:docs@example.com'])
      expect(() => adapter({ problemDocsUrl: bad }), bad).toThrow(
        new TypeError(
          `problemDocsUrl must be an absolute http(s) URL without a fragment, not ${JSON.stringify(bad)}.`,
        ),
      );
  });
});

describe('the route name and the fingerprinted target', () => {
  it('default name: the method upper-cased and the path without the query; the target: method, path and query', async () => {
    const seen: Array<{ procedure: string; fingerprint: string }> = [];
    const idempotency = createFetchIdempotency({
      store: createPrismaIdempotencyStore(db),
      getScope: (req) => req.headers.get('x-principal'),
      onEvent: (event) => seen.push({ procedure: event.procedure, fingerprint: '' }),
    });
    const route = idempotency.external(async (_request, { fingerprint }) => {
      seen.push({ procedure: '', fingerprint });
      return new Response('ok', { status: 201 });
    });
    const scope = uniqueScope();
    // `patch` is not one of the methods a Request upper-cases itself.
    const response = await route(request(scope, 'k-name', { method: 'patch', target: '/orders/7?dry=1' }));
    expect(response.status).toBe(201);
    expect(seen).toEqual([
      {
        procedure: '',
        fingerprint: fingerprintHttpRequest('PATCH /orders/7', 'PATCH /orders/7?dry=1', {
          kind: 'json',
          value: { sku: 'book' },
        }),
      },
      { procedure: 'PATCH /orders/7', fingerprint: '' },
    ]);
    const stored = await createPrismaIdempotencyStore(db).find({
      scope,
      procedure: 'PATCH /orders/7',
      key: 'k-name',
    });
    expect(stored?.state).toBe('completed');
  });

  it('a named route: its name, in the store and in the fingerprint', async () => {
    let fingerprint = '';
    const route = adapter().external(
      async (_request, context) => {
        fingerprint = context.fingerprint;
        return new Response('ok', { status: 201 });
      },
      { procedure: 'orders.create' },
    );
    const scope = uniqueScope();
    await route(request(scope, 'k-named'));
    expect(fingerprint).toBe(
      fingerprintHttpRequest('orders.create', 'POST /orders', { kind: 'json', value: { sku: 'book' } }),
    );
    expect(
      await createPrismaIdempotencyStore(db).find({ scope, procedure: 'orders.create', key: 'k-named' }),
    ).toMatchObject({ state: 'completed' });
  });
});

describe('where errors go', () => {
  it('no onError: a handler’s error goes to console.error, the client gets the generic 500', async () => {
    const spy = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const failure = new Error('handler failed: secret');
      const route = adapter().external(async () => {
        throw failure;
      });
      const response = await route(request(uniqueScope(), 'k-500'));
      expect(response.status).toBe(500);
      expect(await response.text()).not.toMatch(/secret/);
      expect(spy).toHaveBeenCalledWith(failure);
    } finally {
      spy.mockRestore();
    }
  });

  it('an idempotency refusal is not an error: nothing goes to onError', async () => {
    const errors: unknown[] = [];
    const route = adapter({ onError: (error) => errors.push(error) }).external(
      async () => new Response('ok'),
    );
    const scope = uniqueScope();
    await route(request(scope, 'k-422'));
    expect((await route(request(scope, 'k-422', { body: '{"sku":"pen"}' }))).status).toBe(422);
    expect(errors).toEqual([]);
  });

  it('a transaction that cannot open → 503 + Retry-After; the database’s own error (not the 503) goes to onError', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const route = adapter({ onError: (error) => errors.push(error) }).transactional(
      async () => {
        runs += 1;
        return new Response('ok', { status: 201 });
      },
      { transactionTimeoutMs: 300, retryAfterSeconds: 2 },
    );
    // The pool's one connection, held in a transaction until released.
    let release!: () => void;
    let holding!: () => void;
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const done = db.$transaction(
      async (tx) => {
        await tx.$queryRawUnsafe('select 1');
        holding();
        await new Promise<void>((resolve) => {
          release = resolve;
        });
      },
      { maxWait: 10_000, timeout: 60_000 },
    );
    await held;
    let response: Response;
    try {
      response = await route(request(uniqueScope(), 'k-503'));
    } finally {
      release();
      await done;
    }
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('2');
    expect(await response.json()).toMatchObject({ code: IdempotencyErrorCode.storeUnavailable });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'P2028' });
    expect(runs).toBe(0);
  });
});
