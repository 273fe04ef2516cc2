/**
 * The secrets the stack runner hands to the web app and the provider. A production process refuses to start
 * with none or with the public demo values, so `pnpm start` generates its own once into the data directory
 * (kept across restarts: sessions survive, and the web app and the provider keep agreeing), the e2e stack
 * generates fresh ones per run, and `pnpm dev` leaves them unset (the apps' development defaults apply).
 * A variable already set in the environment always wins.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export type StackMode = 'dev' | 'start' | 'e2e';

/** Environment variable → file under the data directory (`pnpm start`) and the prefix of a generated value. */
export const STACK_SECRETS = {
  SESSION_SECRET: { file: 'session-secret', prefix: '' },
  PROVIDER_SECRET_KEY: { file: 'provider-secret-key', prefix: 'sk_idem_' },
  PROVIDER_WEBHOOK_SECRET: { file: 'provider-webhook-secret', prefix: 'whsec_idem_' },
  METRICS_TOKEN: { file: 'metrics-token', prefix: 'idem_metrics_' },
  IDEM_RESPONSE_SECRET: { file: 'response-secret', prefix: '' },
} as const;

export type StackSecretName = keyof typeof STACK_SECRETS;

function generate(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

/** The file's secret, written (owner-only) first if it does not exist yet or is empty (an interrupted write). */
function persisted(file: string, prefix: string): string {
  if (!existsSync(file) || readFileSync(file, 'utf8').trim() === '') {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, generate(prefix), { mode: 0o600 });
  }
  return readFileSync(file, 'utf8').trim();
}

/** The values to put in both processes' environment; the names left out keep the apps' defaults. */
export function stackSecrets(
  mode: StackMode,
  dataDir: string,
  environment: Readonly<Record<string, string | undefined>>,
): Partial<Record<StackSecretName, string>> {
  const secrets: Partial<Record<StackSecretName, string>> = {};
  for (const [name, { file, prefix }] of Object.entries(STACK_SECRETS) as Array<
    [StackSecretName, (typeof STACK_SECRETS)[StackSecretName]]
  >) {
    const given = environment[name];
    if (given) secrets[name] = given;
    else if (mode === 'e2e') secrets[name] = generate(prefix);
    else if (mode === 'start') secrets[name] = persisted(path.join(dataDir, file), prefix);
  }
  return secrets;
}
