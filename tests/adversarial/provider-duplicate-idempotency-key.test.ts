/**
 * Issue 12, item 9d: a request to the provider with two `Idempotency-Key` headers. Node joins repeated headers
 * into one string ("k1, k1"), so reading `req.headers['idempotency-key']` turns them into a third key that the
 * key pattern accepts: a proxy that duplicates the header makes the client's retry (one header, "k1") a new
 * charge. The provider now reads every value (`headersDistinct`) and answers 400 for more than one.
 */
import { createServer, type IncomingHttpHeaders, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseIdempotencyKey } from '../../apps/provider/src/idempotency.ts';
import {
  type Harness,
  listCharges,
  postCharge,
  SECRET,
  startHarness,
  uniqueOrder,
  validCharge,
} from '../../apps/provider/test/helpers.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

/** POSTs with the header sent once per value (fetch's Headers would merge them into one line). */
function postWithKeys(url: string, keys: string[], body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.setHeader('content-type', 'application/json');
    req.setHeader('authorization', `Bearer ${SECRET}`);
    req.setHeader('idempotency-key', keys);
    req.end(body);
  });
}

/** What Node hands a server for the same request: the old call site read `req.headers`. */
async function headersAsReceived(keys: string[]): Promise<IncomingHttpHeaders> {
  let received: IncomingHttpHeaders = {};
  const server = createServer((req, res) => {
    received = req.headers;
    res.end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await postWithKeys(`http://127.0.0.1:${port}/`, keys, '{}');
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
  return received;
}

describe('two Idempotency-Key headers on one provider request', () => {
  it('control: read through req.headers, the duplicated header becomes a different, valid key', async () => {
    const headers = await headersAsReceived(['k1', 'k1']);
    const key = parseIdempotencyKey(headers['idempotency-key']);
    console.log(`[9d control] two "k1" headers via req.headers → key ${JSON.stringify(key)}`);
    expect(key).toBe('k1, k1');
    expect(key).not.toBe('k1'); // the client's single-header retry would be charged as new
  });

  it('protected: the provider answers 400, charges nothing and claims no key', async () => {
    const order = uniqueOrder();
    const body = JSON.stringify(validCharge(order));
    for (const keys of [
      ['k1', 'k1'],
      ['k1', 'k2'],
    ]) {
      const response = await postWithKeys(`${h.provider.url}/v1/charges`, keys, body);
      expect(response.status).toBe(400);
      expect(JSON.parse(response.text)).toMatchObject({
        error: {
          type: 'invalid_request_error',
          param: 'Idempotency-Key',
          message: expect.stringMatching(/exactly one/),
        },
      });
    }
    expect(await listCharges(h.provider.url, order)).toHaveLength(0);
    const keys = await h.sql.query(
      `SELECT 1 FROM provider.idempotency_keys WHERE key IN ('k1', 'k1, k1', 'k1, k2')`,
    );
    expect(keys.rowCount).toBe(0);
    console.log('[9d protected] two headers → 400, 0 charges, 0 key rows');

    // One header whose value has a comma is still one key: only repeated headers are refused.
    const comma = await postWithKeys(
      `${h.provider.url}/v1/charges`,
      ['k1, k1'],
      JSON.stringify(validCharge(uniqueOrder())),
    );
    expect(comma.status).toBe(200);

    // One header still works, and a retry of it replays.
    const first = await postCharge(h.provider.url, validCharge(order), { key: 'k1' });
    const retry = await postCharge(h.provider.url, validCharge(order), { key: 'k1' });
    expect([first.status, retry.status]).toEqual([200, 200]);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await listCharges(h.provider.url, order)).toHaveLength(1);
  });
});
