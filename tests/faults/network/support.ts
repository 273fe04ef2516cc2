/** Shared helpers for the network-fault tests: scratch databases, HTTP statuses and a bounded retrying client. */
import { migrateDatabase } from '@idem/dev-db/migrate';
import { createDatabase, dropDatabase, scratchDatabaseName } from '@idem/dev-db/postgres';

export {
  createTestTRPC,
  requestContext,
  type TestContext,
} from '../../../packages/idempotency/test/support/trpc.ts';

/** A migrated database of its own on the server behind `adminUrl`. */
export async function createScratchDatabase(adminUrl: string, prefix: string) {
  const name = scratchDatabaseName(prefix);
  const url = await createDatabase(adminUrl, name);
  await migrateDatabase(url);
  return { url, drop: () => dropDatabase(adminUrl, name) };
}

/** tRPC's mapping of error codes to HTTP statuses (what the fetch adapter would answer). */
const HTTP_STATUS: Record<string, number> = {
  PARSE_ERROR: 400,
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  PAYMENT_REQUIRED: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_SUPPORTED: 405,
  TIMEOUT: 408,
  CONFLICT: 409,
  PRECONDITION_FAILED: 412,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  UNPROCESSABLE_CONTENT: 422,
  TOO_MANY_REQUESTS: 429,
  CLIENT_CLOSED_REQUEST: 499,
  INTERNAL_SERVER_ERROR: 500,
  NOT_IMPLEMENTED: 501,
  BAD_GATEWAY: 502,
  SERVICE_UNAVAILABLE: 503,
  GATEWAY_TIMEOUT: 504,
};

export function httpStatusOf(error: unknown): number {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? (HTTP_STATUS[code] ?? 500) : 500;
}

export interface Attempt {
  status: number;
  replayed: boolean;
}

export interface RetriedCall<T> {
  value: T | undefined;
  ok: boolean;
  attempts: Attempt[];
}

export interface RetryOptions {
  maxAttempts: number;
  /** Wait before a retry when the answer carries no Retry-After. */
  delayMs: number;
  /** Cap on a Retry-After wait. */
  maxRetryAfterMs?: number;
}

/**
 * A client's attempt loop with one key: retries 5xx and 409 (the only answers a retry with the same key can
 * fix, as `@idem/idempotency/client`'s policy), honouring Retry-After.
 */
export async function callWithRetries<T, C extends { resHeaders: Headers }>(
  send: (ctx: C) => Promise<T>,
  makeContext: () => C,
  { maxAttempts, delayMs, maxRetryAfterMs = 1_000 }: RetryOptions,
): Promise<RetriedCall<T>> {
  const attempts: Attempt[] = [];
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const ctx = makeContext();
    try {
      const value = await send(ctx);
      attempts.push({ status: 200, replayed: ctx.resHeaders.get('Idempotent-Replayed') === 'true' });
      return { value, ok: true, attempts };
    } catch (error) {
      const status = httpStatusOf(error);
      attempts.push({ status, replayed: false });
      if (!(status >= 500 || status === 409)) return { value: undefined, ok: false, attempts };
      const retryAfter = Number(ctx.resHeaders.get('Retry-After'));
      const wait = retryAfter > 0 ? Math.min(retryAfter * 1_000, maxRetryAfterMs) : delayMs;
      await new Promise((resolve) => setTimeout(resolve, wait * (0.5 + Math.random() / 2)));
    }
  }
  return { value: undefined, ok: false, attempts };
}
