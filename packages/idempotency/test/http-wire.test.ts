/**
 * The plain HTTP wire, row by row: every status the adapters answer, its RFC 9457 problem `type`, the key as an
 * sf-String or a bare token, and replays byte for byte with the headers that matter — through the Fetch
 * adapter called with real `Request`s, on the run's Postgres, and through Express over real HTTP for what only
 * its response capture does (streamed writes, binary bodies, repeated headers, a missing body parser).
 */
import type { Database } from '@idem/db';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpressIdempotency } from '../src/express/index.ts';
import { createFetchIdempotency, problemTypeOf, unstableScope } from '../src/fetch/index.ts';
import { responseToStore } from '../src/http/stored.ts';
import { DEFAULT_OPTIONS, IdempotencyErrorCode } from '../src/index.ts';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, uniqueScope, uniqueTableName } from './support/db.ts';
import { listen } from './support/listen.ts';

type Tx = PrismaTransactionLike<Database>;
let db: Database;
let table: string;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await connectWithOwnTable(8);
  table = uniqueTableName('wire_rows');
  await db.$executeRawUnsafe(`create table ${table} (id serial primary key, scope text not null)`);
});
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
  await db.$disconnect();
});

const rowsOf = async (scope: string) =>
  Number(
    (
      await db.$queryRawUnsafe<Array<{ n: number }>>(
        `select count(*)::int as n from ${table} where scope = $1`,
        scope,
      )
    )[0]?.n,
  );

function fetchApp(options: { onError?: (error: unknown) => void } = {}) {
  const errors: unknown[] = [];
  const idempotency = createFetchIdempotency<Tx>({
    store: createPrismaIdempotencyStore(db),
    getScope: (request) => {
      const principal = request.headers.get('x-principal');
      return principal === 'guest-new' ? unstableScope('Send the guest cookie you were given.') : principal;
    },
    defaults: { maxInFlightPerScope: 2 },
    onError: options.onError ?? ((error) => errors.push(error)),
  });
  return { idempotency, errors };
}

function post(scope: string | null, key: string | null, body: string, headers: Record<string, string> = {}) {
  return new Request('http://app.test/orders', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(scope === null ? {} : { 'x-principal': scope }),
      ...(key === null ? {} : { 'idempotency-key': key }),
      ...headers,
    },
    body,
  });
}

async function problemOf(response: Response) {
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  return (await response.json()) as {
    type: string;
    title: string;
    status: number;
    detail?: string;
    code?: string;
  };
}

