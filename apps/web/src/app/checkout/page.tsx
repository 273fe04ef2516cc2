import type { Metadata } from 'next';
import { env } from '~/env';
import { CheckoutForm } from './checkout-form';

export const metadata: Metadata = { title: 'Checkout' };
// The intent lifetime is the server's runtime configuration (IDEM_INTENT_MAX_AGE_HOURS), not a build-time value.
export const dynamic = 'force-dynamic';

export default function CheckoutPage() {
  return <CheckoutForm browserIntentHours={env.keyLifetimes.browserIntentHours} />;
}
