import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POOL_SIZE } from '../src/db.ts';
import { canonicalJson, fingerprint, KEY_TTL_HOURS } from '../src/idempotency.ts';
import { startProvider } from '../src/index.ts';
import {
  type Harness,
  listCharges,
  postCharge,
  SECRET,
  startHarness,
  uniqueOrder,
  validCharge,
} from './helpers.ts';

const MISMATCH = {
  error: {
    type: 'idempotency_error',
    message:
      'Keys for idempotent requests can only be used with the same parameters they were first used with.',
  },
};

let h: Harness;
let base: string;

beforeAll(async () => {
  h = await startHarness();
  base = h.provider.url;
});

afterAll(async () => {
  await h?.close();
});

const newKey = (): string => `key_${crypto.randomUUID()}`;

/**
 * Forces the requests of a race to really overlap: while this test holds a SHARE lock on provider.charges, every
 * charge INSERT blocks, so we wait until the provider's whole pool is parked on locks (either on the charges table
 * or on another request's key), then release. Without this gate, requests on warm connections often run one after
 * another and a check-then-write bug could pass the test by luck.
 */
async function overlapped<T>(fire: () => Promise<T>): Promise<T> {
  const gate = await h.sql.connect();
  let result: Promise<T>;
  try {
    await gate.query('BEGIN');
    await gate.query('LOCK TABLE provider.charges IN SHARE MODE');
    result = fire();
    result.catch(() => {}); // awaited below; avoids an unhandled-rejection report while we wait
    const deadline = Date.now() + 5_000;
    for (;;) {
      const waiting = await h.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND application_name = 'idem-provider' AND wait_event_type = 'Lock'`,
        [h.db.name],
      );
      if ((waiting.rows[0]?.n ?? 0) >= POOL_SIZE) break;
      if (Date.now() > deadline) throw new Error('the requests never all waited on locks');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  } finally {
    await gate.query('COMMIT');
    gate.release();
  }
  return result;
}

/** Ages a stored key, as if it had been used `hours` ago. */
async function ageKey(key: string, hours: number): Promise<void> {
  const res = await h.sql.query(
    `UPDATE provider.idempotency_keys SET created_at = now() - make_interval(hours => $2) WHERE key = $1`,
    [key, hours],
  );
  expect(res.rowCount).toBe(1);
}

describe('replays', () => {
  it('replays the same key and body byte for byte, with Idempotent-Replayed, charging once', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const first = await postCharge(base, validCharge(order), { key });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();

    const second = await postCharge(base, validCharge(order), { key });
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);

    const charges = await listCharges(base, order);
    expect(charges).toHaveLength(1);
    expect(charges[0]?.id).toBe(JSON.parse(first.text).id);
  });

  it('treats reordered JSON keys (and whitespace) as the same request', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const first = await postCharge(
      base,
      `{"amount":2000,"currency":"usd","source":"tok_visa","order":"${order}"}`,
      {
        key,
      },
    );
    const reordered = await postCharge(
      base,
      `{ "order": "${order}", "source": "tok_visa",\n  "currency": "usd", "amount": 2000 }`,
      { key },
    );
    expect(reordered.status).toBe(200);
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    expect(reordered.text).toBe(first.text);
    expect(await listCharges(base, order)).toHaveLength(1);
  });

  it('treats the same parameters sent as a form as the same request', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const first = await postCharge(base, validCharge(order), { key });
    const form = await postCharge(
      base,
      new URLSearchParams({ order, source: 'tok_visa', currency: 'usd', amount: '2000' }).toString(),
      { key, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } },
    );
    expect(form.headers.get('idempotent-replayed')).toBe('true');
    expect(form.text).toBe(first.text);
  });

  it('answers 422 for the same key with a different body, and keeps the original', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const first = await postCharge(base, validCharge(order), { key });
    for (const changed of [
      validCharge(order, { amount: 2001 }),
      validCharge(order, { description: 'extra' }),
      validCharge(uniqueOrder()),
    ]) {
      const res = await postCharge(base, changed, { key });
      expect(res.status).toBe(422);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      expect(JSON.parse(res.text)).toEqual(MISMATCH);
    }
    // The 422s were not stored: the original body still replays.
    const again = await postCharge(base, validCharge(order), { key });
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(await listCharges(base, order)).toHaveLength(1);
  });

  it('stores declines (402) and replays them without charging again', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const body = validCharge(order, { source: 'tok_chargeDeclined' });
    const first = await postCharge(base, body, { key });
    expect(first.status).toBe(402);
    const second = await postCharge(base, body, { key });
    expect(second.status).toBe(402);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    const charges = await listCharges(base, order);
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ status: 'failed', id: JSON.parse(first.text).error.charge });
  });

  it('does not store 400s: the key stays free for a corrected request', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const invalid = await postCharge(base, validCharge(order, { amount: -1 }), { key });
    expect(invalid.status).toBe(400);
    const unknownToken = await postCharge(base, validCharge(order, { source: 'tok_nope' }), { key });
    expect(unknownToken.status).toBe(400);

    const ok = await postCharge(base, validCharge(order), { key });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('idempotent-replayed')).toBeNull();
    expect(await listCharges(base, order)).toHaveLength(1);
  });

  it('does not store 401s', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const denied = await postCharge(base, validCharge(order), { key, secret: 'sk_wrong' });
    expect(denied.status).toBe(401);
    const ok = await postCharge(base, validCharge(order), { key });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('idempotent-replayed')).toBeNull();
  });

  it('scopes keys per API key: another secret with the same key is an unrelated request', async () => {
    const other = await startProvider({
      databaseUrl: h.db.url,
      port: 0,
      secretKey: 'sk_test_other_account',
      log: () => {},
    });
    try {
      const order = uniqueOrder();
      const key = newKey();
      const mine = await postCharge(base, validCharge(order), { key });
      const theirs = await postCharge(other.url, validCharge(order, { amount: 5 }), {
        key,
        secret: 'sk_test_other_account',
      });
      expect(theirs.status).toBe(200);
      expect(theirs.headers.get('idempotent-replayed')).toBeNull();
      expect(JSON.parse(theirs.text).id).not.toBe(JSON.parse(mine.text).id);
      expect(await listCharges(base, order)).toHaveLength(2);
    } finally {
      await other.close();
    }
  });

  it('never stores the secret key itself', async () => {
    const res = await h.sql.query<{ n: string }>(
      'SELECT count(*) AS n FROM provider.idempotency_keys WHERE scope LIKE $1',
      [`%${SECRET}%`],
    );
    expect(res.rows[0]?.n).toBe('0');
  });
});

describe('the Idempotency-Key header', () => {
  /** node:http lets us send bytes fetch would refuse (tabs, latin-1); the value is sent as latin-1. */
  function rawPost(headers: Record<string, string>): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const url = new URL('/v1/charges', base);
      const req = request(
        url,
        {
          method: 'POST',
          headers: { Authorization: `Bearer ${SECRET}`, 'Content-Type': 'application/json', ...headers },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(validCharge('ord_header_checks')));
    });
  }

  it.each([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a tab inside', 'a\tb'],
    ['non-ASCII', 'kéy'],
  ])('rejects a key that is %s with 400', async (_name, key) => {
    const res = await rawPost({ 'Idempotency-Key': key });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).error).toMatchObject({
      type: 'invalid_request_error',
      param: 'Idempotency-Key',
    });
  });

  it('accepts 255 printable characters', async () => {
    const key = `${'~'.repeat(200)} !"#$%&'()*+,-./:;<=>?@[\\]^_\`{|}`.slice(0, 255).padEnd(255, 'z');
    expect(key).toHaveLength(255);
    const first = await rawPost({ 'Idempotency-Key': key });
    expect(first.status).toBe(200);
    const second = await rawPost({ 'Idempotency-Key': key });
    expect(second.body).toBe(first.body);
    expect(await listCharges(base, 'ord_header_checks')).toHaveLength(1);
  });
});