describe('the Fetch adapter on the wire', () => {
  // Built once the database is connected (beforeAll), used by every test of this block.
  let idempotency: ReturnType<typeof fetchApp>['idempotency'];
  let errors: unknown[];
  let route: (request: Request) => Promise<Response>;
  let runs = 0;
  beforeAll(() => {
    ({ idempotency, errors } = fetchApp());
    route = idempotency.transactional(
      async (request, { tx, scope }) => {
        runs += 1;
        const body = (await request.json()) as { fail?: string; status?: number };
        await tx.$executeRawUnsafe(`insert into ${table} (scope) values ($1)`, scope);
        if (body.fail === 'throw') throw new Error('connection to 10.0.0.7 refused: password=hunter2');
        if (body.status) return Response.json({ refused: body.status }, { status: body.status });
        return new Response(JSON.stringify({ run: runs, at: Date.now() }), {
          status: 201,
          headers: {
            'content-type': 'application/vnd.order+json; charset=utf-8',
            location: `/orders/${runs}`,
            etag: `"v${runs}"`,
            'set-cookie': 'session=abc',
            'x-request-id': `req-${runs}`,
          },
        });
      },
      { procedure: 'orders.create' },
    );
  });

  it('first request: the handler’s answer as is; a replay: status, Content-Type, Location, ETag and body byte for byte, Idempotent-Replayed: true, nothing else of the first', async () => {
    const scope = uniqueScope();
    const first = await route(post(scope, 'k-replay', '{"sku":"book"}'));
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.headers.get('set-cookie')).toBe('session=abc');
    const firstBody = new Uint8Array(await first.arrayBuffer());

    const replay = await route(post(scope, 'k-replay', '{"sku":"book"}'));
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    for (const name of ['content-type', 'location', 'etag'])
      expect(replay.headers.get(name), name).toBe(first.headers.get(name));
    expect(replay.headers.get('set-cookie')).toBeNull();
    expect(replay.headers.get('x-request-id')).toBeNull();
    expect(new Uint8Array(await replay.arrayBuffer())).toEqual(firstBody);
    expect(await rowsOf(scope)).toBe(1);
  });

  it('the key as an sf-String ("k") is the bare token k; reordered JSON keys are the same payload', async () => {
    const scope = uniqueScope();
    const bare = await route(post(scope, 'k-sf', '{"a":1,"b":[1,2]}'));
    const quoted = await route(post(scope, '"k-sf"', '{ "b": [1, 2], "a": 1 }'));
    expect(quoted.headers.get('idempotent-replayed')).toBe('true');
    expect(await quoted.text()).toBe(await bare.text());
  });

  it.each([
    ['no header', null, IdempotencyErrorCode.missingKey],
    ['an empty value', '', IdempotencyErrorCode.malformedKey],
    ['a list (the header sent twice)', 'a, b', IdempotencyErrorCode.malformedKey],
    ['an sf-String with parameters', '"a";p=1', IdempotencyErrorCode.malformedKey],
    ['256 characters', 'k'.repeat(256), IdempotencyErrorCode.malformedKey],
  ])('%s → 400 problem %s, nothing run', async (_name, key, code) => {
    const scope = uniqueScope();
    const response = await route(post(scope, key, '{}'));
    expect(response.status).toBe(400);
    expect(await problemOf(response)).toMatchObject({
      type: problemTypeOf(code),
      status: 400,
      code,
      detail: expect.stringContaining('Idempotency-Key'),
    });
    expect(await rowsOf(scope)).toBe(0);
  });

  it('same key, another payload → 422 problem idempotency_key_reused, no Retry-After, the first still replays', async () => {
    const scope = uniqueScope();
    await route(post(scope, 'k-422', '{"sku":"book"}'));
    const other = await route(post(scope, 'k-422', '{"sku":"pen"}'));
    expect(other.status).toBe(422);
    expect(other.headers.get('retry-after')).toBeNull();
    expect(await problemOf(other)).toMatchObject({
      type: 'urn:idem:problem:idempotency_key_reused',
      status: 422,
    });
    expect(await rowsOf(scope)).toBe(1);
  });

  it('one route name at two paths: the same key and body sent to another path (or query) → 422, to the same path → replay', async () => {
    const pay = idempotency.external(
      async (request) => Response.json({ paid: new URL(request.url).pathname }),
      {
        procedure: 'orders.pay',
      },
    );
    const scope = uniqueScope();
    const at = (target: string) =>
      new Request(`http://app.test${target}`, {
        method: 'POST',
        headers: { 'x-principal': scope, 'idempotency-key': 'k-pay', 'content-type': 'application/json' },
        body: '{}',
      });
    expect((await pay(at('/orders/7/pay'))).status).toBe(200);
    expect((await pay(at('/orders/7/pay'))).headers.get('idempotent-replayed')).toBe('true');
    for (const other of ['/orders/8/pay', '/orders/7/pay?amount=2']) {
      const response = await pay(at(other));
      expect(response.status, other).toBe(422);
      expect((await problemOf(response)).code).toBe(IdempotencyErrorCode.keyReused);
    }
  });

  it('no principal → 401 (about:blank); an unstable one → 400 idempotency_scope_unstable', async () => {
    const anonymous = await route(post(null, 'k-401', '{}'));
    expect(anonymous.status).toBe(401);
    expect(await problemOf(anonymous)).toMatchObject({
      type: 'about:blank',
      title: 'Unauthorized',
      status: 401,
    });
    const guest = await route(post('guest-new', 'k-guest', '{}'));
    expect(guest.status).toBe(400);
    expect(await problemOf(guest)).toMatchObject({
      type: problemTypeOf(IdempotencyErrorCode.unstableScope),
      detail: expect.stringContaining('Send the guest cookie'),
    });
  });

  it('a body that says JSON and is not, or holds a lone surrogate → 400 idempotency_input_invalid', async () => {
    const scope = uniqueScope();
    for (const body of ['{"sku":', '{"sku":"\\ud800"}']) {
      const response = await route(post(scope, `k-bad-${body.length}`, body));
      expect(response.status).toBe(400);
      expect((await problemOf(response)).type).toBe(problemTypeOf(IdempotencyErrorCode.invalidInput));
    }
    expect(await rowsOf(scope)).toBe(0);
  });

  it('the handler throws → a generic 500 problem (the cause to onError, never in the body), its write rolled back, the key free', async () => {
    const scope = uniqueScope();
    const failed = await route(post(scope, 'k-500', '{"fail":"throw"}'));
    expect(failed.status).toBe(500);
    const text = await failed.text();
    expect(JSON.parse(text)).toEqual({ type: 'about:blank', title: 'Internal Server Error', status: 500 });
    expect(text).not.toMatch(/hunter2|10\.0\.0\.7/);
    expect(String(errors.at(-1))).toMatch(/hunter2/);
    expect(await rowsOf(scope)).toBe(0);
    // Nothing was stored, so the key is free: the same key runs again, even with another payload.
    const retry = await route(post(scope, 'k-500', '{"sku":"book"}'));
    expect(retry.status).toBe(201);
  });

  it('a stored business error (402) replays byte for byte with its writes rolled back; a 400 of the handler is not stored', async () => {
    const scope = uniqueScope();
    const declined = await route(post(scope, 'k-402', '{"status":402}'));
    expect(declined.status).toBe(402);
    const again = await route(post(scope, 'k-402', '{"status":402}'));
    expect(again.status).toBe(402);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(await declined.text());
    expect(await rowsOf(scope)).toBe(0);

    const invalid = await route(post(scope, 'k-400', '{"status":400}'));
    expect(invalid.status).toBe(400);
    const afterFix = await route(post(scope, 'k-400', '{"status":400}'));
    expect(afterFix.headers.get('idempotent-replayed')).toBeNull();
  });

  it('control: the same handler writing through the client instead of tx keeps its write when it fails', async () => {
    const scope = uniqueScope();
    const careless = idempotency.transactional(async () => {
      await db.$executeRawUnsafe(`insert into ${table} (scope) values ($1)`, scope);
      throw new Error('boom');
    });
    expect((await careless(post(scope, 'k-careless', '{}'))).status).toBe(500);
    expect(await rowsOf(scope)).toBe(1);
  });
});

