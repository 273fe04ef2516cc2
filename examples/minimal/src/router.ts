/** The API: one idempotent mutation. */
import { TRPCError } from '@trpc/server';
import { z } from 'zod';
import type { Database } from './db.ts';
import { authedProcedure, createIdempotencyProcedures, router } from './trpc.ts';

export const createNoteInput = z.object({ text: z.string().trim().min(1).max(500) });

export function createAppRouter(db: Database) {
  const idempotency = createIdempotencyProcedures(db);
  const appRouter = router({
    notes: router({
      /**
       * Transactional mode: the claim, the note and the stored result commit together. Write through
       * `ctx.idempotency.tx`, or the write is not covered.
       */
      create: authedProcedure
        .concat(idempotency.transactional())
        .input(createNoteInput)
        .mutation(async ({ ctx, input }) => {
          const { tx } = ctx.idempotency;
          // A business rule: its error is stored and replayed like a result.
          const existing = await tx.note.findFirst({ where: { author: ctx.principal, text: input.text } });
          if (existing)
            throw new TRPCError({
              code: 'UNPROCESSABLE_CONTENT',
              message: 'You already have a note with this text.',
            });
          return tx.note.create({ data: { author: ctx.principal, text: input.text } });
        }),
    }),
  });
  return { router: appRouter, idempotency };
}

export type AppRouter = ReturnType<typeof createAppRouter>['router'];
