/**
 * What the admin pages and the metrics ask the card processor, through its API as they would ask a real one: the
 * charges it holds for an order (`GET /v1/charges?order=`), each charge's events with their webhook delivery
 * attempts (`GET /v1/events?charge=`), and the events it could not deliver (`GET /v1/events?delivery_success=false`,
 * Stripe's way of finding webhooks given up). Read-only; answers are validated, never trusted.
 */
import { z } from 'zod';

const chargeSchema = z.object({
  id: z.string(),
  amount: z.number().int(),
  currency: z.string(),
  status: z.string(),
  failure_code: z.string().nullable(),
  refunded: z.boolean(),
  created: z.number().int(),
});

const eventSchema = z.object({
  id: z.string(),
  type: z.string(),
  created: z.number().int(),
  delivery: z
    .object({
      attempts: z.number().int(),
      delivered_at: z.string().nullable(),
      failed_at: z.string().nullable(),
      last_status: z.number().int().nullable(),
      last_error: z.string().nullable(),
    })
    .nullable(),
});

const listOf = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item) });
const pageOf = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), has_more: z.boolean() });

/** The most a single read of undelivered events lists (the API's maximum page). */
export const UNDELIVERED_EVENTS_PAGE = 100;

export type ProviderChargeRecord = z.infer<typeof chargeSchema>;
export type ProviderEventRecord = z.infer<typeof eventSchema>;

export interface ProviderReader {
  /** Every charge for the order, oldest first. */
  listCharges(orderId: string): Promise<ProviderChargeRecord[]>;
  /** The charge's events, oldest first, with their delivery state. */
  listEvents(chargeId: string): Promise<ProviderEventRecord[]>;
  /**
   * Events created since `since` whose webhook was not delivered (given up, or still being retried): the newest
   * `UNDELIVERED_EVENTS_PAGE`, and whether there are more.
   */
  listUndeliveredEvents(since: Date): Promise<{ events: ProviderEventRecord[]; hasMore: boolean }>;
}

export function createProviderReader(options: {
  baseUrl: string;
  secretKey: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}): ProviderReader {
  const doFetch = options.fetch ?? fetch;
  async function get<T extends z.ZodType>(path: string, schema: T): Promise<z.infer<T>> {
    const response = await doFetch(new URL(path, options.baseUrl), {
      headers: { authorization: `Bearer ${options.secretKey}` },
      signal: AbortSignal.timeout(options.timeoutMs ?? 5_000),
    });
    if (!response.ok) throw new Error(`provider answered ${response.status} to GET ${path}`);
    return schema.parse(await response.json());
  }
  return {
    async listCharges(orderId) {
      return (await get(`/v1/charges?order=${encodeURIComponent(orderId)}`, listOf(chargeSchema))).data;
    },
    async listEvents(chargeId) {
      return (await get(`/v1/events?charge=${encodeURIComponent(chargeId)}`, listOf(eventSchema))).data;
    },
    async listUndeliveredEvents(since) {
      const createdGte = Math.floor(since.getTime() / 1000);
      const page = await get(
        `/v1/events?delivery_success=false&created[gte]=${createdGte}&limit=${UNDELIVERED_EVENTS_PAGE}`,
        pageOf(eventSchema),
      );
      return { events: page.data, hasMore: page.has_more };
    },
  };
}
