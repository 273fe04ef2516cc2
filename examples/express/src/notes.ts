/**
 * The route: `POST /notes`, behind `express.json()` and the idempotency middleware. Transactional mode: the
 * claim, the note and the stored response commit together — write through `idempotency.tx(res)`, or the write
 * is not covered.
 */
import { createExpressIdempotency } from '@idem/idempotency/express';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import express, { type Router } from 'express';
import { z } from 'zod';
import { principalOf } from './auth.ts';
import type { Database } from './db.ts';

export const createNoteInput = z.object({ text: z.string().trim().min(1).max(500) });

export function createNotesRouter(db: Database): Router {
  const idempotency = createExpressIdempotency({
    store: createPrismaIdempotencyStore(db), // `tx(res)` below: this client's transaction type
    getScope: (req) => principalOf(req.get('authorization') ?? null), // null → 401
  });
  const router = express.Router();
  router.post(
    '/notes',
    express.json(), // before the middleware: the body is part of the fingerprint
    idempotency.transactional({ procedure: 'notes.create' }),
    async (req, res) => {
      const parsed = createNoteInput.safeParse(req.body);
      // A validation error is not stored: the same key with a fixed body runs.
      if (!parsed.success) {
        res.status(400).json({ error: 'Send {"text": "…"} (1–500 characters).' });
        return;
      }
      const tx = idempotency.tx(res);
      const { scope } = idempotency.context(res);
      // A business rule: its 422 is stored and replayed like a result (UNPROCESSABLE_CONTENT is a stored code).
      const existing = await tx.note.findFirst({ where: { author: scope, text: parsed.data.text } });
      if (existing) {
        res.status(422).json({ error: 'You already have a note with this text.' });
        return;
      }
      const note = await tx.note.create({ data: { author: scope, text: parsed.data.text } });
      res.status(201).location(`/notes/${note.id}`).json(note);
    },
  );
  return router;
}
