/** Between the core's IdempotencyError and tRPC's TRPCError, and between stored errors and replayed ones. */
import { type TRPC_ERROR_CODE_KEY, TRPCError } from '@trpc/server';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';
import type { IdempotencyError } from '../core/errors.ts';
import type { JsonValue, StoredResponse } from '../core/record.ts';

const trpcCodeByStatus = {
  400: 'BAD_REQUEST',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  422: 'UNPROCESSABLE_CONTENT',
  429: 'TOO_MANY_REQUESTS',
  503: 'SERVICE_UNAVAILABLE',
} as const satisfies Record<IdempotencyError['httpStatus'], TRPC_ERROR_CODE_KEY>;

export function toTRPCError(error: IdempotencyError): TRPCError {
  return new TRPCError({ code: trpcCodeByStatus[error.httpStatus], message: error.message, cause: error });
}

/**
 * The cause of a replayed error: a plain Error carrying the original cause's JSON-safe properties (e.g. a
 * business `reason`), so error formatters that read them work the same on the first response and on replays.
 */
export class ReplayedErrorCause extends Error {
  override name = 'ReplayedErrorCause';
  readonly replayed = true;
  [property: string]: unknown;
  constructor(message: string, properties: { [key: string]: JsonValue } = {}) {
    super(message);
    for (const [name, value] of Object.entries(properties)) {
      if (!(name in this)) this[name] = value;
    }
  }
}

export function storedError(error: TRPCError): StoredResponse {
  return {
    kind: 'error',
    httpStatus: getHTTPStatusCodeFromError(error),
    code: error.code,
    message: error.message,
    // A TRPCError subclass carries its detail itself (e.g. `reason`); a plain one, in its cause.
    cause: { ...jsonSafeProperties(error), ...jsonSafeProperties(error.cause) },
  };
}

export function replayedError(response: Extract<StoredResponse, { kind: 'error' }>): TRPCError {
  return new TRPCError({
    code: response.code as TRPC_ERROR_CODE_KEY,
    message: response.message,
    cause: new ReplayedErrorCause(response.message, response.cause),
  });
}

function jsonSafeProperties(cause: unknown): { [key: string]: JsonValue } {
  if (!cause || typeof cause !== 'object') return {};
  const properties: { [key: string]: JsonValue } = {};
  for (const [name, value] of Object.entries(cause)) {
    if (value === null || ['string', 'number', 'boolean'].includes(typeof value))
      properties[name] = value as JsonValue;
  }
  if (cause instanceof Error) properties.name = cause.name;
  return properties;
}
