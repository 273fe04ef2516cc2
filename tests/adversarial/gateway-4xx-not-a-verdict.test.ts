/**
 * Red team of the money path — "a final provider 4xx is a decided outcome" must mean the PROVIDER's verdict.
 * Between the shop and the provider there can be a gateway, and a gateway's 4xx says nothing about the charge:
 * a 408 after it had forwarded the request (the charge went through), or a 404 HTML page of a misrouted path
 * (nothing reached the provider). Taken as a verdict, the order is cancelled, its stock released and the answer
 * stored — and in the 408 case the money is kept for a cancelled order.
 */
import { createProviderClient, type PaymentProvider, ProviderUnavailableError } from '@idem/payments';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db } from '~/server/db';
import {
  aliceCart,
  aliceRequest,
  caught,
  productWithStock,
  type RunningProvider,
  startCheckoutWorld,
  stockOf,
  succeededChargesFor,
} from './support/checkout.ts';

let provider: RunningProvider;
let client: PaymentProvider;

beforeAll(async () => {
  ({ provider, client } = await startCheckoutWorld());
});
afterAll(async () => {
  await provider?.close();
});

const isChargePost = (url: URL, init?: RequestInit) =>
  url.pathname === '/v1/charges' && init?.method === 'POST';

/** A gateway that forwards the next charge to the provider, then answers 408 instead of the provider's 200. */
function gatewayTimingOutAfterForwarding(): typeof fetch {
  let armed = true;
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const response = await fetch(url, init);
    if (!armed || !isChargePost(url, init)) return response;
    armed = false;
    await response.arrayBuffer();
    return new Response('<html><body><h1>408 Request Time-out</h1></body></html>', {
      status: 408,
      headers: { 'content-type': 'text/html' },
    });
  };
}

/** A gateway that answers the next charge with its own 404 page, without forwarding it. */
function gatewayNotFound(): typeof fetch {
  let armed = true;
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (!armed || !isChargePost(url, init)) return fetch(url, init);
    armed = false;
    return new Response('<html><body>404 Not Found</body></html>', {
      status: 404,
      headers: { 'content-type': 'text/html' },
    });
  };
}

/** As before: any 4xx but 409/429 taken as the provider's final "rejected". */
const anyFourXxAsVerdict = (real: PaymentProvider): PaymentProvider => ({
  listCharges: (orderId) => real.listCharges(orderId),
  async charge(request) {
    try {
      return await real.charge(request);
    } catch (error) {
      const status = Number(/answered (\d{3})/.exec(String(error))?.[1]);
      if (
        !(error instanceof ProviderUnavailableError) ||
        status < 400 ||
        status > 499 ||
        status === 409 ||
        status === 429
      )
        throw error;
      return {
        outcome: 'rejected',
        code: 'provider_rejected',
        message: `Payment provider answered ${status}`,
      };
    }
  },
});

const through = (gateway: typeof fetch) =>
  createProviderClient({
    baseUrl: provider.url,
    secretKey: 'sk_test_idem',
    timeoutMs: 2_000,
    fetch: gateway,
  });

async function checkoutThrough(
  gateway: typeof fetch,
  as: (client: PaymentProvider) => PaymentProvider = (c) => c,
) {
  const sku = await productWithStock(5);
  const key = crypto.randomUUID();
  const input = aliceCart(sku, 2);
  const first = await caught(aliceRequest(key, as(through(gateway))).checkout.placeOrder(input));
  const order = await db.order.findFirstOrThrow({ where: { items: { some: { sku } } } });
  return { sku, key, input, first, order };
}

describe('a 4xx that is not the provider’s verdict', () => {
  it('CONTROL (any 4xx a verdict, as before): after a gateway 408 the order is cancelled, its stock released, and the charge kept', async () => {
    const { sku, first, order } = await checkoutThrough(
      gatewayTimingOutAfterForwarding(),
      anyFourXxAsVerdict,
    );
    expect(first.code).toBe('PAYMENT_REQUIRED');
    const settled = await db.order.findUniqueOrThrow({ where: { id: order.id } });
    expect(settled.status).toBe('payment_failed');
    expect(await stockOf(sku)).toBe(5);
    expect(await succeededChargesFor(client, sku)).toBe(1);
  });

  it('a gateway 408 after the charge went through: 503 and the order stays pending; the retry is paid by that charge', async () => {
    const { sku, key, input, first, order } = await checkoutThrough(gatewayTimingOutAfterForwarding());
    expect(first.code).toBe('SERVICE_UNAVAILABLE');
    expect(order.status).toBe('pending');
    expect(await stockOf(sku)).toBe(3);
    expect(await succeededChargesFor(client, sku)).toBe(1);

    const retried = await aliceRequest(key, client).checkout.placeOrder(input);
    expect(retried.status).toBe('paid');
    expect(await succeededChargesFor(client, sku)).toBe(1);
  });

  it('a gateway 404 page: 503 and the order stays pending (nothing stored); the retry charges once', async () => {
    const { sku, key, input, first, order } = await checkoutThrough(gatewayNotFound());
    expect(first.code).toBe('SERVICE_UNAVAILABLE');
    expect(order.status).toBe('pending');
    expect(await succeededChargesFor(client, sku)).toBe(0);

    const retried = await aliceRequest(key, client).checkout.placeOrder(input);
    expect(retried.status).toBe('paid');
    expect(await succeededChargesFor(client, sku)).toBe(1);
    expect(await stockOf(sku)).toBe(3);
  });
});
