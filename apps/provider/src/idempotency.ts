/**
 * Idempotency keys, Stripe-style. The key row is claimed with `INSERT … ON CONFLICT` in the SAME transaction
 * that performs the charge and stores its response, so:
 *  - a concurrent duplicate blocks on the primary key until the first transaction ends, then sees the stored
 *    response (replay) — there is never a check-then-write window;
 *  - if the first transaction fails, its claim vanishes with it and the retry runs as new.
 */
import { createHash } from 'node:crypto';
import type { StoredResponse } from './charges.ts';
import { type Pool, type PoolClient, withClient } from './db.ts';
import { ApiError, errorCode, invalidRequest } from './errors.ts';

/**
 * After this, a key counts as new. Stripe keeps keys for 24 hours; this provider keeps them 72, so a shop can
 * keep its own keys for the 48–72 h that money needs and still have the provider's outlive them.
 */
export const KEY_TTL_HOURS = 72;

/**
 * How long a duplicate may wait for the in-flight original before getting a 409. The original's transaction only
 * spans a few quick statements, so hitting this means something is wrong; without a bound a stuck transaction
 * would pin every retry and every pooled connection.
 */
const LOCK_TIMEOUT_MS = 5_000;

const KEY_PATTERN = /^[\x20-\x7E]{1,255}$/;

/**
 * Returns the key, `undefined` if the header is absent, or throws 400 for a malformed one (never stored).
 * Pass every received value (`req.headersDistinct['idempotency-key']`): Node joins repeated headers into one
 * string with ", ", which would otherwise turn two keys into a third, valid-looking one.
 */
export function parseIdempotencyKey(header: string | readonly string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' && header.length !== 1) {
    throw invalidRequest('Send exactly one Idempotency-Key header; this request has several.', {
      param: 'Idempotency-Key',
    });
  }
  const value = typeof header === 'string' ? header : header[0];
  if (value === undefined || !KEY_PATTERN.test(value)) {
    throw invalidRequest('Idempotency-Key must be 1 to 255 printable ASCII characters.', {
      param: 'Idempotency-Key',
    });
  }
  return value;
}

/** JSON with object keys sorted at every level, so `{a,b}` and `{b,a}` are the same request. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function fingerprint(params: unknown): string {
  return createHash('sha256').update(canonicalJson(params)).digest('hex');
}

/** The secret itself is never written to the database; its hash identifies the scope just as well. */
export function keyScope(secretKey: string): string {
  return `sk_sha256:${createHash('sha256').update(secretKey).digest('hex')}`;
}

export type IdempotentOutcome =
  | { kind: 'executed'; response: StoredResponse }
  | { kind: 'replayed'; response: StoredResponse };

export const MISMATCH_MESSAGE =
  'Keys for idempotent requests can only be used with the same parameters they were first used with.';

// Claims the key, or re-claims it when the stored one has expired. ON CONFLICT … DO UPDATE locks the existing
// row even when the WHERE is false, so two requests re-claiming the same expired key serialize on that row lock:
// the second then re-checks the WHERE against the first's fresh created_at, gets no row, and replays.
const CLAIM_SQL = `
INSERT INTO provider.idempotency_keys AS k (scope, key, fingerprint)
VALUES ($1, $2, $3)
ON CONFLICT (scope, key) DO UPDATE
   SET fingerprint = EXCLUDED.fingerprint, response_status = NULL, response_body = NULL, created_at = now()
 WHERE k.created_at <= now() - make_interval(hours => $4)
RETURNING 1 AS claimed`;

interface KeyRow {
  fingerprint: string;
  response_status: number | null;
  response_body: string | null;
}

/**
 * Runs `execute` at most once per (scope, key) within the retention window and returns its response, or the
 * stored one on a retry. Throws 422 when the key was used with different parameters and 409 when the original
 * is still in flight past the lock timeout; neither is stored.
 */
export async function runIdempotent(
  pool: Pool,
  request: { scope: string; key: string; fingerprint: string },
  execute: (client: PoolClient) => Promise<StoredResponse>,
): Promise<IdempotentOutcome> {
  let existing: KeyRow | undefined;
  const executed = await withClient(pool, async (client, markBroken) => {
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = ${LOCK_TIMEOUT_MS}`);
      const claim = await client.query(CLAIM_SQL, [
        request.scope,
        request.key,
        request.fingerprint,
        KEY_TTL_HOURS,
      ]);

      if (claim.rowCount === 1) {
        const response = await execute(client);
        await client.query(
          `UPDATE provider.idempotency_keys SET response_status = $3, response_body = $4
            WHERE scope = $1 AND key = $2`,
          [request.scope, request.key, response.status, response.body],
        );
        await client.query('COMMIT');
        return { kind: 'executed', response } as const;
      }

      // Not claimed: the row exists, is unexpired and was committed by another transaction (we waited for it on
      // the index), so this fresh statement snapshot sees its stored response.
      const result = await client.query<KeyRow>(
        `SELECT fingerprint, response_status, response_body FROM provider.idempotency_keys
          WHERE scope = $1 AND key = $2`,
        [request.scope, request.key],
      );
      existing = result.rows[0];
      await client.query('COMMIT'); // Releases the row lock ON CONFLICT took.
      return undefined;
    } catch (err) {
      // Also undoes the claim, so a request that failed (DB error, bug) leaves the key free for a retry.
      try {
        await client.query('ROLLBACK');
      } catch {
        markBroken(); // Connection unusable: destroy it rather than return it to the pool.
      }
      // 55P03 lock_not_available: the duplicate waited LOCK_TIMEOUT_MS for the original and gave up.
      if (errorCode(err) === '55P03') throw inProgress();
      throw err;
    }
  });
  if (executed !== undefined) return executed;

  if (existing === undefined || existing.response_status === null || existing.response_body === null) {
    throw inProgress(); // Defensive: cannot happen while claim and response are written in one transaction.
  }
  if (existing.fingerprint !== request.fingerprint) {
    throw new ApiError(422, 'idempotency_error', MISMATCH_MESSAGE);
  }
  return { kind: 'replayed', response: { status: existing.response_status, body: existing.response_body } };
}

function inProgress(): ApiError {
  return new ApiError(
    409,
    'idempotency_error',
    'There is currently another in-progress request using this Idempotency-Key. Please try again later.',
    {},
    { 'Retry-After': '1' },
  );
}
