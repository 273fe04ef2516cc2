import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ChargeBody,
  getJson,
  type Harness,
  listCharges,
  postCharge,
  SECRET,
  startHarness,
  uniqueOrder,
  validCharge,
} from './helpers.ts';

let h: Harness;
let base: string;

beforeAll(async () => {
  h = await startHarness();
  base = h.provider.url;
});

afterAll(async () => {
  await h?.close();
});

describe('GET /health', () => {
  it('answers without auth', async () => {
    const res = await getJson(base, '/health', null);
    expect(res).toEqual({ status: 200, json: { ok: true } });
  });
});

describe('POST /v1/charges', () => {
  it('charges a valid card and returns the charge object', async () => {
    const order = uniqueOrder();
    const before = Math.floor(Date.now() / 1000);
    const res = await postCharge(base, validCharge(order, { description: 'Order #1' }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    const charge = JSON.parse(res.text);
    expect(charge).toEqual({
      id: expect.stringMatching(/^ch_[A-Za-z0-9]{24}$/),
      object: 'charge',
      amount: 2000,
      currency: 'usd',
      source: 'tok_visa',
      order,
      description: 'Order #1',
      status: 'succeeded',
      failure_code: null,
      failure_message: null,
      refunded: false,
      created: expect.any(Number),
    });
    expect(charge.created).toBeGreaterThanOrEqual(before - 5);
    expect(charge.created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 5);

    expect(await getJson(base, `/v1/charges/${charge.id}`)).toEqual({ status: 200, json: charge });
    expect(await listCharges(base, order)).toEqual([charge]);
  });

  it.each(['tok_visa', 'tok_mastercard', 'tok_amex'])('accepts %s', async (source) => {
    const res = await postCharge(base, validCharge(uniqueOrder(), { source }));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toMatchObject({ status: 'succeeded', source });
  });

  it('accepts application/x-www-form-urlencoded like Stripe', async () => {
    const order = uniqueOrder();
    const form = new URLSearchParams({ amount: '1500', currency: 'eur', source: 'tok_visa', order });
    const res = await postCharge(base, form.toString(), {
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toMatchObject({ amount: 1500, currency: 'eur', order });
  });

  it('declines tok_chargeDeclined with 402 and records a failed charge', async () => {
    const order = uniqueOrder();
    const res = await postCharge(base, validCharge(order, { source: 'tok_chargeDeclined' }));
    expect(res.status).toBe(402);
    const body = JSON.parse(res.text);
    expect(body).toEqual({
      error: {
        type: 'card_error',
        code: 'card_declined',
        decline_code: 'generic_decline',
        message: 'Your card was declined.',
        charge: expect.stringMatching(/^ch_[A-Za-z0-9]{24}$/),
      },
    });
    const stored = await getJson(base, `/v1/charges/${body.error.charge}`);
    expect(stored.status).toBe(200);
    expect(stored.json).toMatchObject({
      status: 'failed',
      failure_code: 'card_declined',
      failure_message: 'Your card was declined.',
      order,
    });
  });

  it('declines tok_chargeDeclinedInsufficientFunds with code insufficient_funds', async () => {
    const res = await postCharge(
      base,
      validCharge(uniqueOrder(), { source: 'tok_chargeDeclinedInsufficientFunds' }),
    );
    expect(res.status).toBe(402);
    expect(JSON.parse(res.text).error).toMatchObject({ type: 'card_error', code: 'insufficient_funds' });
  });

  it('rejects an unknown token with 400 resource_missing and records nothing', async () => {
    const order = uniqueOrder();
    for (const source of ['tok_unknown', 'constructor', '__proto__']) {
      const res = await postCharge(base, validCharge(order, { source }));
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text)).toEqual({
        error: {
          type: 'invalid_request_error',
          code: 'resource_missing',
          message: `No such token: '${source}'`,
          param: 'source',
        },
      });
    }
    expect(await listCharges(base, order)).toEqual([]);
  });

  it.each<[string, (body: ChargeBody) => ChargeBody, string]>([
    ['missing amount', ({ amount: _omitted, ...rest }) => rest, 'amount'],
    ['null amount', (b) => ({ ...b, amount: null }), 'amount'],
    ['zero amount', (b) => ({ ...b, amount: 0 }), 'amount'],
    ['negative amount', (b) => ({ ...b, amount: -5 }), 'amount'],
    ['fractional amount', (b) => ({ ...b, amount: 10.5 }), 'amount'],
    ['string amount', (b) => ({ ...b, amount: '100' }), 'amount'],
    ['amount over the maximum', (b) => ({ ...b, amount: 100_000_000 }), 'amount'],
    ['uppercase currency', (b) => ({ ...b, currency: 'USD' }), 'currency'],
    ['missing source', ({ source: _omitted, ...rest }) => rest, 'source'],
    ['empty order', (b) => ({ ...b, order: '' }), 'order'],
    ['numeric description', (b) => ({ ...b, description: 5 }), 'description'],
    ['unknown parameter', (b) => ({ ...b, metadata: 'x' }), 'metadata'],
  ])('rejects %s with 400 and records nothing', async (_name, mutate, param) => {
    const order = uniqueOrder();
    const res = await postCharge(base, mutate(validCharge(order)));
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).error).toMatchObject({ type: 'invalid_request_error', param });
    expect(await listCharges(base, order)).toEqual([]);
  });

  it('accepts the maximum amount', async () => {
    const res = await postCharge(base, validCharge(uniqueOrder(), { amount: 99_999_999 }));
    expect(res.status).toBe(200);
  });

  it('rejects malformed bodies', async () => {
    for (const body of ['{not json', '[1,2]', '"string"', 'null']) {
      const res = await postCharge(base, body);
      expect(res.status, body).toBe(400);
      expect(JSON.parse(res.text).error.type).toBe('invalid_request_error');
    }
    const res = await postCharge(base, '{}', { headers: { 'Content-Type': 'text/plain' } });
    expect(res.status).toBe(415);
  });

  it('answers 413 to a body over 1 MB', async () => {
    const res = await postCharge(base, JSON.stringify({ description: 'x'.repeat(1024 * 1024) }));
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text).error.type).toBe('invalid_request_error');
  });
});

