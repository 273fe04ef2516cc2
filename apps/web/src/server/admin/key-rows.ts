/**
 * The admin tools' view of idempotency keys: the library's key operations (`@idem/idempotency/prisma`), which
 * own the table's SQL, plus the ref the admin pages link with. Never carries the stored response body.
 */
import type { Database } from '@idem/db';
import {
  createIdempotencyKeyOperations,
  type IdempotencyKeyOperations,
  type IdempotencyKeyRow,
  type PrismaTransactionLike,
} from '@idem/idempotency/prisma';
import { encodeKeyRef } from '~/lib/key-ref';

export type { KeyStatus } from '@idem/idempotency/prisma';

export type KeyView = IdempotencyKeyRow & { ref: string };

export type KeyOperations = IdempotencyKeyOperations<PrismaTransactionLike<Database>>;

const operations = new WeakMap<Database, KeyOperations>();

/** The key operations on `db`'s key table (one per client: it remembers its table checks). */
export function keyOperations(db: Database): KeyOperations {
  let ops = operations.get(db);
  if (!ops) {
    ops = createIdempotencyKeyOperations(db);
    operations.set(db, ops);
  }
  return ops;
}

export function toKeyView(row: IdempotencyKeyRow): KeyView {
  return { ...row, ref: encodeKeyRef(row) };
}

/** Keys still processing whose lease has ended (their owner died mid-request), newest first. */
export async function listStuckKeys(db: Database, limit = 20): Promise<KeyView[]> {
  return (await keyOperations(db).findKeys({ status: 'stuck' }, { limit })).map(toKeyView);
}
