import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RunningProvider, startProvider } from '../src/index.ts';
import {
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

async function knobs(method: 'GET' | 'POST' | 'DELETE', body?: unknown, url = base) {
  const res = await fetch(`${url}/__knobs`, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as unknown };
}

beforeAll(async () => {
  h = await startHarness({ testKnobs: true });
  base = h.provider.url;
});

beforeEach(async () => {
  await knobs('DELETE');
});

afterAll(async () => {
  await h?.close();
});

const newKey = (): string => `key_${crypto.randomUUID()}`;

describe('/__knobs', () => {
  it('shows, sets (partially) and resets the knobs', async () => {
    expect(await knobs('GET')).toEqual({
      status: 200,
      json: {
        latencyMs: 0,
        chargeHold: false,
        failNext: 0,
        dropResponseNext: 0,
        webhookDuplicates: 0,
        webhookHold: false,
        webhookFailNext: 0,
      },
    });
    expect(await knobs('POST', { failNext: 2 })).toEqual({
      status: 200,
      json: {
        latencyMs: 0,
        chargeHold: false,
        failNext: 2,
        dropResponseNext: 0,
        webhookDuplicates: 0,
        webhookHold: false,
        webhookFailNext: 0,
      },
    });
    expect((await knobs('POST', { latencyMs: 10 })).json).toEqual({
      latencyMs: 10,
      chargeHold: false,
      failNext: 2,
      dropResponseNext: 0,
      webhookDuplicates: 0,
      webhookHold: false,
      webhookFailNext: 0,
    });
    expect(await knobs('DELETE')).toEqual({
      status: 200,
      json: {
        latencyMs: 0,
        chargeHold: false,
        failNext: 0,
        dropResponseNext: 0,
        webhookDuplicates: 0,
        webhookHold: false,
        webhookFailNext: 0,
      },
    });
  });

  it('rejects invalid settings with 400', async () => {
    for (const body of [{ failNext: -1 }, { latencyMs: 1.5 }, { dropResponseNext: '1' }, { bogus: 1 }, [1]]) {
      const res = await knobs('POST', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect((await knobs('GET')).json).toEqual({
      latencyMs: 0,
      chargeHold: false,
      failNext: 0,
      dropResponseNext: 0,
      webhookDuplicates: 0,
      webhookHold: false,
      webhookFailNext: 0,
    });
  });

  describe('when test knobs are disabled', () => {
    let plain: RunningProvider;
    beforeAll(async () => {
      plain = await startProvider({ databaseUrl: h.db.url, port: 0, secretKey: SECRET, log: () => {} });
    });
    afterAll(async () => {
      await plain.close();
    });

    it('answers 404 on every method and cannot be armed', async () => {
      for (const method of ['GET', 'POST', 'DELETE'] as const) {
        const res = await knobs(method, method === 'POST' ? { failNext: 5 } : undefined, plain.url);
        expect(res.status, method).toBe(404);
      }
      expect((await fetch(`${plain.url}/__charges/held`)).status).toBe(404);
      expect((await fetch(`${plain.url}/__charges/release`, { method: 'POST' })).status).toBe(404);
      const charge = await postCharge(plain.url, validCharge(uniqueOrder()));
      expect(charge.status).toBe(200);
    });
  });
});

describe('failNext', () => {
  it('fails the next N charge calls with 500 without charging or claiming the key; the retry succeeds', async () => {
    const order = uniqueOrder();
    const key = newKey();
    await knobs('POST', { failNext: 2 });
    for (let i = 0; i < 2; i += 1) {
      const res = await postCharge(base, validCharge(order), { key });
      expect(res.status).toBe(500);
      expect(JSON.parse(res.text)).toMatchObject({ error: { type: 'api_error' } });
    }
    expect(await listCharges(base, order)).toEqual([]);
    const claimed = await h.sql.query('SELECT 1 FROM provider.idempotency_keys WHERE key = $1', [key]);
    expect(claimed.rowCount).toBe(0);

    const retry = await postCharge(base, validCharge(order), { key });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await listCharges(base, order)).toHaveLength(1);
    expect((await knobs('GET')).json).toMatchObject({ failNext: 0 });
  });

  it('is not used up by requests rejected with 400', async () => {
    await knobs('POST', { failNext: 1 });
    const invalid = await postCharge(base, validCharge(uniqueOrder(), { amount: 0 }));
    expect(invalid.status).toBe(400);
    const failed = await postCharge(base, validCharge(uniqueOrder()));
    expect(failed.status).toBe(500);
  });
});

describe('dropResponseNext', () => {
  it('charges, then drops the response; the retry with the same key replays that charge', async () => {
    const order = uniqueOrder();
    const key = newKey();
    await knobs('POST', { dropResponseNext: 1 });
    await expect(postCharge(base, validCharge(order), { key })).rejects.toThrow();

    const afterDrop = await listCharges(base, order);
    expect(afterDrop).toHaveLength(1);

    const retry = await postCharge(base, validCharge(order), { key });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.parse(retry.text).id).toBe(afterDrop[0]?.id);
    expect(await listCharges(base, order)).toHaveLength(1);
  });

  it('control: without a key, the retry after a lost response charges twice', async () => {
    const order = uniqueOrder();
    await knobs('POST', { dropResponseNext: 1 });
    await expect(postCharge(base, validCharge(order))).rejects.toThrow();
    const retry = await postCharge(base, validCharge(order));
    expect(retry.status).toBe(200);
    expect(await listCharges(base, order)).toHaveLength(2);
  });

  it('drops exactly N responses', async () => {
    const order = uniqueOrder();
    await knobs('POST', { dropResponseNext: 2 });
    const results = await Promise.allSettled(
      Array.from({ length: 3 }, (_, i) =>
        postCharge(base, validCharge(order), { key: `drop-n-${order}-${i}` }),
      ),
    );
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(2);
    expect(await listCharges(base, order)).toHaveLength(3);
  });
});

describe('latencyMs', () => {
  it('delays the charge response after the charge has committed', async () => {
    const order = uniqueOrder();
    await knobs('POST', { latencyMs: 600 });
    const started = performance.now();
    const res = await postCharge(base, validCharge(order));
    expect(res.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(590);
  });

  it('also delays error responses of POST /v1/charges', async () => {
    await knobs('POST', { latencyMs: 200 });
    const started = performance.now();
    const res = await postCharge(base, validCharge(uniqueOrder(), { amount: 0 }));
    expect(res.status).toBe(400);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  });
});

async function held(query: string): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${base}/__charges/held${query}`);
  return { status: res.status, json: await res.json() };
}

async function release(): Promise<unknown> {
  const res = await fetch(`${base}/__charges/release`, { method: 'POST' });
  expect(res.status).toBe(200);
  return res.json();
}

describe('chargeHold', () => {
  it('holds the charge response after the charge has committed, until released; reads are not held', async () => {
    const order = uniqueOrder();
    expect((await knobs('POST', { chargeHold: true })).json).toMatchObject({ chargeHold: true });
    let answered = false;
    const pending = postCharge(base, validCharge(order)).finally(() => {
      answered = true;
    });

    expect(await held('?atLeast=1')).toEqual({ status: 200, json: { held: 1 } });
    expect(await listCharges(base, order)).toHaveLength(1); // committed while its response is held
    expect(answered).toBe(false);

    expect(await release()).toEqual({ released: 1 });
    expect((await pending).status).toBe(200);
    expect((await knobs('GET')).json).toMatchObject({ chargeHold: false });
    expect(await held('')).toEqual({ status: 200, json: { held: 0 } });
  });

  it('holds every response, errors included, and a reset releases them', async () => {
    await knobs('POST', { chargeHold: true });
    const pending = [
      postCharge(base, validCharge(uniqueOrder())),
      postCharge(base, validCharge(uniqueOrder(), { amount: 0 })),
    ];
    expect(await held('?atLeast=2')).toEqual({ status: 200, json: { held: 2 } });
    await knobs('DELETE');
    expect((await Promise.all(pending)).map((res) => res.status)).toEqual([200, 400]);
  });

  it('turning the knob off releases what it held', async () => {
    await knobs('POST', { chargeHold: true });
    const pending = postCharge(base, validCharge(uniqueOrder()));
    await held('?atLeast=1');
    await knobs('POST', { chargeHold: false });
    expect((await pending).status).toBe(200);
  });

  it('answers 408 with the count when fewer are held than asked before the wait ends', async () => {
    await knobs('POST', { chargeHold: true });
    expect(await held('?atLeast=1&timeoutMs=50')).toEqual({ status: 408, json: { held: 0 } });
  });

  it('rejects a malformed wait with 400', async () => {
    for (const query of ['?atLeast=-1', '?atLeast=1.5', '?atLeast=x', '?timeoutMs=60001']) {
      expect((await held(query)).status, query).toBe(400);
    }
  });

  it('passes charges through when the hold is off', async () => {
    expect(await release()).toEqual({ released: 0 });
    expect((await postCharge(base, validCharge(uniqueOrder()))).status).toBe(200);
  });
});
