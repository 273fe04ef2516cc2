/**
 * The Express middleware over real HTTP, on the run's Postgres: how it holds the handler's response
 * (src/express/capture.ts — every form of `write`, `writeHead` and `end` a handler or a stream uses, their
 * callbacks, `flushHeaders`), what it sends (the answer's headers over what earlier middleware set, none of the
 * handler's on another answer, Content-Length, bodiless statuses), and what it reads of the request
 * (src/express/middleware.ts — the parsed body of each parser, the limit, the key header, the context).
 */
import type { Database } from '@idem/db';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpressIdempotency, IdempotencyMiddlewareMissingError } from '../src/express/index.ts';
import { fingerprintHttpRequest } from '../src/http/fingerprint.ts';
import { IdempotencyErrorCode } from '../src/index.ts';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';
import { listen } from './support/listen.ts';

type Tx = PrismaTransactionLike<Database>;
let db: Database;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await connectWithOwnTable(4);
});
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
  await db.$disconnect();
});

async function serve(
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

function sender(url: string, path = '/r') {
  const scope = uniqueScope();
  return (key: string | null, body: BodyInit | null = '{"a":1}', headers: Record<string, string> = {}) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-principal': scope,
        ...(key === null ? {} : { 'idempotency-key': key }),
        ...headers,
      },
      ...(body === null ? {} : { body }),
    });
}

describe('holding the handler’s response', () => {
  it('write(string, encoding, callback), write(Buffer, callback), end(string, encoding, callback): the bytes as written, every callback called', async () => {
    const callbacks: string[] = [];
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external(), (_req, res) => {
        res.status(201).setHeader('content-type', 'text/plain');
        expect(res.write('aGk=', 'base64', () => callbacks.push('write base64'))).toBe(true);
        res.write(Buffer.from(' there'), () => callbacks.push('write buffer'));
        res.write('', 'utf8');
        res.end('2120', 'hex', () => callbacks.push('end'));
      });
    });
    const send = sender(url);
    const first = await send('k');
    expect(first.status).toBe(201);
    expect(await first.text()).toBe('hi there! ');
    expect(first.headers.get('content-length')).toBe('10');
    expect(callbacks).toEqual(['write base64', 'write buffer', 'end']);
    const replay = await send('k');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe('hi there! ');
  });

  it('end(callback) and end(chunk, callback): the callback is called, nothing extra is written', async () => {
    const called: string[] = [];
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external(), (req, res) => {
        res.setHeader('content-type', 'text/plain');
        if ((req.body as { a: number }).a === 1) {
          res.write('only');
          res.end(() => called.push('end(cb)'));
        } else res.end('chunk', () => called.push('end(chunk, cb)'));
      });
    });
    const send = sender(url);
    expect(await (await send('k1')).text()).toBe('only');
    expect(await (await send('k2', '{"a":2}')).text()).toBe('chunk');
    expect(called).toEqual(['end(cb)', 'end(chunk, cb)']);
  });

  it('writeHead(status, message, headers) and writeHead(status, [name, value, …]); flushHeaders sends nothing early', async () => {
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external(), (req, res) => {
        res.flushHeaders();
        if ((req.body as { a: number }).a === 1)
          res.writeHead(202, 'Accepted Later', { 'content-type': 'text/x', etag: '"e"', 'x-count': 3 });
        else res.writeHead(203, ['content-type', 'text/y', 'x-pair', 'a', 'x-pair', 'b', 'x-odd']);
        res.end('body');
      });
    });
    const send = sender(url);
    const object = await send('k1');
    expect(object.status).toBe(202);
    expect(object.headers.get('content-type')).toBe('text/x');
    expect(object.headers.get('etag')).toBe('"e"');
    expect(object.headers.get('x-count')).toBe('3');
    const list = await send('k2', '{"a":2}');
    expect(list.status).toBe(203);
    expect(list.headers.get('content-type')).toBe('text/y');
    expect(list.headers.get('x-pair')).toBe('a, b');
    expect(list.headers.has('x-odd')).toBe(false);
    expect(await list.text()).toBe('body');
    // writeHead's status and headers are stored like any other: the replay has them.
    const replay = await send('k1');
    expect(replay.status).toBe(202);
    expect(replay.headers.get('etag')).toBe('"e"');
  });

  it('a header set to an array (two values) is sent as two; res.send, res.json and res.redirect are held too', async () => {
    const { url } = await serve((app, idempotency) => {
      app.post(
        '/r',
        express.json(),
        idempotency.external({ replayedHeaders: ['location', 'x-multi'] }),
        (req, res) => {
          const { a } = req.body as { a: number };
          res.setHeader('x-multi', ['one', 'two']);
          if (a === 1) res.redirect(303, '/elsewhere');
          else if (a === 2) res.json({ two: 2 });
          else res.send('three');
        },
      );
    });
    const send = sender(url);
    const redirect = await fetch(`${url}/r`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/json',
        'x-principal': 'p-redirect',
        'idempotency-key': uniqueScope(),
      },
      body: '{"a":1}',
    });
    expect(redirect.status).toBe(303);
    expect(redirect.headers.get('location')).toBe('/elsewhere');
    const json = await send('k2', '{"a":2}');
    expect(await json.json()).toEqual({ two: 2 });
    expect(json.headers.get('x-multi')).toBe('one, two');
    const replay = await send('k2', '{"a":2}');
    expect(replay.headers.get('x-multi')).toBe('one, two');
    expect(await (await send('k3', '{"a":3}')).text()).toBe('three');
  });

  it('204 and 304 are sent without a body or Content-Length; the replay likewise', async () => {
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external(), (_req, res) => {
        res.setHeader('etag', '"n"');
        res.status(204).end();
      });
    });
    const send = sender(url);
    const first = await send('k');
    expect(first.status).toBe(204);
    expect(first.headers.get('content-length')).toBeNull();
    expect(first.headers.get('etag')).toBe('"n"');
    const replay = await send('k');
    expect(replay.status).toBe(204);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('content-length')).toBeNull();
  });

  it('a replay carries what earlier middleware set, none of the headers this handler set this time, and its own Content-Length', async () => {
    let runs = 0;
    const { url } = await serve((app, idempotency) => {
      app.use((_req, res, next) => {
        res.setHeader('x-frame-options', 'DENY');
        res.setHeader('x-list', ['a', 'b']);
        next();
      });
      app.post('/r', express.json(), idempotency.external(), (_req, res) => {
        runs += 1;
        res.setHeader('x-run', String(runs));
        res.setHeader('transfer-encoding', 'chunked');
        res.status(201).type('text/plain').send(`run ${runs}`);
      });
    });
    const send = sender(url);
    const first = await send('k');
    expect(first.headers.get('x-run')).toBe('1');
    expect(first.headers.get('x-frame-options')).toBe('DENY');
    expect(await first.text()).toBe('run 1');
    const replay = await send('k');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('x-run')).toBeNull();
    expect(replay.headers.get('x-frame-options')).toBe('DENY');
    expect(replay.headers.get('x-list')).toBe('a, b');
    expect(replay.headers.get('content-length')).toBe('5');
    expect(await replay.text()).toBe('run 1');
    expect(runs).toBe(1);
  });
});

