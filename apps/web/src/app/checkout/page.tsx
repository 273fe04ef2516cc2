import type { Metadata } from 'next';
import { DEFAULT_KEY_LIFETIMES } from '~/server/key-lifetimes';
import { CheckoutForm } from './checkout-form';

export const metadata: Metadata = { title: 'Checkout' };

export default function CheckoutPage() {
  return <CheckoutForm browserIntentHours={DEFAULT_KEY_LIFETIMES.browserIntentHours} />;
}