describe('auth', () => {
  it('requires the bearer secret key on /v1 routes', async () => {
    const order = uniqueOrder();
    const cases: Array<{ secret: string | null; header?: string }> = [
      { secret: null },
      { secret: 'sk_test_wrong' },
      { secret: `${SECRET}x` },
      { secret: null, header: `Basic ${Buffer.from(`${SECRET}:`).toString('base64')}` },
      { secret: null, header: SECRET },
    ];
    for (const c of cases) {
      const res = await postCharge(base, validCharge(order), {
        secret: c.secret,
        ...(c.header === undefined ? {} : { headers: { Authorization: c.header } }),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(JSON.parse(res.text).error.type).toBe('invalid_request_error');
    }
    expect((await getJson(base, `/v1/charges?order=${order}`, null)).status).toBe(401);
    expect((await getJson(base, '/v1/charges/ch_x', 'sk_wrong')).status).toBe(401);
    expect((await getJson(base, '/v1/nothing-here', null)).status).toBe(401);
    expect(await listCharges(base, order)).toEqual([]);
  });

  it('accepts a case-insensitive Bearer scheme', async () => {
    const res = await postCharge(base, validCharge(uniqueOrder()), {
      secret: null,
      headers: { Authorization: `bearer ${SECRET}` },
    });
    expect(res.status).toBe(200);
  });
});

describe('GET /v1/charges', () => {
  it('lists every charge of an order, succeeded and failed, oldest first', async () => {
    const order = uniqueOrder();
    const ids: string[] = [];
    for (const source of [
      'tok_chargeDeclined',
      'tok_visa',
      'tok_chargeDeclinedInsufficientFunds',
      'tok_amex',
    ]) {
      const res = await postCharge(base, validCharge(order, { source }));
      const body = JSON.parse(res.text);
      ids.push(body.id ?? body.error.charge);
    }
    await postCharge(base, validCharge(uniqueOrder())); // another order: must not show up
    const list = await getJson(base, `/v1/charges?order=${order}`);
    expect(list.status).toBe(200);
    expect(list.json).toMatchObject({ object: 'list' });
    const data = (list.json as { data: Array<{ id: string; status: string }> }).data;
    expect(data.map((c) => c.id)).toEqual(ids);
    expect(data.map((c) => c.status)).toEqual(['failed', 'succeeded', 'failed', 'succeeded']);
  });

  it('requires the order parameter', async () => {
    const res = await getJson(base, '/v1/charges');
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: { param: 'order' } });
  });

  it('returns 404 for an unknown charge id', async () => {
    const res = await getJson(base, '/v1/charges/ch_doesnotexist');
    expect(res).toEqual({
      status: 404,
      json: {
        error: {
          type: 'invalid_request_error',
          code: 'resource_missing',
          message: "No such charge: 'ch_doesnotexist'",
          param: 'id',
        },
      },
    });
  });
});

describe('routing', () => {
  it('returns 404 for unknown routes and 405 for wrong methods', async () => {
    expect((await getJson(base, '/nope', null)).status).toBe(404);
    expect((await getJson(base, '/v1/customers')).status).toBe(404);
    expect((await getJson(base, '/v1/refunds')).status).toBe(405); // POST only
    const put = await fetch(`${base}/v1/charges`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${SECRET}` },
    });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, POST');
    await put.body?.cancel();
  });

  it('logged no unexpected errors', () => {
    expect(h.logs).toEqual([]);
  });
});
