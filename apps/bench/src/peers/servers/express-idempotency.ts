/**
 * (d) `express-idempotency` 1.0.6 with its documented configuration: `idempotency()` with no options, i.e. its
 * default IN-MEMORY data adapter (the only adapter it ships; its README lists a Mongo adapter as a separate
 * package and has none for Redis or Postgres). Per its README the route handler checks
 * `getSharedIdempotencyService().isHit(req)` and returns: the middleware has already sent the stored response
 * (it calls `next()` after a replay, by design), and `reportError(req)` releases the key when the handler fails.
 * `/unprotected` is the same handler on the same Express app without the middleware.
 */
import { createServer } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { getSharedIdempotencyService, idempotency } from 'express-idempotency';
import { parseInput, runEffect } from '../effect.ts';
import type { StartServer } from './types.ts';

export const startExpressIdempotency: StartServer = async ({ db }) => {
  const app = express();
  app.use(express.json());

  async function handle(request: Request, response: Response, onFailure: () => Promise<void>) {
    const input = parseInput(request.body);
    if (!input) {
      await onFailure();
      response.status(400).json({ error: 'body must be {"n": <int>}' });
      return;
    }
    try {
      response.json(await runEffect(db, input.n));
    } catch {
      await onFailure();
      response.status(500).json({ error: 'handler failed' });
    }
  }

  app.post('/unprotected', (request, response) => handle(request, response, async () => {}));
  app.post('/protected', idempotency(), async (request, response) => {
    const service = getSharedIdempotencyService();
    if (service.isHit(request)) return;
    await handle(request, response, () => service.reportError(request));
  });

  // The middleware answers a duplicate in flight with `res.status(409); next(error)` and a reused key with a
  // different request with `res.status(417); next(error)`: keep those statuses, answer JSON.
  app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
    if (response.headersSent) return;
    const status = response.statusCode >= 400 ? response.statusCode : 500;
    response.status(status).json({ error: error.message });
  });

  return { server: createServer(app), close: async () => {} };
};