describe('concurrency', () => {
  it('20 concurrent requests with the same key charge exactly once and all get the same body', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const responses = await overlapped(() =>
      Promise.all(Array.from({ length: 20 }, () => postCharge(base, validCharge(order), { key }))),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(new Set(responses.map((r) => r.text)).size).toBe(1);
    expect(responses.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
    expect(await listCharges(base, order)).toHaveLength(1);
  });

  it('control: 20 concurrent requests WITHOUT a key charge 20 times', async () => {
    const order = uniqueOrder();
    const responses = await overlapped(() =>
      Promise.all(Array.from({ length: 20 }, () => postCharge(base, validCharge(order)))),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(new Set(responses.map((r) => JSON.parse(r.text).id)).size).toBe(20);
    expect(await listCharges(base, order)).toHaveLength(20);
  });

  it('20 concurrent same-key requests with different bodies: one charge, the rest replay or get 422', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const responses = await overlapped(() =>
      Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          postCharge(base, validCharge(order, { amount: 100 + (i % 2) }), { key }),
        ),
      ),
    );
    const charges = await listCharges(base, order);
    expect(charges).toHaveLength(1);
    const winner = charges[0]?.amount;
    for (const [i, res] of responses.entries()) {
      expect(res.status).toBe(100 + (i % 2) === winner ? 200 : 422);
    }
  });
});

