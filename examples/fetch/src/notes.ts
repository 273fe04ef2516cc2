/**
 * The route: `POST /notes` as a web-standard handler (`Request → Response`), the same function a Next.js
 * `app/api/notes/route.ts` would export as `POST`. Transactional mode: the claim, the note and the stored
 * response commit together — write through `tx`, or the write is not covered.
 */
import { createFetchIdempotency } from '@idem/idempotency/fetch';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { z } from 'zod';
import { principalOf } from './auth.ts';
import type { Database } from './db.ts';

export const createNoteInput = z.object({ text: z.string().trim().min(1).max(500) });

export function createNotesRoute(db: Database) {
  const idempotency = createFetchIdempotency({
    store: createPrismaIdempotencyStore(db), // `tx` below: this client's transaction type
    getScope: (request) => principalOf(request.headers.get('authorization')), // null → 401
  });
  return idempotency.transactional(
    async (request, { tx, scope }) => {
      const parsed = createNoteInput.safeParse(await request.json().catch(() => null));
      // A validation error is not stored: the same key with a fixed body runs.
      if (!parsed.success)
        return Response.json({ error: 'Send {"text": "…"} (1–500 characters).' }, { status: 400 });
      // A business rule: its 422 is stored and replayed like a result (UNPROCESSABLE_CONTENT is a stored code).
      const existing = await tx.note.findFirst({ where: { author: scope, text: parsed.data.text } });
      if (existing)
        return Response.json({ error: 'You already have a note with this text.' }, { status: 422 });
      const note = await tx.note.create({ data: { author: scope, text: parsed.data.text } });
      return Response.json(note, { status: 201, headers: { location: `/notes/${note.id}` } });
    },
    { procedure: 'notes.create' },
  );
}
