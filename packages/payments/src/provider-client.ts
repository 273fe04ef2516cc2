/**
 * Client for the card processor (apps/provider, Stripe-like). Every charge carries an Idempotency-Key that
 * exists before the money moves, so a retried call can never charge twice; and the provider can be asked what
 * happened to an order (`listCharges`), which is the truth once its key has been forgotten.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { z } from 'zod';
import { PaymentFailureCode } from './failure-codes.ts';

const chargeSchema = z.object({
  id: z.string(),
  amount: z.number().int(),
  currency: z.string(),
  /** The order the charge was made for (our order id, sent as `order`). */
  order: z.string(),
  status: z.enum(['succeeded', 'failed']),
  /** A succeeded charge the provider has given back in full. */
  refunded: z.boolean().default(false),
  failure_code: z.string().nullish(),
  failure_message: z.string().nullish(),
});
export type Charge = z.infer<typeof chargeSchema>;

const chargeListSchema = z.object({ data: z.array(chargeSchema) });

const errorSchema = z.object({
  error: z.object({
    type: z.string(),
    code: z.string().optional(),
    message: z.string().optional(),
    param: z.string().optional(),
    charge: z.string().optional(),
  }),
});

/** Why a charge was decided against: the card's issuer said no, or the provider refused the request itself. */
export type ChargeResult =
  | { outcome: 'succeeded'; charge: Charge }
  | { outcome: 'declined'; chargeId: string | null; code: string; message: string }
  | { outcome: 'rejected'; code: string; message: string };

export interface ChargeRequest {
  amountCents: number;
  currency: string;
  source: string;
  orderId: string;
  idempotencyKey: string;
}

export interface PaymentProvider {
  charge(request: ChargeRequest): Promise<ChargeResult>;
  /**
   * Every charge the provider holds for the order, oldest first. A list that holds a charge of another order is
   * not an answer about this one: ProviderUnavailableError.
   */
  listCharges(orderId: string): Promise<Charge[]>;
}

/** The provider as the reconciler needs it: it also gives back charges that landed on a cancelled order. */
export interface RefundingPaymentProvider extends PaymentProvider {
  /**
   * Gives a succeeded charge back in full, under `idempotencyKey` (retrying it is safe). Resolves once the charge
   * is refunded, also when it already was; ProviderUnavailableError when nothing was decided.
   */
  refund(request: { chargeId: string; idempotencyKey: string }): Promise<void>;
}

/**
 * Nothing was decided: the provider is unreachable, timed out, answered 5xx / 409 / 429, or refused our own
 * credentials. Retrying later (with the same key) is safe.
 */
const tracer = trace.getTracer('@idem/payments');

export class ProviderUnavailableError extends Error {
  override name = 'ProviderUnavailableError';
}

export function createProviderClient(options: {
  baseUrl: string;
  secretKey: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}): RefundingPaymentProvider {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;

  /**
   * One call, as a client span of the active trace whose context travels in the request's `traceparent` (W3C
   * Trace Context): with no OpenTelemetry SDK registered, the span is a no-op and no header is added.
   */
  function send(path: string, init: RequestInit): Promise<Response> {
    const name = `provider ${init.method ?? 'GET'} ${path.split('?')[0]}`;
    return tracer.startActiveSpan(name, { kind: SpanKind.CLIENT }, async (span) => {
      const traceHeaders: Record<string, string> = {};
      propagation.inject(context.active(), traceHeaders);
      try {
        const response = await doFetch(new URL(path, options.baseUrl), {
          ...init,
          headers: { authorization: `Bearer ${options.secretKey}`, ...traceHeaders, ...init.headers },
          signal: AbortSignal.timeout(timeoutMs),
        });
        span.setAttribute('http.response.status_code', response.status);
        return response;
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw new ProviderUnavailableError(
          `Payment provider unreachable: ${error instanceof Error ? error.message : String(error)}`,
        );
      } finally {
        span.end();
      }
    });
  }

  return {
    async charge(request) {
      const response = await send('/v1/charges', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': request.idempotencyKey },
        body: JSON.stringify({
          amount: request.amountCents,
          currency: request.currency,
          source: request.source,
          order: request.orderId,
        }),
      });
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
      // A 4xx is final only as the provider's own verdict on this request: its error body, not about the key.
      // Without that body the 4xx came from something in between (a gateway's 404 or 408, perhaps after it had
      // forwarded the charge); an idempotency error says the key already stands for another request, which may
      // have charged. Neither tells whether money moved: undecided, so the retry asks the provider first.
      if (isUndecided(response.status) || !parsed.success || parsed.data.error.type === 'idempotency_error') {
        throw new ProviderUnavailableError(`Payment provider answered ${response.status}`);
      }
      // Any other 4xx is final: the provider will never charge this request. A bad card token is the customer's
      // to fix; anything else is ours, but either way nothing was charged and retrying changes nothing.
      const { error } = parsed.data;
      return {
        outcome: 'rejected',
        code: error.param === 'source' ? PaymentFailureCode.invalidSource : PaymentFailureCode.rejected,
        message: error.message ?? `Payment provider answered ${response.status}`,
      };
    },

    async listCharges(orderId) {
      const response = await send(`/v1/charges?order=${encodeURIComponent(orderId)}`, { method: 'GET' });
      const body: unknown = await response.json().catch(() => null);
      if (!response.ok) throw new ProviderUnavailableError(`Payment provider answered ${response.status}`);
      const charges = chargeListSchema.parse(body).data;
      const foreign = charges.find((charge) => charge.order !== orderId);
      if (foreign)
        throw new ProviderUnavailableError(
          `Payment provider listed charge ${foreign.id} of order ${foreign.order} for order ${orderId}`,
        );
      return charges;
    },

    async refund({ chargeId, idempotencyKey }) {
      const response = await send('/v1/refunds', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
        body: JSON.stringify({ charge: chargeId }),
      });
      if (response.ok) return;
      const parsed = errorSchema.safeParse(await response.json().catch(() => null));
      if (parsed.success && parsed.data.error.code === 'charge_already_refunded') return;
      if (isUndecided(response.status))
        throw new ProviderUnavailableError(`Payment provider answered ${response.status} to a refund`);
      throw new Error(
        `Payment provider refused to refund charge ${chargeId} (${response.status}): ${parsed.success ? (parsed.data.error.message ?? '') : ''}`,
      );
    },
  };
}

/** Statuses after which the provider may or may not act later: only a retry with the same key can tell. */
function isUndecided(status: number): boolean {
  if (status >= 500) return true; // the provider failed: maybe charged, maybe not
  if (status === 408) return true; // a timeout on the way: the request may or may not have been processed
  if (status === 409) return true; // the same key is still running there
  if (status === 429) return true; // rate limited before anything ran
  if (status === 401 || status === 403) return true; // our credentials: a configuration error, not a verdict
  return false;
}