describe('a stuck original', () => {
  it('answers 409 with Retry-After after waiting 5 s, stores nothing, and the key works afterwards', async () => {
    const order = uniqueOrder();
    const key = newKey();
    // Simulate an original request whose transaction holds the key and never finishes.
    const stuck = await h.sql.connect();
    try {
      await stuck.query('BEGIN');
      await stuck.query(
        `INSERT INTO provider.idempotency_keys (scope, key, fingerprint) VALUES ('sk_sha256:' || encode(sha256($1::bytea), 'hex'), $2, 'x')`,
        [SECRET, key],
      );
      const started = performance.now();
      const res = await postCharge(base, validCharge(order), { key });
      expect(performance.now() - started).toBeGreaterThanOrEqual(4_900);
      expect(res.status).toBe(409);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(JSON.parse(res.text).error.type).toBe('idempotency_error');
    } finally {
      await stuck.query('ROLLBACK');
      stuck.release();
    }
    expect(await listCharges(base, order)).toEqual([]);
    const retry = await postCharge(base, validCharge(order), { key });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
  }, 15_000);
});

describe(`expiry (${KEY_TTL_HOURS} h)`, () => {
  it('treats a key older than the retention as new', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const first = await postCharge(base, validCharge(order), { key });
    await ageKey(key, KEY_TTL_HOURS + 1);
    const second = await postCharge(base, validCharge(order), { key });
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(JSON.parse(second.text).id).not.toBe(JSON.parse(first.text).id);
    expect(await listCharges(base, order)).toHaveLength(2);

    // The re-claimed key is fresh again: it now replays the second charge.
    const third = await postCharge(base, validCharge(order), { key });
    expect(third.headers.get('idempotent-replayed')).toBe('true');
    expect(third.text).toBe(second.text);
  });

  it('still replays a key used an hour before the retention ends', async () => {
    const order = uniqueOrder();
    const key = newKey();
    const first = await postCharge(base, validCharge(order), { key });
    await ageKey(key, KEY_TTL_HOURS - 1);
    const second = await postCharge(base, validCharge(order), { key });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
  });

  it('lets an expired key be reused with different parameters', async () => {
    const order = uniqueOrder();
    const key = newKey();
    await postCharge(base, validCharge(order), { key });
    await ageKey(key, KEY_TTL_HOURS + 1);
    const res = await postCharge(base, validCharge(order, { amount: 999 }), { key });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text).amount).toBe(999);
  });

  it('re-claims an expired key race-free: 20 concurrent retries charge once more', async () => {
    const order = uniqueOrder();
    const key = newKey();
    await postCharge(base, validCharge(order), { key });
    await ageKey(key, KEY_TTL_HOURS + 1);
    const responses = await overlapped(() =>
      Promise.all(Array.from({ length: 20 }, () => postCharge(base, validCharge(order), { key }))),
    );
    expect(new Set(responses.map((r) => r.text)).size).toBe(1);
    expect(responses.filter((r) => r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    expect(await listCharges(base, order)).toHaveLength(2);
  });
});

describe('fingerprint', () => {
  it('is independent of key order at every level', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}',
    );
    expect(fingerprint({ a: 1, b: 2 })).toBe(fingerprint({ b: 2, a: 1 }));
    expect(fingerprint({ a: 1, b: undefined })).toBe(fingerprint({ a: 1 }));
    expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: '1' }));
  });
});

it('logged no unexpected errors', () => {
  expect(h.logs).toEqual([]);
});
