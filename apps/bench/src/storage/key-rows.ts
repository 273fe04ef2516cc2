/**
 * Realistic idempotency keys, bulk-loaded in ONE `INSERT … SELECT … FROM generate_series` statement each (the
 * indexes are maintained as rows go in, as in production), and the same derivation in JS so a probe can name a
 * key that exists without reading it first.
 *
 * Row i of a batch tagged `tag`: key = md5('<tag>-<i>') formatted as a UUID (clients send UUIDs: random order in
 * the primary key), scope = one of `scopes` principals (or the heavy principal for one row in `heavyEvery`),
 * one of four procedures, state `completed` with a ~220-byte stored response (the shape the store writes),
 * created 24 h before it expires. Expiry times are spread evenly between two offsets from now(), in insertion
 * order, so the physical order of the heap follows time as it does under real traffic.
 */
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';

export const PROCEDURES = [
  'checkout.placeOrder',
  'cart.addItem',
  'account.updateAddress',
  'orders.requestRefund',
] as const;

export const HEAVY_SCOPE = 'api:heavy-integration';
export const RETENTION_SECONDS = 86_400;

export interface KeyBatch {
  /** Table name, already safe to splice into SQL (e.g. `idempotency_keys`). */
  table: string;
  /** Distinguishes key sets so batches never collide: e.g. 'expired', 'live', 'growth'. */
  tag: string;
  /** Inclusive range of i. */
  from: number;
  to: number;
  scopes: number;
  /** One row in this many goes to HEAVY_SCOPE; 0 = none. */
  heavyEvery: number;
  /** Expiry of row `from` and of row `to`, in seconds from now() (negative = already expired). */
  expiresFromSeconds: number;
  expiresToSeconds: number;
  /** The instant the offsets count from; default the statement's now(). */
  baseTime?: Date;
}

export function uuidFromMd5(text: string): string {
  const hex = createHash('md5').update(text).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function keyOf(tag: string, i: number): string {
  return uuidFromMd5(`${tag}-${i}`);
}

export function lightScope(index: number): string {
  return `user:${uuidFromMd5(`scope-${index}`)}`;
}

export function scopeOf(i: number, scopes: number, heavyEvery: number): string {
  return heavyEvery > 0 && i % heavyEvery === 0 ? HEAVY_SCOPE : lightScope(i % scopes);
}

export function procedureOf(i: number): string {
  return PROCEDURES[i % PROCEDURES.length] ?? PROCEDURES[0];
}

/** The stored response of row i (JS mirror of the SQL below; used by the probes' `complete`). */
export function responseBodyOf(i: number): string {
  return JSON.stringify({
    json: {
      orderId: uuidFromMd5(`o-${i}`),
      status: 'paid',
      totalCents: i % 100_000,
      currency: 'usd',
      items: 2,
      createdAt: '2026-11-30T12:00:00.000Z',
    },
  });
}

const LOAD_SQL = (table: string) => `
  insert into ${table}
      (scope, procedure, key, fingerprint, state, response, http_status, created_at, expires_at, replay_count)
  select
      case when $5::int > 0 and i % $5::int = 0 then '${HEAVY_SCOPE}'
           else 'user:' || md5('scope-' || (i % $4::int))::uuid end,
      (array[${PROCEDURES.map((name) => `'${name}'`).join(', ')}])[1 + i % ${PROCEDURES.length}],
      md5($3 || '-' || i)::uuid::text,
      md5('fp-' || i) || md5('fq-' || i),
      'completed',
      '{"kind":"output","httpStatus":200,"body":"{\\"json\\":{\\"orderId\\":\\"' || md5('o-' || i)::uuid
        || '\\",\\"status\\":\\"paid\\",\\"totalCents\\":' || (i % 100000)
        || ',\\"currency\\":\\"usd\\",\\"items\\":2,\\"createdAt\\":\\"2026-11-30T12:00:00.000Z\\"}}"}',
      200,
      expires - make_interval(secs => ${RETENTION_SECONDS}),
      expires,
      0
  from generate_series($1::bigint, $2::bigint) as i,
       lateral (select coalesce($8::timestamptz, now()) + make_interval(secs => $6::double precision
         + (i - $1::bigint)::double precision * ($7::double precision - $6::double precision)
           / greatest($2::bigint - $1::bigint, 1))) as e(expires)`;

/** Loads one batch in one statement; returns the rows inserted and the wall time. */
export async function loadKeys(client: pg.Client, batch: KeyBatch): Promise<{ rows: number; ms: number }> {
  if (batch.to < batch.from) return { rows: 0, ms: 0 };
  const started = performance.now();
  const result = await client.query(LOAD_SQL(batch.table), [
    batch.from,
    batch.to,
    batch.tag,
    batch.scopes,
    batch.heavyEvery,
    batch.expiresFromSeconds,
    batch.expiresToSeconds,
    batch.baseTime ?? null,
  ]);
  return { rows: result.rowCount ?? 0, ms: performance.now() - started };
}