describe('external mode on the wire', () => {
  it('a duplicate while the first runs → 409 + Retry-After (idempotency_request_in_progress); a new key past the cap → 429', async () => {
    const { idempotency } = fetchApp();
    const release = deferred();
    const route = idempotency.external(async () => {
      await release.promise;
      return new Response(null, { status: 204, headers: { etag: '"e1"' } });
    });
    const scope = uniqueScope();
    const first = route(post(scope, 'k-a', '{}'));
    const second = route(post(scope, 'k-b', '{}'));
    // Both claims are committed before the handler runs; wait until the store holds them.
    const store = createPrismaIdempotencyStore(db);
    for (let tries = 0; tries < 200; tries += 1) {
      const found = await Promise.all(
        ['k-a', 'k-b'].map((key) => store.find({ scope, procedure: 'POST /orders', key })),
      );
      if (found.every(Boolean)) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const duplicate = await route(post(scope, 'k-a', '{}'));
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers.get('retry-after')).toBe(String(DEFAULT_OPTIONS.retryAfterSeconds));
    expect(await problemOf(duplicate)).toMatchObject({
      type: problemTypeOf(IdempotencyErrorCode.inProgress),
    });
    const third = await route(post(scope, 'k-c', '{}'));
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await problemOf(third)).toMatchObject({
      type: problemTypeOf(IdempotencyErrorCode.tooManyInFlight),
    });

    release.resolve();
    expect((await first).status).toBe(204);
    await second;
    const replay = await route(post(scope, 'k-a', '{}'));
    expect(replay.status).toBe(204);
    expect(replay.headers.get('etag')).toBe('"e1"');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toBeNull();
  });
});

