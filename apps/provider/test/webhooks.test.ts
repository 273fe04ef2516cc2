/**
 * Events and webhooks end to end: a real provider (test knobs on) delivering to a real node:http receiver, on a
 * throw-away database. Every test tells its deliveries apart by charge id, so a late copy from one test cannot
 * confuse another.
 */
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type RunningProvider,
  SIGNATURE_HEADER,
  signWebhookPayload,
  startProvider,
  verifyWebhookSignature,
} from '../src/index.ts';
import {
  getJson,
  type Harness,
  postCharge,
  postRefund,
  SECRET,
  startHarness,
  uniqueOrder,
  validCharge,
} from './helpers.ts';

const WEBHOOK_SECRET = 'whsec_provider_suite';

interface Received {
  id: string;
  type: string;
  chargeId: string;
  /** The raw body exactly as received. */
  body: string;
  signature: string | undefined;
  contentType: string | undefined;
  at: number;
}

type Respond = (delivery: Received) => number | Promise<number>;

interface Receiver {
  url: string;
  received: Received[];
  respond: Respond;
  forCharge(chargeId: string): Received[];
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const receiver: Receiver = {
    url: '',
    received,
    respond: () => 200,
    forCharge: (chargeId) => received.filter((r) => r.chargeId === chargeId),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      const event = JSON.parse(body) as { id: string; type: string; data: { object: { id: string } } };
      const delivery: Received = {
        id: event.id,
        type: event.type,
        chargeId: event.data.object.id,
        body,
        signature: req.headers[SIGNATURE_HEADER.toLowerCase()] as string | undefined,
        contentType: req.headers['content-type'],
        at: performance.now(),
      };
      received.push(delivery);
      res.writeHead(await receiver.respond(delivery), { 'Content-Type': 'text/plain' }).end('ok');
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('receiver: no port');
  receiver.url = `http://127.0.0.1:${address.port}/webhooks`;
  return receiver;
}

async function waitFor<T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 5_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Several poll intervals (150 ms): long enough for a stray extra delivery to show up. */
const QUIET_MS = 500;

let receiver: Receiver;
let h: Harness;
let base: string;

beforeAll(async () => {
  receiver = await startReceiver();
  h = await startHarness({ testKnobs: true, webhookUrl: receiver.url, webhookSecret: WEBHOOK_SECRET });
  base = h.provider.url;
});

afterAll(async () => {
  await h?.close();
  await receiver?.close();
});

afterEach(async () => {
  receiver.respond = () => 200;
  await fetch(`${base}/__knobs`, { method: 'DELETE' });
});

async function setKnobs(knobs: Record<string, unknown>, url = base): Promise<void> {
  const res = await fetch(`${url}/__knobs`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(knobs),
  });
  expect(res.status).toBe(200);
  await res.body?.cancel();
}

interface ListedEvent {
  id: string;
  type: string;
  charge: string;
  delivery: {
    status: string;
    attempts: number;
    last_status: number | null;
    last_error: string | null;
  } | null;
}

async function eventsOf(chargeId: string, url = base): Promise<ListedEvent[]> {
  const res = await getJson(url, `/__webhooks?charge=${chargeId}`, null);
  expect(res.status).toBe(200);
  return (res.json as { data: ListedEvent[] }).data;
}

async function charge(overrides = {}, options = {}): Promise<{ id: string; body: Record<string, unknown> }> {
  const res = await postCharge(base, validCharge(uniqueOrder(), overrides), options);
  const body = JSON.parse(res.text) as Record<string, unknown> & { id?: string; error?: { charge: string } };
  const id = body.id ?? body.error?.charge;
  if (id === undefined) throw new Error(`no charge: ${res.status} ${res.text}`);
  return { id, body };
}

