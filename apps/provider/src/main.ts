/**
 * Process entry point: `pnpm --filter @idem/provider start`. Configuration problems and busy ports are operator
 * errors, so they get one readable line and exit 1, not a stack trace.
 */
import { type Env, EnvError, parseEnv } from './env.ts';
import { errorCode } from './errors.ts';
import { type RunningProvider, startProvider } from './index.ts';

function fail(message: string): never {
  console.error(`provider: ${message}`);
  process.exit(1);
}

/** Never print a password that may be embedded in DATABASE_URL (or the webhook URL). */
function redact(value: string): string {
  try {
    const url = new URL(value);
    if (url.password !== '') url.password = '***';
    return url.toString();
  } catch {
    return '(unparseable URL)';
  }
}

function describeStartupError(err: unknown, env: Env): string {
  const code = errorCode(err);
  if (code === 'EADDRINUSE') return `port ${env.port} on ${env.host} is already in use (EADDRINUSE)`;
  if (code === 'EACCES') return `not allowed to listen on ${env.host}:${env.port} (EACCES)`;
  if (code === 'EADDRNOTAVAIL') return `cannot listen on ${env.host}: address not available (EADDRNOTAVAIL)`;
  // Connecting to "localhost" tries several addresses and fails with an AggregateError whose message is empty.
  const inner = err instanceof AggregateError ? err.errors[0] : err;
  const detail = inner instanceof Error ? inner.message || errorCode(inner) || inner.name : String(inner);
  return `cannot start with database ${redact(env.databaseUrl)}: ${detail}`;
}

let env: Env;
try {
  env = parseEnv(process.env);
} catch (err) {
  if (err instanceof EnvError) fail(err.message);
  throw err;
}

let provider: RunningProvider;
try {
  provider = await startProvider({
    databaseUrl: env.databaseUrl,
    port: env.port,
    host: env.host,
    secretKey: env.secretKey,
    testKnobs: env.testKnobs,
    ...(env.webhookUrl === undefined ? {} : { webhookUrl: env.webhookUrl }),
    webhookSecret: env.webhookSecret,
  });
} catch (err) {
  fail(describeStartupError(err, env));
}

const webhooks = env.webhookUrl === undefined ? '' : ` (webhooks to ${redact(env.webhookUrl)})`;
console.log(
  `provider listening on ${provider.url}${webhooks}${env.testKnobs ? ' (test knobs enabled)' : ''}`,
);

let shuttingDown = false;
const shutdown = (signal: NodeJS.Signals): void => {
  if (shuttingDown) {
    // A second Ctrl-C means "now": skip waiting for in-flight requests.
    console.error(`provider: ${signal} again, exiting immediately`);
    process.exit(1);
  }
  shuttingDown = true;
  provider.close().then(
    () => process.exit(0),
    (err: unknown) => fail(`error during shutdown: ${err instanceof Error ? err.message : String(err)}`),
  );
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
