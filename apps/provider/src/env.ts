/**
 * Environment for `main.ts`, parsed exactly once with zod so a misconfiguration fails at startup with one readable
 * line instead of surfacing later as an odd runtime error.
 */
import { missingProductionSecret, productionSecretProblem } from '@idem/contracts';
import { z } from 'zod';
import { DEFAULT_WEBHOOK_SECRET } from './signature.ts';

export const DEFAULT_SECRET_KEY = 'sk_test_idem';

// An exported-but-empty variable (`PORT= pnpm start`) means "unset", as most shells and dotenv files intend it.
const unsetIfEmpty = (value: unknown): unknown => (value === '' ? undefined : value);

/** In production a secret must be given, and pass @idem/contracts' rule; elsewhere the demo value stands in. */
function secret(name: string, demoValue: string, production: boolean) {
  if (!production) return z.preprocess(unsetIfEmpty, z.string().default(demoValue));
  return z.preprocess(
    unsetIfEmpty,
    z.string({ error: missingProductionSecret(name) }).superRefine((value, context) => {
      const problem = productionSecretProblem(name, value, demoValue);
      if (problem) context.addIssue({ code: 'custom', message: problem });
    }),
  );
}

const envSchema = (production: boolean) =>
  z.object({
    PORT: z.preprocess(
      unsetIfEmpty,
      z
        .string()
        .regex(/^\d{1,5}$/, 'PORT must be an integer between 0 and 65535')
        .transform(Number)
        .pipe(z.number().int().min(0, 'PORT must be >= 0').max(65535, 'PORT must be <= 65535'))
        .default(4000),
    ),
    HOST: z.preprocess(unsetIfEmpty, z.string().default('127.0.0.1')),
    DATABASE_URL: z.preprocess(
      unsetIfEmpty,
      z
        .string({
          error: 'DATABASE_URL is required (e.g. DATABASE_URL=postgresql://postgres@127.0.0.1:5432/idem)',
        })
        .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must start with postgres:// or postgresql://'),
    ),
    PROVIDER_SECRET_KEY: secret('PROVIDER_SECRET_KEY', DEFAULT_SECRET_KEY, production),
    PROVIDER_WEBHOOK_URL: z.preprocess(
      unsetIfEmpty,
      z
        .string()
        .refine((value) => /^https?:\/\//i.test(value) && URL.canParse(value), {
          error: 'PROVIDER_WEBHOOK_URL must be an http:// or https:// URL',
        })
        .optional(),
    ),
    PROVIDER_WEBHOOK_SECRET: secret('PROVIDER_WEBHOOK_SECRET', DEFAULT_WEBHOOK_SECRET, production),
    PROVIDER_TEST_KNOBS: z.preprocess(
      unsetIfEmpty,
      z
        .enum(['0', '1', 'false', 'true'], { error: 'PROVIDER_TEST_KNOBS must be 1 or 0' })
        .default('0')
        .transform((value) => value === '1' || value === 'true'),
    ),
  });

export interface Env {
  port: number;
  host: string;
  databaseUrl: string;
  secretKey: string;
  testKnobs: boolean;
  /** Unset: events are recorded but not delivered. */
  webhookUrl: string | undefined;
  webhookSecret: string;
}

/** Thrown with a one-line message that main.ts prints as-is (no stack trace: it is a config error, not a bug). */
export class EnvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EnvError';
  }
}

/**
 * Production (NODE_ENV=production unless told otherwise) demands real secrets (see `secret`); anything else keeps
 * the test-mode defaults.
 */
export function parseEnv(
  source: Readonly<Record<string, string | undefined>>,
  { production = source.NODE_ENV === 'production' }: { production?: boolean } = {},
): Env {
  const result = envSchema(production).safeParse(source);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => issue.message);
    throw new EnvError(`invalid environment: ${problems.join('; ')}`);
  }
  const env = result.data;
  return {
    port: env.PORT,
    host: env.HOST,
    databaseUrl: env.DATABASE_URL,
    secretKey: env.PROVIDER_SECRET_KEY,
    testKnobs: env.PROVIDER_TEST_KNOBS,
    webhookUrl: env.PROVIDER_WEBHOOK_URL,
    webhookSecret: env.PROVIDER_WEBHOOK_SECRET,
  };
}