function expectValidSignature(delivery: Received): void {
  expect(delivery.signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
  expect(verifyWebhookSignature(delivery.signature, delivery.body, WEBHOOK_SECRET)).toBe(true);
}

describe('charge events', () => {
  it('delivers exactly one signed charge.succeeded carrying the charge', async () => {
    const { id, body: chargeObject } = await charge();
    expect(chargeObject).toMatchObject({ status: 'succeeded', refunded: false });
    await waitFor(() => receiver.forCharge(id).length > 0, 'the delivery');
    await sleep(QUIET_MS);

    const deliveries = receiver.forCharge(id);
    expect(deliveries).toHaveLength(1);
    const [delivery] = deliveries as [Received];
    expect(delivery.contentType).toBe('application/json');
    expectValidSignature(delivery);
    expect(JSON.parse(delivery.body)).toEqual({
      id: expect.stringMatching(/^evt_[A-Za-z0-9]{24}$/),
      object: 'event',
      type: 'charge.succeeded',
      created: chargeObject.created,
      data: { object: chargeObject },
    });

    const listed = await eventsOf(id);
    expect(listed).toEqual([
      {
        id: delivery.id,
        type: 'charge.succeeded',
        charge: id,
        created: chargeObject.created,
        delivery: expect.objectContaining({
          status: 'delivered',
          attempts: 1,
          last_status: 200,
          last_error: null,
        }),
      },
    ]);
    // The stored payload is the delivered body, byte for byte.
    const stored = await h.sql.query<{ payload: string }>(
      'SELECT payload::text AS payload FROM provider.events WHERE charge_id = $1',
      [id],
    );
    expect(stored.rows).toEqual([{ payload: delivery.body }]);
  });

  it('delivers charge.failed for a decline', async () => {
    const { id } = await charge({ source: 'tok_chargeDeclined' });
    const [delivery] = await waitFor(() => {
      const found = receiver.forCharge(id);
      return found.length > 0 ? found : undefined;
    }, 'the delivery');
    expect(delivery?.type).toBe('charge.failed');
    expectValidSignature(delivery as Received);
    expect(JSON.parse((delivery as Received).body).data.object).toMatchObject({
      id,
      status: 'failed',
      failure_code: 'card_declined',
      refunded: false,
    });
  });

  it('records no second event for an idempotent replay', async () => {
    const key = `key_${crypto.randomUUID()}`;
    const order = uniqueOrder();
    const first = await postCharge(base, validCharge(order), { key });
    const replay = await postCharge(base, validCharge(order), { key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
    const id = JSON.parse(first.text).id as string;

    await waitFor(() => receiver.forCharge(id).length > 0, 'the delivery');
    await sleep(QUIET_MS);
    expect(receiver.forCharge(id)).toHaveLength(1);
    expect(await eventsOf(id)).toHaveLength(1);
  });

  it('commits no event when the charge does not commit (failNext, invalid request)', async () => {
    const before = await h.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM provider.events');
    await setKnobs({ failNext: 1 });
    expect((await postCharge(base, validCharge(uniqueOrder()))).status).toBe(500);
    expect((await postCharge(base, validCharge(uniqueOrder(), { amount: 0 }))).status).toBe(400);
    const after = await h.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM provider.events');
    expect(after.rows[0]?.n).toBe(before.rows[0]?.n);
  });
});

describe('POST /v1/refunds', () => {
  it('refunds a succeeded charge once and delivers charge.refunded', async () => {
    const { id } = await charge();
    const res = await postRefund(base, { charge: id });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({
      id: expect.stringMatching(/^re_[A-Za-z0-9]{24}$/),
      object: 'refund',
      charge: id,
      amount: 2000,
      status: 'succeeded',
    });
    expect((await getJson(base, `/v1/charges/${id}`)).json).toMatchObject({
      refunded: true,
      status: 'succeeded',
    });

    const refunded = await waitFor(
      () => receiver.forCharge(id).find((d) => d.type === 'charge.refunded'),
      'charge.refunded',
    );
    expectValidSignature(refunded);
    expect(JSON.parse(refunded.body).data.object).toMatchObject({ id, refunded: true, amount: 2000 });

    const again = await postRefund(base, { charge: id });
    expect(again.status).toBe(400);
    expect(JSON.parse(again.text)).toEqual({
      error: {
        type: 'invalid_request_error',
        code: 'charge_already_refunded',
        message: `Charge ${id} has already been refunded.`,
      },
    });
    expect((await eventsOf(id)).map((e) => e.type)).toEqual(['charge.succeeded', 'charge.refunded']);
  });

  it('rejects a failed charge, an unknown charge and bad parameters', async () => {
    const { id: failed } = await charge({ source: 'tok_chargeDeclined' });
    const notRefundable = await postRefund(base, { charge: failed });
    expect(notRefundable.status).toBe(400);
    expect(JSON.parse(notRefundable.text).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'charge_not_refundable',
    });

    const unknown = await postRefund(base, { charge: 'ch_doesnotexist' });
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text).error).toMatchObject({ code: 'resource_missing', param: 'charge' });

    for (const body of [{}, { charge: 5 }, { charge: failed, amount: 1 }]) {
      const res = await postRefund(base, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    const form = await postRefund(base, new URLSearchParams({ charge: 'ch_nope' }).toString(), {
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(404);
    expect((await postRefund(base, { charge: failed }, { secret: null })).status).toBe(401);
    expect((await eventsOf(failed)).map((e) => e.type)).toEqual(['charge.failed']);
  });

  it('honours Idempotency-Key: a replay returns the same refund and records nothing new', async () => {
    const { id } = await charge();
    const key = `key_${crypto.randomUUID()}`;
    const first = await postRefund(base, { charge: id }, { key });
    const replay = await postRefund(base, { charge: id }, { key });
    expect(first.status).toBe(200);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
    expect((await eventsOf(id)).map((e) => e.type)).toEqual(['charge.succeeded', 'charge.refunded']);

    // The same key for a different refund, or first used for a charge, is a mismatch.
    const other = await charge();
    expect((await postRefund(base, { charge: other.id }, { key })).status).toBe(422);
    const chargeKey = `key_${crypto.randomUUID()}`;
    await postCharge(base, validCharge(uniqueOrder()), { key: chargeKey });
    expect((await postRefund(base, { charge: other.id }, { key: chargeKey })).status).toBe(422);
  });

  it('refunds once under concurrent requests', async () => {
    const { id } = await charge();
    const results = await Promise.all(Array.from({ length: 6 }, () => postRefund(base, { charge: id })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400, 400]);
    expect((await eventsOf(id)).map((e) => e.type)).toEqual(['charge.succeeded', 'charge.refunded']);
  });
});

describe('delivery', () => {
  it('retries a failing receiver with growing delays: 500, 500, then 200 on the 3rd attempt', async () => {
    let failures = 0;
    let target = '';
    receiver.respond = (d) => (d.chargeId === target && failures++ < 2 ? 500 : 200);
    await setKnobs({ webhookHold: true }); // so the target is known before the first attempt
    const { id } = await charge();
    target = id;
    await setKnobs({ webhookHold: false });

    await waitFor(async () => (await eventsOf(id))[0]?.delivery?.status === 'delivered', 'delivered', 20_000);
    const attempts = receiver.forCharge(id);
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((a) => a.id)).size).toBe(1);
    for (const attempt of attempts) expectValidSignature(attempt);
    const [a, b, c] = attempts.map((x) => x.at) as [number, number, number];
    // Backoff 0.5 s, then 1 s (plus up to one poll interval each): the second floor is twice the first. The
    // measured gaps are not compared with each other: on a loaded machine the first can stretch past the second.
    expect(b - a).toBeGreaterThanOrEqual(450);
    expect(c - b).toBeGreaterThanOrEqual(950);
    expect((await eventsOf(id))[0]?.delivery).toMatchObject({
      attempts: 3,
      last_status: 200,
      last_error: null,
    });
  });

  it('webhookFailNext: the next attempts are not sent and count as failed', async () => {
    await setKnobs({ webhookFailNext: 2 });
    const { id } = await charge();
    await waitFor(async () => (await eventsOf(id))[0]?.delivery?.status === 'delivered', 'delivered', 8_000);
    expect(receiver.forCharge(id)).toHaveLength(1);
    expect((await eventsOf(id))[0]?.delivery?.attempts).toBe(3);
  });

  it('gives up after 10 attempts and records it', async () => {
    let target = '';
    receiver.respond = (d) => (d.chargeId === target ? 503 : 200);
    await setKnobs({ webhookHold: true });
    const { id } = await charge();
    target = id;
    await setKnobs({ webhookHold: false });
    await waitFor(async () => (await eventsOf(id))[0]?.delivery?.last_status === 503, 'the first failure');
    // Fast-forward: as if attempts 2–9 had failed too.
    await h.sql.query(
      `UPDATE provider.webhook_deliveries d SET attempts = 9, next_attempt_at = now()
         FROM provider.events e WHERE e.id = d.event_id AND e.charge_id = $1`,
      [id],
    );
    const listed = await waitFor(async () => {
      const [event] = await eventsOf(id);
      return event?.delivery?.status === 'failed' ? event : undefined;
    }, 'the give-up');
    expect(listed.delivery).toMatchObject({ attempts: 10, last_status: 503, last_error: 'HTTP 503' });
    expect(h.logs.filter((line) => line.includes(listed.id))).toEqual([
      expect.stringMatching(/given up after 10 attempts \(last: HTTP 503\)/),
    ]);
    await sleep(QUIET_MS);
    expect(receiver.forCharge(id)).toHaveLength(2);
  });

  it('webhookDuplicates: 4 sends 5 identical, validly signed copies of the event', async () => {
    await setKnobs({ webhookDuplicates: 4 });
    const { id } = await charge();
    await waitFor(() => receiver.forCharge(id).length >= 5, 'five copies');
    await sleep(QUIET_MS);
    const copies = receiver.forCharge(id);
    expect(copies).toHaveLength(5);
    expect(new Set(copies.map((c) => c.id)).size).toBe(1);
    expect(new Set(copies.map((c) => c.body)).size).toBe(1);
    for (const copy of copies) expectValidSignature(copy);
    expect((await eventsOf(id))[0]?.delivery).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  it('webhookHold + flush reverse: the receiver sees charge.refunded before charge.succeeded', async () => {
    await setKnobs({ webhookHold: true });
    const { id } = await charge();
    expect((await postRefund(base, { charge: id })).status).toBe(200);
    await sleep(QUIET_MS);
    expect(receiver.forCharge(id)).toEqual([]);
    expect((await eventsOf(id)).map((e) => e.delivery?.status)).toEqual(['pending', 'pending']);

    const flush = await fetch(`${base}/__webhooks/flush`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ order: 'reverse' }),
    });
    expect(flush.status).toBe(200);
    const flushed = (await flush.json()) as { data: Array<{ type: string; delivered: boolean }> };
    expect(flushed.data.map((d) => [d.type, d.delivered])).toEqual([
      ['charge.refunded', true],
      ['charge.succeeded', true],
    ]);
    expect(receiver.forCharge(id).map((d) => d.type)).toEqual(['charge.refunded', 'charge.succeeded']);
    expect((await getJson(base, '/__knobs', null)).json).toMatchObject({ webhookHold: false });
  });

  it('flush forward sends held events in the order they happened', async () => {
    await setKnobs({ webhookHold: true });
    const first = await charge();
    const second = await charge({ source: 'tok_chargeDeclined' });
    await postRefund(base, { charge: first.id });
    const flush = await fetch(`${base}/__webhooks/flush`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ order: 'forward' }),
    });
    expect(flush.status).toBe(200);
    const mine = receiver.received.filter((d) => d.chargeId === first.id || d.chargeId === second.id);
    expect(mine.map((d) => d.type)).toEqual(['charge.succeeded', 'charge.failed', 'charge.refunded']);

    const bad = await fetch(`${base}/__webhooks/flush`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ order: 'sideways' }),
    });
    expect(bad.status).toBe(400);
    await bad.body?.cancel();
  });

  it('two provider instances on one database deliver every event, none lost', async () => {
    const second = await startProvider({
      databaseUrl: h.db.url,
      port: 0,
      secretKey: SECRET,
      webhookUrl: receiver.url,
      webhookSecret: WEBHOOK_SECRET,
      log: (line) => h.logs.push(line),
    });
    try {
      const ids: string[] = [];
      await Promise.all(
        Array.from({ length: 30 }, async (_, i) => {
          const url = i % 2 === 0 ? base : second.url;
          const res = await postCharge(url, validCharge(uniqueOrder()));
          const id = JSON.parse(res.text).id as string;
          ids.push(id);
          if (i % 3 === 0) expect((await postRefund(url, { charge: id })).status).toBe(200);
        }),
      );
      const events = await h.sql.query<{ id: string }>(
        'SELECT id FROM provider.events WHERE charge_id = ANY($1)',
        [ids],
      );
      expect(events.rows).toHaveLength(40);
      const expected = new Set(events.rows.map((r) => r.id));
      await waitFor(() => {
        const seen = new Set(receiver.received.map((d) => d.id));
        return [...expected].every((id) => seen.has(id));
      }, 'every event');
      await sleep(QUIET_MS);
      const perEvent = new Map<string, number>();
      for (const d of receiver.received)
        if (expected.has(d.id)) perEvent.set(d.id, (perEvent.get(d.id) ?? 0) + 1);
      expect(perEvent.size).toBe(40);
      for (const count of perEvent.values()) expect(count).toBeGreaterThanOrEqual(1);
      const states = await h.sql.query<{ delivered: number }>(
        `SELECT count(*)::int AS delivered FROM provider.webhook_deliveries
          WHERE event_id = ANY($1) AND delivered_at IS NOT NULL`,
        [[...expected]],
      );
      expect(states.rows[0]?.delivered).toBe(40);
    } finally {
      await second.close();
    }
  });

  it('close() lets a delivery in flight finish and records it', async () => {
    let target = '';
    receiver.respond = async (d) => {
      if (d.chargeId === target) await sleep(400);
      return 200;
    };
    const other = await startProvider({
      databaseUrl: h.db.url,
      port: 0,
      secretKey: SECRET,
      testKnobs: true,
      webhookUrl: `${receiver.url}?instance=other`, // its own endpoint: the suite's provider does not take its rows
      webhookSecret: WEBHOOK_SECRET,
      log: (line) => h.logs.push(line),
    });
    await setKnobs({ webhookHold: true }, other.url);
    const res = await postCharge(other.url, validCharge(uniqueOrder()));
    target = JSON.parse(res.text).id as string;
    await setKnobs({ webhookHold: false }, other.url);
    await waitFor(() => receiver.forCharge(target).length > 0, 'the delivery to start');
    await other.close();
    const [event] = await eventsOf(target);
    expect(event?.delivery).toMatchObject({ status: 'delivered', attempts: 1, last_status: 200 });
  });
});