describe('external mode: the lease, its renewal and its fencing, through the Fetch adapter', () => {
  /**
   * A handler held past its 2 s lease, and a duplicate sent once the database's clock is past that whole first
   * lease (claimed plus 2 s, renewed or not): does the duplicate run it again? The first run waits on a gate, so
   * no wait of the test's can be outrun by the handler on a slow machine.
   */
  async function slowerThanTheLease(store: ReturnType<typeof createPrismaIdempotencyStore<Database>>) {
    let runs = 0;
    const gate = deferred();
    const idempotency = createFetchIdempotency({
      store,
      getScope: (request) => request.headers.get('x-principal'),
    });
    const route = idempotency.external(
      async () => {
        runs += 1;
        if (runs === 1) await gate.promise;
        return Response.json({ run: runs }, { status: 201 });
      },
      { leaseSeconds: 2 },
    );
    const scope = uniqueScope();
    const first = route(post(scope, 'k-lease', '{}'));
    await expect
      .poll(
        async () =>
          (
            await db.$queryRawUnsafe<Array<{ over: boolean }>>(
              "select now() > created_at + interval '2.2 seconds' as over from idempotency_keys where scope = $1",
              scope,
            )
          )[0]?.over === true,
        { timeout: 30_000 },
      )
      .toBe(true);
    const duplicate = await route(post(scope, 'k-lease', '{}'));
    gate.resolve();
    return { first: await first, duplicate, runs };
  }

  it('a live handler slower than its lease keeps its key (renewed): the duplicate gets 409, one run', async () => {
    const { first, duplicate, runs } = await slowerThanTheLease(createPrismaIdempotencyStore(db));
    expect(first.status).toBe(201);
    expect(duplicate.status).toBe(409);
    expect(await problemOf(duplicate)).toMatchObject({ code: IdempotencyErrorCode.inProgress });
    expect(runs).toBe(1);
  }, 60_000);

  it('control: the same store without renewLease loses the key mid-run: the duplicate takes over and runs it again, the first is fenced (409 lease lost)', async () => {
    const withoutRenewal = createPrismaIdempotencyStore(db, { leaseRenewal: false });
    const { first, duplicate, runs } = await slowerThanTheLease(withoutRenewal);
    expect(runs).toBe(2);
    expect(first.status).toBe(409);
    expect(await problemOf(first)).toMatchObject({ type: problemTypeOf(IdempotencyErrorCode.leaseLost) });
    expect(duplicate.status).toBe(201);
  }, 60_000);
});

describe('onEvent', () => {
  it('reports each request’s outcome under the route’s name, with a key hash (never the key)', async () => {
    const events: Array<{ procedure: string; mode: string; outcome: string; keyHash: string | null }> = [];
    const idempotency = createFetchIdempotency({
      store: createPrismaIdempotencyStore(db),
      getScope: (request) => request.headers.get('x-principal'),
      onEvent: (event) => events.push(event),
    });
    const route = idempotency.transactional(async () => new Response('ok'));
    const scope = uniqueScope();
    await route(post(scope, 'k-event', '{"a":1}'));
    await route(post(scope, 'k-event', '{"a":1}'));
    await route(post(scope, 'k-event', '{"a":2}'));
    await route(post(scope, null, '{}'));
    expect(events.map(({ procedure, mode, outcome }) => [procedure, mode, outcome])).toEqual([
      ['POST /orders', 'transactional', 'executed'],
      ['POST /orders', 'transactional', 'replayed'],
      ['POST /orders', 'transactional', 'mismatch'],
      ['POST /orders', 'transactional', 'rejected'],
    ]);
    expect(events[0]?.keyHash).toMatch(/^[0-9a-f]+$/);
    expect(JSON.stringify(events)).not.toContain('k-event');
  });
});

describe('responseToStore: which answers are stored', () => {
  const answer = (status: number, body = 'x') => ({
    status,
    headers: [
      ['Content-Type', 'text/plain'],
      ['Set-Cookie', 'a=1'],
    ] as const,
    body: new TextEncoder().encode(body),
  });
  const replayed = ['content-type', 'location', 'etag'];

  it.each([200, 201, 204, 303])('%i: stored as the outcome, with only the replayed headers', (status) => {
    expect(responseToStore(answer(status), DEFAULT_OPTIONS, replayed)).toEqual({
      kind: 'output',
      httpStatus: status,
      body: 'x',
      headers: { 'content-type': 'text/plain' },
    });
  });

  it.each([
    [402, 'PAYMENT_REQUIRED'],
    [403, 'FORBIDDEN'],
    [404, 'NOT_FOUND'],
    [412, 'PRECONDITION_FAILED'],
    [415, 'UNSUPPORTED_MEDIA_TYPE'],
    [422, 'UNPROCESSABLE_CONTENT'],
  ])('%i: a business error (%s), stored with its body', (status, code) => {
    expect(responseToStore(answer(status), DEFAULT_OPTIONS, replayed)).toMatchObject({
      kind: 'error',
      httpStatus: status,
      code,
      body: 'x',
    });
  });

  it.each([400, 401, 408, 409, 410, 429, 500, 502, 503])('%i: not stored (the key is released)', (status) => {
    expect(responseToStore(answer(status), DEFAULT_OPTIONS, replayed)).toBeNull();
  });

  it('storedErrorCodes decides, with HTTP_<status> for a status tRPC has no name for', () => {
    const options = { ...DEFAULT_OPTIONS, storedErrorCodes: ['HTTP_410'] };
    expect(responseToStore(answer(410), options, replayed)).toMatchObject({ code: 'HTTP_410' });
    expect(responseToStore(answer(402), options, replayed)).toBeNull();
  });

  it('a body that is not UTF-8 is kept as base64, so its bytes come back exactly', () => {
    const bytes = new Uint8Array([0xff, 0x00, 0xc3, 0x28]);
    expect(responseToStore({ ...answer(200), body: bytes }, DEFAULT_OPTIONS, replayed)).toMatchObject({
      body: Buffer.from(bytes).toString('base64'),
      bodyEncoding: 'base64',
    });
  });
});

