/**
 * Runs once when a server process starts (Next's instrumentation hook): a configuration the server must not run
 * with — in production a missing or public demo secret — stops it here with one line, before it serves anything.
 */
export async function register() {
  if (process.env.NEXT_RUNTIME !== 'nodejs') return;
  const { checkEnvironmentAtStartup } = await import('./server/startup-check');
  await checkEnvironmentAtStartup();
}
