/**
 * The provider webhook receiver behind POST /api/webhooks/provider: read the raw body (capped), verify its
 * signature (bad or stale → 400, nothing stored), parse the event and apply it once. Duplicates and anomalies
 * are answered 2xx so the provider stops redelivering them; a 5xx (database down) makes it retry later, which is
 * safe.
 */
import { BodyTooLargeError, readTextWithin } from '../http/limit-body.ts';
import { metrics } from '../observability/metrics.ts';
import type { WebhookOutcome } from './handle-provider-event.ts';
import { type ProviderEvent, providerEventSchema } from './provider-event.ts';
import { SIGNATURE_HEADER, verifySignature } from './signature.ts';

/** A provider event is under 2 kB; anything past this is refused before it is read, parsed or verified. */
export const MAX_WEBHOOK_BODY_BYTES = 64 * 1024;

export interface WebhookReceiverOptions {
  secret: string;
  /** Applies a verified event (handleProviderEvent with the app's database and queue). */
  apply(event: ProviderEvent): Promise<WebhookOutcome>;
  maxBodyBytes?: number;
}

export async function receiveProviderWebhook(
  request: Request,
  { secret, apply, maxBodyBytes = MAX_WEBHOOK_BODY_BYTES }: WebhookReceiverOptions,
): Promise<Response> {
  let rawBody: string;
  try {
    rawBody = await readTextWithin(request, maxBodyBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) return Response.json({ error: error.message }, { status: 413 });
    throw error;
  }
  const signature = verifySignature(request.headers.get(SIGNATURE_HEADER), rawBody, secret);
  if (!signature.ok)
    return Response.json({ error: `Invalid signature: ${signature.reason}` }, { status: 400 });

  let json: unknown;
  try {
    json = JSON.parse(rawBody);
  } catch {
    return Response.json({ error: 'The body is not JSON.' }, { status: 400 });
  }
  const event = providerEventSchema.safeParse(json);
  if (!event.success) return Response.json({ error: 'Not a provider event.' }, { status: 400 });

  // An anomaly (a charge that is not its order's amount or currency) is still a 2xx: the event is signed and
  // recorded, and redelivering the same bytes can never make it match — retries would only repeat the alarm.
  const outcome = await apply(event.data);
  metrics.webhookEvents.inc({
    type: event.data.type,
    result: outcome.duplicate ? 'duplicate' : resultOf(outcome.effect),
  });
  return Response.json({ received: true, ...outcome });
}

function resultOf(effect: Extract<WebhookOutcome, { duplicate: false }>['effect']): string {
  if (effect === 'ignored' || effect === 'anomaly') return effect;
  return 'applied';
}
