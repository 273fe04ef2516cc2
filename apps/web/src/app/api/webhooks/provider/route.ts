/**
 * POST /api/webhooks/provider — the payment provider's events. Verify the signature over the raw body (bad or
 * stale → 400, nothing stored), apply the event once, and answer 2xx to duplicates so the provider stops
 * redelivering them. A 5xx (database down) makes the provider retry later, which is safe.
 */
import { enqueueFulfilment, prismaTransactionDb } from '@idem/jobs';
import { env } from '~/env';
import { db } from '~/server/db';
import { jobQueue } from '~/server/jobs';
import { metrics } from '~/server/observability/metrics';
import { handleProviderEvent } from '~/server/webhooks/handle-provider-event';
import { providerEventSchema } from '~/server/webhooks/provider-event';
import { SIGNATURE_HEADER, verifySignature } from '~/server/webhooks/signature';

export const dynamic = 'force-dynamic';

export async function POST(request: Request) {
  const rawBody = await request.text();
  const signature = verifySignature(
    request.headers.get(SIGNATURE_HEADER),
    rawBody,
    env.PROVIDER_WEBHOOK_SECRET,
  );
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

  const queue = await jobQueue();
  const outcome = await handleProviderEvent(
    {
      db,
      enqueueFulfilment: async (orderId, tx) => {
        await enqueueFulfilment(queue, orderId, prismaTransactionDb(tx));
      },
    },
    event.data,
  );
  metrics.webhookEvents.inc({
    type: event.data.type,
    result: outcome.duplicate ? 'duplicate' : outcome.effect === 'ignored' ? 'ignored' : 'applied',
  });
  return Response.json({ received: true, ...outcome });
}
