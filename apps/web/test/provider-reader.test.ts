/**
 * The key trail's provider reader against a stand-in processor (a test-supplied fetch): it asks the documented
 * read endpoints with the API key, and refuses any answer that is not the API's instead of showing it.
 */
import { describe, expect, it } from 'vitest';
import { createProviderReader } from '~/server/admin/provider-reader';

const charge = {
  id: 'ch_1',
  object: 'charge',
  amount: 2000,
  currency: 'usd',
  status: 'succeeded',
  failure_code: null,
  refunded: false,
  created: 1_796_000_000,
};

function answering(status: number, body: unknown) {
  const requests: Request[] = [];
  const fetchStub: typeof fetch = async (input, init) => {
    requests.push(new Request(input, init));
    return new Response(typeof body === 'string' ? body : JSON.stringify(body), { status });
  };
  const reader = createProviderReader({
    baseUrl: 'http://provider.test',
    secretKey: 'sk_test_x',
    fetch: fetchStub,
  });
  return { reader, requests };
}

describe('createProviderReader', () => {
  it('lists an order’s charges with the API key, the order id encoded', async () => {
    const { reader, requests } = answering(200, { object: 'list', data: [charge] });
    expect(await reader.listCharges('a&b=c')).toEqual([charge].map(({ object: _o, ...rest }) => rest));
    expect(requests[0]?.url).toBe('http://provider.test/v1/charges?order=a%26b%3Dc');
    expect(requests[0]?.headers.get('authorization')).toBe('Bearer sk_test_x');
    expect(requests[0]?.method).toBe('GET');
  });

  it('reads a charge’s events from GET /v1/events', async () => {
    const event = { id: 'evt_1', type: 'charge.succeeded', charge: 'ch_1', created: 1, delivery: null };
    const { reader, requests } = answering(200, { object: 'list', data: [event] });
    expect(await reader.listEvents('ch_1')).toEqual([
      { id: 'evt_1', type: 'charge.succeeded', created: 1, delivery: null },
    ]);
    expect(new URL(requests[0]?.url ?? '').pathname).toBe('/v1/events');
  });

  it('refuses an error status, a body that is not JSON, and a list of the wrong shape', async () => {
    await expect(
      answering(401, { error: { type: 'authentication_error' } }).reader.listCharges('o'),
    ).rejects.toThrow(/401/);
    await expect(answering(200, '<html>proxy error</html>').reader.listCharges('o')).rejects.toThrow();
    await expect(
      answering(200, { data: [{ ...charge, amount: '2000' }] }).reader.listCharges('o'),
    ).rejects.toThrow();
  });
});
