import 'server-only';
import { EnvError } from '~/env-error';

/**
 * Parses the environment now instead of on the first request; a bad one exits the process with one line. A
 * process armed with the test seams (IDEM_TEST_SEAMS=1: fault points, control routers, bench routes) says so
 * loudly at start, so a deployment that inherited the flag is seen in its first log line.
 */
export async function checkEnvironmentAtStartup(): Promise<void> {
  try {
    const { env } = await import('~/env');
    if (env.testSeams)
      console.error(
        'web: WARNING: IDEM_TEST_SEAMS=1 — this process serves the TEST build of its router (fault points, controls, bench routes); never in production',
      );
  } catch (error) {
    if (!(error instanceof EnvError)) throw error;
    console.error(`web: ${error.message}`);
    process.exit(1);
  }
}
