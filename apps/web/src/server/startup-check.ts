import 'server-only';
import { EnvError } from '~/env-error';

/** Parses the environment now instead of on the first request; a bad one exits the process with one line. */
export async function checkEnvironmentAtStartup(): Promise<void> {
  try {
    await import('~/env');
  } catch (error) {
    if (!(error instanceof EnvError)) throw error;
    console.error(`web: ${error.message}`);
    process.exit(1);
  }
}