describe('the Express middleware on the wire', () => {
  async function serveExpress(
    build: (app: express.Express, idempotency: ReturnType<typeof createExpressIdempotency<Tx>>) => void,
  ) {
    const errors: unknown[] = [];
    const idempotency = createExpressIdempotency<Tx>({
      store: createPrismaIdempotencyStore(db),
      getScope: (req) => req.get('x-principal'),
      onError: (error) => errors.push(error),
    });
    const app = express();
    build(app, idempotency);
    const { url, close } = await listen(app);
    closers.push(close);
    return { url, errors };
  }

  it('a streamed binary body (writeHead, write, end) and repeated Set-Cookie: sent as written, replayed byte for byte', async () => {
    let runs = 0;
    const { url } = await serveExpress((app, idempotency) => {
      app.post('/files', express.raw({ type: '*/*' }), idempotency.external(), (_req, res) => {
        runs += 1;
        res.append('set-cookie', ['a=1', 'b=2']);
        res.writeHead(201, { 'content-type': 'application/octet-stream', location: `/files/${runs}` });
        res.write(Buffer.from([0xff, 0x00]));
        res.write(Buffer.from([0xc3, 0x28, runs]));
        res.end();
      });
    });
    const scope = uniqueScope();
    const send = () =>
      fetch(`${url}/files`, {
        method: 'POST',
        headers: {
          'x-principal': scope,
          'idempotency-key': 'k-bin',
          'content-type': 'application/octet-stream',
        },
        body: new Uint8Array([1, 2, 3]),
      });
    const first = await send();
    expect(first.status).toBe(201);
    expect(first.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    const firstBytes = new Uint8Array(await first.arrayBuffer());
    expect([...firstBytes]).toEqual([0xff, 0x00, 0xc3, 0x28, 1]);
    const replay = await send();
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('location')).toBe('/files/1');
    expect(replay.headers.get('content-type')).toBe('application/octet-stream');
    expect(replay.headers.getSetCookie()).toEqual([]);
    expect(new Uint8Array(await replay.arrayBuffer())).toEqual(firstBytes);
    expect(runs).toBe(1);
  });

  it('no body parser before the middleware → a generic 500 and a how-to-fix to onError, nothing run', async () => {
    let runs = 0;
    const { url, errors } = await serveExpress((app, idempotency) => {
      app.post('/orders', idempotency.transactional(), (_req, res) => {
        runs += 1;
        res.sendStatus(201);
      });
    });
    const response = await fetch(`${url}/orders`, {
      method: 'POST',
      headers: { 'x-principal': uniqueScope(), 'idempotency-key': 'k', 'content-type': 'application/json' },
      body: '{"sku":"book"}',
    });
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({
      type: 'about:blank',
      title: 'Internal Server Error',
      status: 500,
    });
    expect(String(errors[0])).toMatch(/mount a body parser \(express\.json\(\)\)/);
    expect(runs).toBe(0);
  });

  it('a problem answer carries none of the headers a handler set: only what earlier middleware set', async () => {
    const { url } = await serveExpress((app, idempotency) => {
      app.use((_req, res, next) => {
        res.set('x-frame-options', 'DENY');
        next();
      });
      app.post('/orders', express.json(), idempotency.transactional(), (_req, res) => {
        res.set('location', '/orders/1').status(201).json({ ok: true });
      });
    });
    const scope = uniqueScope();
    const send = (body: string) =>
      fetch(`${url}/orders`, {
        method: 'POST',
        headers: { 'x-principal': scope, 'idempotency-key': 'k-h', 'content-type': 'application/json' },
        body,
      });
    expect((await send('{"a":1}')).status).toBe(201);
    const reused = await send('{"a":2}');
    expect(reused.status).toBe(422);
    expect(reused.headers.get('content-type')).toBe('application/problem+json');
    expect(reused.headers.get('location')).toBeNull();
    expect(reused.headers.get('x-frame-options')).toBe('DENY');
  });
});
