/** The HTTP server: Hono on Node (@hono/node-server), the route mounted at POST /notes. */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Database } from './db.ts';
import { createNotesRoute } from './notes.ts';

export function createApp(db: Database) {
  const notes = createNotesRoute(db);
  const app = new Hono();
  app.post('/notes', (c) => notes(c.req.raw)); // Hono's request is the web-standard one
  return app;
}

export function startServer(
  db: Database,
  port: number,
  hostname: string,
  onListening?: (port: number) => void,
) {
  return serve({ fetch: createApp(db).fetch, port, hostname }, (info) => onListening?.(info.port));
}
