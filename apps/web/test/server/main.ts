/**
 * The test server: the app's HTTP API (`/api/trpc`, `/api/health`) composed from the same modules as the
 * production build, with the fault points and controls of settings.ts and the benchmark's `bench.*` procedures.
 * The fault suite (tests/faults) and the benchmark (apps/bench) start it; nothing of it is in `next build`.
 *
 *   PORT=3000 node --conditions=react-server --import tsx test/server/main.ts   (cwd: apps/web)
 *
 * `react-server` is the condition Next's server bundles resolve with: `server-only` is then the empty module.
 */
import { serve } from '@hono/node-server';
import { GET as health } from '~/app/api/health/route';
import { createTrpcHandler } from '~/app/api/trpc/handler';
import { checkEnvironmentAtStartup } from '~/server/startup-check';
import { createTestApi } from './api.ts';
import { parseTestServerSettings } from './settings.ts';

await checkEnvironmentAtStartup();
const { warmJobQueue } = await import('~/server/jobs');
warmJobQueue();

const api = createTestApi(parseTestServerSettings(process.env));
const trpc = createTrpcHandler(api.router, { idempotency: api.idempotency });

function route(request: Request): Response | Promise<Response> {
  const { pathname } = new URL(request.url);
  if (pathname.startsWith('/api/trpc/')) return trpc(request);
  if (pathname === '/api/health' && request.method === 'GET') return health();
  return Response.json({ error: 'not found' }, { status: 404 });
}

const port = Number(process.env.PORT ?? 3000);
const hostname = process.env.HOST ?? '127.0.0.1';
serve({ fetch: route, port, hostname }, (info) => {
  console.log(`test server (fault points, controls, bench.*) on http://${hostname}:${info.port}`);
});
