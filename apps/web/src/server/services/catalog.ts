import type { Database } from '@idem/db';

/** The catalog as the shop shows it; prices always come from here, never from a client. */
export async function listProducts(db: Database) {
  return db.product.findMany({
    orderBy: { name: 'asc' },
    select: {
      sku: true,
      name: true,
      description: true,
      priceCents: true,
      currency: true,
      stock: true,
      imageHue: true,
    },
  });
}
export type ProductView = Awaited<ReturnType<typeof listProducts>>[number];