describe('without a webhook URL', () => {
  let plain: RunningProvider;
  beforeAll(async () => {
    plain = await startProvider({ databaseUrl: h.db.url, port: 0, secretKey: SECRET, testKnobs: true });
  });
  afterAll(async () => {
    await plain?.close();
  });

  it('records events but queues no delivery; flush is a 400', async () => {
    const res = await postCharge(plain.url, validCharge(uniqueOrder()));
    const id = JSON.parse(res.text).id as string;
    expect(await eventsOf(id, plain.url)).toEqual([
      expect.objectContaining({ type: 'charge.succeeded', charge: id, delivery: null }),
    ]);
    const flush = await fetch(`${plain.url}/__webhooks/flush`, { method: 'POST' });
    expect(flush.status).toBe(400);
    await flush.body?.cancel();
    await sleep(QUIET_MS);
    expect(receiver.forCharge(id)).toEqual([]);
  });
});

describe('signature helpers', () => {
  const body = '{"id":"evt_1","object":"event"}';
  const now = 1_800_000_000;

  it('signWebhookPayload is Stripe’s scheme: t=<ts>,v1=hex HMAC-SHA256(secret, "<ts>.<body>")', async () => {
    const { createHmac } = await import('node:crypto');
    const expected = createHmac('sha256', 'whsec_x').update(`${now}.${body}`).digest('hex');
    expect(signWebhookPayload('whsec_x', body, now)).toBe(`t=${now},v1=${expected}`);
    expect(signWebhookPayload('whsec_x', Buffer.from(body), now)).toBe(`t=${now},v1=${expected}`);
  });

  it('verifyWebhookSignature accepts valid signatures and rejects everything else', () => {
    const header = signWebhookPayload('whsec_x', body, now);
    const verify = (h: string | undefined, b = body, secret = 'whsec_x', at = now) =>
      verifyWebhookSignature(h, b, secret, { now: at });

    expect(verify(header)).toBe(true);
    expect(verify(header, body, 'whsec_x', now + 300)).toBe(true); // at the edge of the tolerance
    expect(verifyWebhookSignature(header, Buffer.from(body), 'whsec_x', { now })).toBe(true);

    expect(verify(header, body.replace('evt_1', 'evt_2'))).toBe(false); // tampered body
    expect(verify(header, `${body} `)).toBe(false); // re-serialized / whitespace
    expect(verify(header, body, 'whsec_y')).toBe(false); // wrong secret
    expect(verify(header, body, 'whsec_x', now + 301)).toBe(false); // stale
    expect(verify(header, body, 'whsec_x', now - 301)).toBe(false); // from the future
    expect(verifyWebhookSignature(header, body, 'whsec_x', { now: now + 3600, toleranceSeconds: 7200 })).toBe(
      true,
    );

    // A forged timestamp invalidates the signature.
    expect(verify(header.replace(`t=${now}`, `t=${now + 1}`), body, 'whsec_x', now + 1)).toBe(false);

    // Several v1 entries (secret rotation): any match is enough; other schemes are ignored.
    const [, good] = header.split(',v1=') as [string, string];
    const bad = 'f'.repeat(64);
    expect(verify(`t=${now},v1=${bad},v1=${good}`)).toBe(true);
    expect(verify(`t=${now},v0=${good},v1=${bad}`)).toBe(false);
    expect(verify(`t=${now}, v1=${good}`)).toBe(true);

    for (const malformed of [
      undefined,
      '',
      'garbage',
      `v1=${good}`,
      `t=${now}`,
      `t=abc,v1=${good}`,
      `t=${now},t=${now},v1=${good}`,
      `t=${now},v1=${good.slice(1)}`,
    ]) {
      expect(verify(malformed), String(malformed)).toBe(false);
    }
  });
});

describe('src/main.ts with PROVIDER_WEBHOOK_URL', () => {
  it('delivers, and stops cleanly on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: h.db.url,
        PORT: '0',
        PROVIDER_SECRET_KEY: SECRET,
        PROVIDER_WEBHOOK_URL: `${receiver.url}?instance=main`,
        PROVIDER_WEBHOOK_SECRET: 'whsec_main',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const url = await waitFor(
        () => /provider listening on (http:\/\/\S+)/.exec(out)?.[1],
        'the listening line',
        // A bound for a loaded machine, not an expectation (tsx's start took past 15 s at load average 17).
        60_000,
      );
      expect(out).toContain(`(webhooks to ${receiver.url}?instance=main)`);
      const res = await postCharge(url, validCharge(uniqueOrder()));
      const id = JSON.parse(res.text).id as string;
      const delivery = await waitFor(() => receiver.forCharge(id)[0], 'the delivery');
      expect(verifyWebhookSignature(delivery.signature, delivery.body, 'whsec_main')).toBe(true);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(err).toBe('');
  }, 90_000);
});

it('logged nothing unexpected', () => {
  // Only the deliberate give-up above.
  expect(h.logs.filter((line) => !/given up after 10 attempts/.test(line))).toEqual([]);
});
