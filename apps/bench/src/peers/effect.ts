/**
 * THE handler every contender runs: one interactive Prisma transaction that inserts one `bench_effects` row and
 * returns `{ id, at }`. The same body as `bench.protected` / `bench.unprotected` in
 * apps/web/test/server/bench-router.ts (copied, not imported: that module pulls in the whole app's env).
 */
import type { Database } from '@idem/db';

/** The table THE handler writes: one row per execution, `n` chosen by the caller so that it can count its own. */
export const BENCH_EFFECTS_TABLE =
  'create table if not exists bench_effects (id bigserial primary key, n int, at timestamptz default now())';

/** THE handler's one statement; `$1` is `n`. */
export const INSERT_EFFECT = 'insert into bench_effects (n) values ($1) returning id, at';

export interface SqlRunner {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
}

export interface Effect {
  id: number;
  at: Date;
}

export async function insertEffect(tx: SqlRunner, n: number): Promise<Effect> {
  const rows = await tx.$queryRawUnsafe<Array<{ id: bigint | number; at: Date }>>(INSERT_EFFECT, n);
  const row = rows[0];
  if (!row) throw new Error('bench_effects: insert returned no row');
  return { id: Number(row.id), at: row.at };
}

/** The unprotected path, and what the peers wrap: the insert in its own interactive transaction. */
export function runEffect(db: Database, n: number): Promise<Effect> {
  return db.$transaction((tx) => insertEffect(tx, n));
}

/** The request body every contender accepts: `{ "n": <int> }`. null when it is anything else. */
export function parseInput(body: unknown): { n: number } | null {
  if (typeof body !== 'object' || body === null || !('n' in body)) return null;
  const { n } = body as { n: unknown };
  return typeof n === 'number' && Number.isInteger(n) ? { n } : null;
}

/**
 * THE handler with one more statement in its transaction (`select 1`), sent as a round trip of its own: the price
 * of one round trip in the transaction. Idem's claim and completion add none (they ride with BEGIN and COMMIT).
 */
export function runEffectAndOneStatement(db: Database, n: number): Promise<Effect> {
  return db.$transaction(async (tx) => {
    await tx.$queryRawUnsafe('select 1');
    return insertEffect(tx, n);
  });
}
