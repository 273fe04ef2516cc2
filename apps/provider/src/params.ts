/** Request parameters: one validation path (and one error vocabulary) for every /v1 endpoint. */
import type { z } from 'zod';
import { invalidRequest } from './errors.ts';

/** Body as read off the wire; form bodies only have strings. */
export type RequestBody = { kind: 'json'; value: unknown } | { kind: 'form'; value: Record<string, string> };

/**
 * Validates a body against a strict zod object schema and turns the first issue into a Stripe-style 400.
 * `integerFields` are coerced from form strings, and only from plain digit strings, so "12.5" or "1e3" still fail
 * validation as they do in JSON.
 */
export function parseParams<S extends z.ZodType>(
  schema: S,
  body: RequestBody,
  integerFields: readonly string[] = [],
): z.infer<S> {
  let input = body.value;
  if (body.kind === 'form') {
    const coerced: Record<string, string | number> = { ...body.value };
    for (const field of integerFields) {
      const value = body.value[field];
      if (value !== undefined && /^\d+$/.test(value)) coerced[field] = Number(value);
    }
    input = coerced;
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw invalidRequest('The request body must be a JSON object.');
  }
  const result = schema.safeParse(input);
  if (result.success) return result.data;

  const issue = result.error.issues[0];
  if (issue === undefined) throw invalidRequest('Invalid request.');
  if (issue.code === 'unrecognized_keys') {
    const param = issue.keys[0] ?? '';
    throw invalidRequest(`Received unknown parameter: ${param}`, { param });
  }
  const param = issue.path.map(String).join('.');
  // zod 4 does not echo the input in issues by default, so "missing" is decided on the request body itself.
  const field = issue.path[0];
  const missing = typeof field === 'string' && !Object.hasOwn(input, field);
  throw invalidRequest(
    missing ? `Missing required param: ${param}.` : `Invalid ${param}: ${issue.message}.`,
    {
      param,
    },
  );
}