describe('holding the handler’s response: odd arguments', () => {
  it('end(null) ends without adding bytes; writeHead’s undefined header values are skipped, arrays sent as repeated headers', async () => {
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external({ replayedHeaders: ['x-multi'] }), (_req, res) => {
        res.writeHead(201, {
          'content-type': 'text/plain',
          'x-undefined': undefined,
          'x-multi': ['a', 'b'],
        });
        res.write('body');
        res.end(null);
      });
    });
    const send = sender(url);
    const first = await send('k');
    expect(first.status).toBe(201);
    expect(await first.text()).toBe('body');
    expect(first.headers.has('x-undefined')).toBe(false);
    expect(first.headers.get('x-multi')).toBe('a, b');
    // Nothing but what the handler and Express set: status, its headers, the length, the connection's own.
    expect([...first.headers.keys()].sort()).toEqual([
      'connection',
      'content-length',
      'content-type',
      'date',
      'keep-alive',
      'x-multi',
      'x-powered-by',
    ]);
    const replay = await send('k');
    expect(replay.headers.get('x-multi')).toBe('a, b');
    expect(await replay.text()).toBe('body');
  });

  it('a Content-Length or Transfer-Encoding the handler set is not sent as such: the length is the body’s, none on a 204', async () => {
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external(), (req, res) => {
        if ((req.body as { a: number }).a === 1) {
          res.setHeader('content-length', '5');
          res.status(204).end();
        } else {
          res.setHeader('content-length', '99');
          res.setHeader('transfer-encoding', 'chunked');
          res.status(200).type('text/plain').end('two');
        }
      });
    });
    const send = sender(url);
    const empty = await send('k1');
    expect(empty.status).toBe(204);
    expect(empty.headers.get('content-length')).toBeNull();
    const two = await send('k2', '{"a":2}');
    expect(two.headers.get('content-length')).toBe('3');
    expect(two.headers.get('transfer-encoding')).toBeNull();
    expect(await two.text()).toBe('two');
  });
});

