/** The HTTP server: Express 5, the notes router, and an error handler that never sends internals. */
import express, { type ErrorRequestHandler } from 'express';
import type { Database } from './db.ts';
import { createNotesRouter } from './notes.ts';

/**
 * A thrown handler (the database is down) answers a generic 500 problem: the middleware stores no 5xx, so the
 * key is released (and the transaction rolled back) and a retry runs again.
 */
const genericErrors: ErrorRequestHandler = (error, _req, res, _next) => {
  console.error(error);
  res
    .status(500)
    .type('application/problem+json')
    .send('{"type":"about:blank","title":"Internal Server Error","status":500}');
};

export function createApp(db: Database) {
  const app = express();
  app.disable('x-powered-by');
  app.use(createNotesRouter(db));
  app.use(genericErrors);
  return app;
}
