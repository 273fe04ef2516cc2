/** The admin dashboard's API (/admin): admins only — 401 without a principal, 403 for everyone else. */
import { z } from 'zod';
import { keyRefSchema } from '~/lib/key-ref';
import { evictKey } from '../admin/evict-key.ts';
import { listStuckKeys } from '../admin/key-rows.ts';
import { searchKeys } from '../admin/key-search.ts';
import { getKeyTrail } from '../admin/key-trail.ts';
import { getOutcomeSeries, outcomeRangeSchema } from '../admin/outcome-series.ts';
import { getAdminOverview } from '../admin/overview.ts';
import { logger } from '../observability/log.ts';
import { adminProcedure, createTRPCRouter } from '../trpc.ts';

export const adminRouter = createTRPCRouter({
  overview: adminProcedure.query(({ ctx }) => getAdminOverview(ctx.db)),
  outcomes: adminProcedure
    .input(z.object({ range: outcomeRangeSchema }))
    .query(({ ctx, input }) => getOutcomeSeries(ctx.db, input.range)),
  searchKeys: adminProcedure
    .input(z.object({ query: z.string().max(300) }))
    .query(({ ctx, input }) => searchKeys(ctx.db, input.query)),
  stuckKeys: adminProcedure.query(({ ctx }) => listStuckKeys(ctx.db)),
  keyTrail: adminProcedure
    .input(z.object({ ref: keyRefSchema }))
    .query(({ ctx, input }) => getKeyTrail(ctx.db, input.ref)),
  /**
   * Not keyed: evicting is naturally idempotent here — a repeat finds the key gone (404) or changed (409), and
   * never deletes a row the admin did not look at.
   */
  evictKey: adminProcedure
    .input(
      z.object({
        ref: keyRefSchema,
        version: z.string().regex(/^[0-9a-f]{16}$/),
        confirmNotStuck: z.boolean().default(false),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const result = await evictKey(ctx.db, ctx.admin, input);
      logger.info(
        { admin: ctx.admin.id, procedure: input.ref.procedure, rule: result.rule, audit_id: result.auditId },
        'admin evicted an idempotency key',
      );
      return result;
    }),
});
