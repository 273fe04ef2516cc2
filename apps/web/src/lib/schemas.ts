/** Input schemas shared by the server procedures and the browser forms: one source of truth. */
import { z } from 'zod';

export const MAX_QUANTITY = 20;

export const cartLineSchema = z.object({
  // Fix: a NUL byte reached Postgres (which cannot store it in text: 22021) and the checkout answered 500.
  // No control characters and no lone surrogates: a SKU is printable text.
  sku: z
    .string()
    .trim()
    .min(1)
    .max(64)
    .regex(/^[^\p{Cc}\p{Cs}]+$/u, 'A SKU cannot contain control characters.'),
  quantity: z.number().int().min(1).max(MAX_QUANTITY),
});

export const TEST_CARD_TOKENS = [
  { token: 'tok_visa', label: 'Visa •••• 4242 (succeeds)' },
  { token: 'tok_mastercard', label: 'Mastercard •••• 4444 (succeeds)' },
  { token: 'tok_chargeDeclined', label: 'Visa •••• 0002 (declined)' },
  { token: 'tok_chargeDeclinedInsufficientFunds', label: 'Visa •••• 9995 (insufficient funds)' },
] as const;

export const placeOrderInput = z.object({
  items: z
    .array(cartLineSchema)
    .min(1, 'Your cart is empty.')
    .max(50)
    .refine((items) => new Set(items.map((item) => item.sku)).size === items.length, {
      message: 'Each product may appear only once; combine the quantities.',
    }),
  email: z.email('Enter a valid email address.').max(254),
  cardToken: z
    .string()
    .trim()
    .regex(/^tok_[A-Za-z0-9_]{1,64}$/, 'Use a test card token such as tok_visa.'),
});
export type PlaceOrderInput = z.infer<typeof placeOrderInput>;

export const orderIdInput = z.object({ id: z.uuid() });
