/** POST /api/webhooks/provider — the payment provider's events (see server/webhooks/receive-provider-webhook.ts). */
import { env } from '~/env';
import { db } from '~/server/db';
import { enqueueFulfilmentIn } from '~/server/jobs';
import { traceRequest } from '~/server/observability/tracing';
import { handleProviderEvent } from '~/server/webhooks/handle-provider-event';
import { receiveProviderWebhook } from '~/server/webhooks/receive-provider-webhook';

export const dynamic = 'force-dynamic';

export async function POST(request: Request) {
  return traceRequest(request, () =>
    receiveProviderWebhook(request, {
      secret: env.PROVIDER_WEBHOOK_SECRET,
      apply: (event) => handleProviderEvent({ db, enqueueFulfilment: enqueueFulfilmentIn }, event),
    }),
  );
}
