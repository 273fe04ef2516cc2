/**
 * A copy of a seeded product (same name, price and stock) under a SKU only the calling test uses: test files run
 * in parallel on one database, and another file's order of the seeded product would move the stock a test counts.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';

export async function ownCopyOf(db: Database, seededSku: string): Promise<string> {
  const {
    id: _id,
    sku: _sku,
    ...product
  } = await db.product.findUniqueOrThrow({ where: { sku: seededSku } });
  const sku = `${seededSku}-${randomUUID().slice(0, 8)}`;
  await db.product.create({ data: { ...product, sku } });
  return sku;
}
