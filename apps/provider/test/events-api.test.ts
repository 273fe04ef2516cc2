/**
 * `GET /v1/events`: the merchant's read of what the provider recorded and tried to deliver, behind the API key,
 * on a real provider and database.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJson, type Harness, postCharge, startHarness, uniqueOrder, validCharge } from './helpers.ts';

interface ListedEvent {
  id: string;
  type: string;
  charge: string;
  created: number;
  delivery: { url: string; status: string; attempts: number } | null;
}

let harness: Harness;
let base: string;

beforeAll(async () => {
  // A receiver nobody listens on: deliveries are recorded as pending/failing, which is what the list must show.
  harness = await startHarness({ webhookUrl: 'http://127.0.0.1:9/hooks' });
  base = harness.provider.url;
});
afterAll(() => harness.close());

async function chargeId(order: string, source = 'tok_visa'): Promise<string> {
  const res = await postCharge(base, validCharge(order, { source }));
  const body = JSON.parse(res.text) as { id?: string; error?: { charge?: string } };
  const id = body.id ?? body.error?.charge;
  if (id === undefined) throw new Error(`no charge id in ${res.text}`);
  return id;
}

async function listEvents(query: string): Promise<ListedEvent[]> {
  const res = await getJson(base, `/v1/events${query}`);
  expect(res.status).toBe(200);
  return (res.json as { object: string; data: ListedEvent[] }).data;
}

describe('GET /v1/events', () => {
  it("lists one charge's events with their delivery state", async () => {
    const succeeded = await chargeId(uniqueOrder());
    const declined = await chargeId(uniqueOrder(), 'tok_chargeDeclined');

    const events = await listEvents(`?charge=${succeeded}`);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: 'charge.succeeded',
      charge: succeeded,
      delivery: { url: 'http://127.0.0.1:9/hooks' },
    });
    expect(events[0]?.id).toMatch(/^evt_/);

    expect((await listEvents(`?charge=${declined}`)).map((event) => event.type)).toEqual(['charge.failed']);
    expect(await listEvents('?charge=ch_none')).toEqual([]);
  });

  it('lists the newest events, oldest first, up to limit', async () => {
    const first = await chargeId(uniqueOrder());
    const second = await chargeId(uniqueOrder());
    const events = await listEvents('?limit=2');
    expect(events.map((event) => event.charge)).toEqual([first, second]);
  });

  it('filters by delivery_success and created[gte], Stripe-style, and says has_more', async () => {
    const [delivered, givenUp, retrying, oldGivenUp] = [
      await chargeId(uniqueOrder()),
      await chargeId(uniqueOrder()),
      await chargeId(uniqueOrder()),
      await chargeId(uniqueOrder()),
    ];
    const setDelivery = (charge: string, assignments: string) =>
      harness.sql.query(
        `UPDATE provider.webhook_deliveries d SET ${assignments}
           FROM provider.events e WHERE e.id = d.event_id AND e.charge_id = $1`,
        [charge],
      );
    await setDelivery(delivered, 'delivered_at = now()');
    await setDelivery(givenUp, 'failed_at = now(), attempts = 10');
    await setDelivery(oldGivenUp, 'failed_at = now(), attempts = 10');
    await harness.sql.query(
      `UPDATE provider.events SET created_at = now() - interval '2 days' WHERE charge_id = $1`,
      [oldGivenUp],
    );
    const ours = (events: ListedEvent[]) =>
      events
        .filter((event) => [delivered, givenUp, retrying, oldGivenUp].includes(event.charge))
        .map((event) => [event.charge, event.delivery?.status]);

    expect(ours(await listEvents('?delivery_success=true'))).toEqual([[delivered, 'delivered']]);
    expect(ours(await listEvents('?delivery_success=false'))).toEqual([
      [givenUp, 'failed'],
      [retrying, 'pending'],
      [oldGivenUp, 'failed'],
    ]);
    const dayAgo = Math.floor(Date.now() / 1000) - 86_400;
    expect(ours(await listEvents(`?delivery_success=false&created[gte]=${dayAgo}`))).toEqual([
      [givenUp, 'failed'],
      [retrying, 'pending'],
    ]);

    const page = await getJson(base, '/v1/events?delivery_success=false&limit=1');
    expect(page.json).toMatchObject({ has_more: true, data: [{ charge: oldGivenUp }] });
    const all = await getJson(base, `/v1/events?charge=${delivered}`);
    expect(all.json).toMatchObject({ has_more: false });
  });

  it('requires the API key', async () => {
    expect((await getJson(base, '/v1/events', null)).status).toBe(401);
    expect((await getJson(base, '/v1/events', 'sk_test_wrong')).status).toBe(401);
  });

  it('rejects bad parameters with a 400 naming the parameter', async () => {
    for (const [query, param] of [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=1.5', 'limit'],
      ['?limit=abc', 'limit'],
      ['?charge=', 'charge'],
      ['?type=charge.succeeded', 'type'],
      ['?delivery_success=no', 'delivery_success'],
      ['?created[gte]=yesterday', 'created[gte]'],
      ['?created[gte]=-5', 'created[gte]'],
    ] as const) {
      const res = await getJson(base, `/v1/events${query}`);
      expect(res.status, query).toBe(400);
      expect(res.json, query).toMatchObject({ error: { type: 'invalid_request_error', param } });
    }
  });

  it('is read-only', async () => {
    const res = await fetch(`${base}/v1/events`, {
      method: 'POST',
      headers: { Authorization: 'Bearer sk_test_provider_suite' },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET');
  });
});
