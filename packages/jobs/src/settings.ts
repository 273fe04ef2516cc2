/**
 * Env-configurable numbers, parsed with zod so a bad value fails at start with the variable's name. An empty
 * variable counts as unset (`FOO=` must not become 0).
 */
import { z } from 'zod';

const blankIsUnset = (value: unknown) => (value === '' ? undefined : value);

export function intFromEnv(min: number, fallback: number) {
  return z.preprocess(blankIsUnset, z.coerce.number().int().min(min).default(fallback));
}

export function numberFromEnv(min: number, fallback: number) {
  return z.preprocess(blankIsUnset, z.coerce.number().min(min).default(fallback));
}

/** "FOO: Too small: expected number to be >=1; BAR: …" */
export function describeZodError(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');
}
