/**
 * Runs once when a server process starts (Next's instrumentation hook): a configuration the server must not run
 * with — in production a missing or public demo secret — stops it here with one line, before it serves anything.
 * Then the job queue's sender starts in the background: a paying transaction writes its fulfilment job through
 * it, and should not be the one that waits for pg-boss to connect (or, on a new database, to install its schema).
 */
export async function register() {
  if (process.env.NEXT_RUNTIME !== 'nodejs') return;
  const { checkEnvironmentAtStartup } = await import('./server/startup-check');
  await checkEnvironmentAtStartup();
  const { warmJobQueue } = await import('./server/jobs');
  warmJobQueue();
  const { env } = await import('./env');
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT)
    (await import('./server/observability/otel-sdk')).startTracingSdk(
      env.OTEL_EXPORTER_OTLP_ENDPOINT,
      env.OTEL_SERVICE_NAME,
    );
  else if (env.IDEM_TRACING) (await import('@idem/idempotency/otel')).traceIdempotency();
}
