/**
 * Lease renewal for the Postgres store (`IdempotencyStore.renewLease`): one UPDATE fenced by the lease owner,
 * times from the database's now(). Kept beside the store as a wrapper so a store without it keeps working.
 */
import type { RecordKey } from '../core/record.ts';
import type { IdempotencyStore } from '../core/store.ts';
import type { PrismaClientLike } from './client.ts';
import type { PrismaStoreOptions } from './store.ts';

/** `store` plus `renewLease` on the same table. */
export function withLeaseRenewal<TTx>(
  store: IdempotencyStore<TTx>,
  db: PrismaClientLike,
  options: PrismaStoreOptions = {},
): IdempotencyStore<TTx> {
  const table = quoteTable(options.table ?? 'idempotency_keys');
  return {
    ...store,
    async renewLease(key: RecordKey, owner: string, leaseSeconds: number) {
      const count = await db.$executeRawUnsafe(
        `update ${table} set locked_until = now() + make_interval(secs => $5::double precision)
         where scope = $1 and procedure = $2 and key = $3 and lease_owner = $4::uuid and state = 'processing'`,
        key.scope,
        key.procedure,
        key.key,
        owner,
        leaseSeconds,
      );
      return count === 1;
    },
  };
}

function quoteTable(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/.test(name))
    throw new Error(`Invalid table name: ${name}`);
  return name
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}
