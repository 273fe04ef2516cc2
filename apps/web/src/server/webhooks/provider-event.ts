import { z } from 'zod';

/** The provider's event envelope (Stripe-shaped). Unknown types are acknowledged and ignored. */
export const providerEventSchema = z.object({
  id: z.string().min(1).max(255),
  object: z.literal('event'),
  type: z.string().min(1).max(100),
  created: z.number().int(),
  data: z.object({
    object: z.object({
      id: z.string().min(1),
      order: z.string(),
      amount: z.number().int(),
      currency: z.string(),
      status: z.enum(['succeeded', 'failed']),
      refunded: z.boolean().optional(),
    }),
  }),
});
export type ProviderEvent = z.infer<typeof providerEventSchema>;
