/**
 * Client for the card processor (apps/provider, Stripe-like). Every charge carries an Idempotency-Key that
 * exists before the money moves, so a retried call can never charge twice.
 */
import { z } from 'zod';
import { PaymentProviderUnavailableError } from '../errors.ts';

const chargeSchema = z.object({
  id: z.string(),
  amount: z.number().int(),
  currency: z.string(),
  status: z.enum(['succeeded', 'failed']),
});
export type Charge = z.infer<typeof chargeSchema>;

const errorSchema = z.object({
  error: z.object({
    type: z.string(),
    code: z.string().optional(),
    message: z.string().optional(),
    charge: z.string().optional(),
  }),
});

export type ChargeResult =
  | { outcome: 'succeeded'; charge: Charge }
  | { outcome: 'declined'; chargeId: string | null; code: string; message: string };

export interface ChargeRequest {
  amountCents: number;
  currency: string;
  source: string;
  orderId: string;
  idempotencyKey: string;
}

export interface PaymentProvider {
  charge(request: ChargeRequest): Promise<ChargeResult>;
}

export function createProviderClient(options: {
  baseUrl: string;
  secretKey: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}): PaymentProvider {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  return {
    async charge(request) {
      let response: Response;
      try {
        response = await doFetch(new URL('/v1/charges', options.baseUrl), {
          method: 'POST',
          headers: {
            authorization: `Bearer ${options.secretKey}`,
            'content-type': 'application/json',
            'idempotency-key': request.idempotencyKey,
          },
          body: JSON.stringify({
            amount: request.amountCents,
            currency: request.currency,
            source: request.source,
            order: request.orderId,
          }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        throw new PaymentProviderUnavailableError(
          `Payment provider unreachable: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
      const body: unknown = await response.json().catch(() => null);
      if (response.ok) return { outcome: 'succeeded', charge: chargeSchema.parse(body) };
      const parsed = errorSchema.safeParse(body);
      if (response.status === 402 && parsed.success) {
        const { code, message, charge } = parsed.data.error;
        return {
          outcome: 'declined',
          chargeId: charge ?? null,
          code: code ?? 'card_declined',
          message: message ?? 'Your card was declined.',
        };
      }
      if (response.status >= 500 || response.status === 409 || response.status === 429) {
        throw new PaymentProviderUnavailableError(`Payment provider answered ${response.status}`);
      }
      // Any other 4xx is a bug on our side (bad key, bad request): fail loudly, never as a decline.
      const detail = parsed.success ? parsed.data.error.message : undefined;
      throw new Error(`Payment provider rejected the request (${response.status}): ${detail ?? 'no detail'}`);
    },
  };
}
