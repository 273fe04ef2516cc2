import type { Metadata } from 'next';
import { env } from '~/env';
import { intentOwnerOf } from '~/server/auth/intent-owner';
import { getRequestPrincipal } from '~/server/request-principal';
import { CheckoutForm } from './checkout-form';

export const metadata: Metadata = { title: 'Checkout' };
// The intent lifetime is the server's runtime configuration (IDEM_INTENT_MAX_AGE_HOURS), not a build-time value,
// and the intent's owner is this request's principal.
export const dynamic = 'force-dynamic';

export default async function CheckoutPage() {
  const principal = await getRequestPrincipal();
  return (
    <CheckoutForm
      browserIntentHours={env.keyLifetimes.browserIntentHours}
      intentOwner={intentOwnerOf(principal, env.SESSION_SECRET)}
    />
  );
}