describe('what the middleware reads of the request', () => {
  it('the context: key, scope and the fingerprint of method, URL and parsed body; the transaction in transactional mode', async () => {
    const seen: unknown[] = [];
    const { url } = await serve((app, idempotency) => {
      app.post('/t', express.json(), idempotency.transactional(), async (_req, res) => {
        const tx = idempotency.tx(res);
        const [row] = await tx.$queryRawUnsafe<Array<{ one: number }>>('select 1 as one');
        seen.push(idempotency.context(res), row?.one);
        res.status(201).json({ ok: true });
      });
    });
    const scope = uniqueScope();
    const response = await fetch(`${url}/t?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-principal': scope, 'idempotency-key': 'k-ctx' },
      body: '{"b":2,"a":1}',
    });
    expect(response.status).toBe(201);
    expect(seen[0]).toMatchObject({
      key: 'k-ctx',
      scope,
      keyed: true,
      fingerprint: fingerprintHttpRequest('POST /t', 'POST /t?x=1', { kind: 'json', value: { a: 1, b: 2 } }),
    });
    expect(seen[0]).toHaveProperty('tx');
    expect(seen[1]).toBe(1);
  });

  it('tx(res) on an external route, or context(res) without the middleware: a programming error, named', async () => {
    const thrown: unknown[] = [];
    const { url } = await serve((app, idempotency) => {
      app.post('/e', express.json(), idempotency.external(), (_req, res) => {
        try {
          idempotency.tx(res);
        } catch (error) {
          thrown.push(error);
        }
        res.json({ context: Object.keys(idempotency.context(res)).sort() });
      });
      app.post('/none', express.json(), (_req, res) => {
        for (const read of [() => idempotency.context(res), () => idempotency.tx(res)])
          try {
            read();
          } catch (error) {
            thrown.push(error);
          }
        res.json({});
      });
    });
    const external = await sender(url, '/e')('k');
    expect(await external.json()).toEqual({ context: ['fingerprint', 'key', 'keyed', 'scope'] });
    await sender(url, '/none')('k');
    expect(thrown).toHaveLength(3);
    for (const error of thrown) {
      expect(error).toBeInstanceOf(IdempotencyMiddlewareMissingError);
      expect((error as Error).name).toBe('IdempotencyMiddlewareMissingError');
    }
    expect((thrown[0] as Error).message).toBe(
      'This route uses idempotency.external(): there is no transaction (use transactional()).',
    );
    for (const error of thrown.slice(1))
      expect((error as Error).message).toBe(
        'No idempotency context on this response: mount idempotency.transactional() or .external() before the handler.',
      );
  });

  it('no Idempotency-Key header → 400 missing key', async () => {
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external(), (_req, res) => {
        res.json({});
      });
    });
    const response = await sender(url)(null);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: IdempotencyErrorCode.missingKey });
  });

  it('express.text(): the string’s UTF-8 bytes with their Content-Type — not JSON, so hashed; the same text replays, another is 422', async () => {
    let runs = 0;
    const fingerprints: string[] = [];
    const { url } = await serve((app, idempotency) => {
      app.post(
        '/r',
        express.text({ type: '*/*' }),
        idempotency.external({ maxBodyBytes: 6 }),
        (_req, res) => {
          runs += 1;
          fingerprints.push(idempotency.context(res).fingerprint);
          res.type('text/plain').send('ok');
        },
      );
    });
    const send = sender(url);
    const plain = { 'content-type': 'text/plain' };
    expect((await send('k', 'héllo', plain)).status).toBe(200);
    expect(fingerprints[0]).toBe(
      fingerprintHttpRequest('POST /r', 'POST /r', {
        kind: 'bytes',
        bytes: new TextEncoder().encode('héllo'),
        contentType: 'text/plain',
      }),
    );
    expect((await send('k', 'héllo', plain)).headers.get('idempotent-replayed')).toBe('true');
    expect((await send('k', 'hallo', plain)).status).toBe(422);
    // 'héllo' is 6 bytes: at the limit. 'héllo!' (7) is past it, without a Content-Length to tell.
    const chunked = (text: string) =>
      new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(text));
          controller.close();
        },
      });
    const over = await fetch(`${url}/r`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', 'x-principal': uniqueScope(), 'idempotency-key': 'k-over' },
      body: chunked('héllo!'),
      duplex: 'half',
    } as RequestInit);
    expect(over.status).toBe(413);
    expect(runs).toBe(1);
  });

  it('express.raw(): the Buffer as is; a declared Content-Length past the limit → 413; at the limit it runs', async () => {
    let runs = 0;
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.raw({ type: '*/*' }), idempotency.external({ maxBodyBytes: 4 }), (_req, res) => {
        runs += 1;
        res.send('ok');
      });
    });
    const send = sender(url);
    const octets = { 'content-type': 'application/octet-stream' };
    expect((await send('k4', new Uint8Array([1, 2, 3, 4]), octets)).status).toBe(200);
    const over = await send('k5', new Uint8Array([1, 2, 3, 4, 5]), octets);
    expect(over.status).toBe(413);
    expect(await over.json()).toMatchObject({ code: IdempotencyErrorCode.bodyTooLarge });
    expect(runs).toBe(1);
  });

  it('express.json() on a body past the limit by its Content-Length → 413 (the parsed value has no length)', async () => {
    let runs = 0;
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.json(), idempotency.external({ maxBodyBytes: 10 }), (_req, res) => {
        runs += 1;
        res.json({});
      });
    });
    const send = sender(url);
    expect((await send('k-10', '{"a":1234}')).status).toBe(200);
    expect((await send('k-11', '{"a":12345}')).status).toBe(413);
    expect(runs).toBe(1);
  });

  it('no body: none; a body with no parser to read it (Content-Length, or chunked) is a setup error → 500', async () => {
    let runs = 0;
    const { url, errors } = await serve((app, idempotency) => {
      app.post('/r', idempotency.external(), (_req, res) => {
        runs += 1;
        res.json({ ran: runs });
      });
    });
    const send = sender(url);
    const empty = await send('k-none', null, { 'content-length': '0' });
    expect(empty.status).toBe(200);
    const noBody = await send('k-none2', null);
    expect(noBody.status).toBe(200);
    const withLength = await send('k-body', '{"a":1}');
    expect(withLength.status).toBe(500);
    const chunked = await fetch(`${url}/r`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-principal': uniqueScope(),
        'idempotency-key': 'k-chunked',
      },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{}'));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(500);
    expect(runs).toBe(2);
    expect(errors).toHaveLength(2);
    for (const error of errors)
      expect((error as Error).message).toBe(
        'The request has a body but req.body is undefined: mount a body parser (express.json()) before the ' +
          'idempotency middleware, so the body is part of the fingerprint.',
      );
  });

  it('a GET (no Content-Length, no Transfer-Encoding) has no body, parser or not', async () => {
    const { url } = await serve((app, idempotency) => {
      app.get('/g', idempotency.external(), (_req, res) => {
        res.json({ ok: true });
      });
    });
    const response = await fetch(`${url}/g`, {
      headers: { 'x-principal': uniqueScope(), 'idempotency-key': 'k' },
    });
    expect(response.status).toBe(200);
  });

  it('a text body sent as JSON (express.text for every type) is read as JSON by its Content-Type', async () => {
    const fingerprints: string[] = [];
    const { url } = await serve((app, idempotency) => {
      app.post('/r', express.text({ type: '*/*' }), idempotency.external(), (_req, res) => {
        fingerprints.push(idempotency.context(res).fingerprint);
        res.send('ok');
      });
    });
    expect((await sender(url)('k', '{"b":1, "a":2}')).status).toBe(200);
    expect(fingerprints).toEqual([
      fingerprintHttpRequest('POST /r', 'POST /r', { kind: 'json', value: { a: 2, b: 1 } }),
    ]);
  });

  it('app-level middleware: every trailing slash is dropped from the route name (not strict routing)', async () => {
    const { url } = await serve((app, idempotency) => {
      app.use(express.json(), idempotency.external());
      app.post('/orders{/*rest}', (_req, res) => {
        res.status(201).json({});
      });
    });
    const scope = uniqueScope();
    const response = await fetch(`${url}/orders//`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-principal': scope, 'idempotency-key': 'k-slashes' },
      body: '{}',
    });
    expect(response.status).toBe(201);
    const store = createPrismaIdempotencyStore(db);
    expect(await store.find({ scope, procedure: 'POST /orders', key: 'k-slashes' })).toMatchObject({
      state: 'completed',
    });
  });
});
